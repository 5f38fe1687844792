"""What a state directory uses on disk, by part (`state.du`, `reynctl du`).

`part_of` is pure (a path relative to the state directory to the name of its
part); `measure` walks the directory (blocking I/O: the daemon runs it on a
worker thread) and counts regular files only, never following a symlink.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["PARTS", "Usage", "measure", "part_of"]

# (name, path relative to the state directory), most specific first.
PARTS: tuple[tuple[str, str], ...] = (
    ("torn", "state/wal/torn"),
    ("wal", "state/wal"),
    ("snapshots", "state/snapshots"),
    ("index", "state/index"),
    ("config", "state/config"),
    ("blobs", "state/blobs"),
    ("manifests", "state/manifests"),
    ("trees", "state/trees"),
    ("audit", "events"),
)


@dataclass(slots=True)
class Usage:
    path: str
    bytes: int = 0
    disk_bytes: int = 0
    files: int = 0


def part_of(relative: PurePosixPath) -> str:
    """The part a file belongs to (`other` for anything no part names)."""
    for name, prefix in PARTS:
        if relative.is_relative_to(prefix):
            return name
    return "other"


def measure(root: Path) -> dict[str, Usage]:
    """Usage of every part under `root` (a state directory), `other` included, zeros too."""
    usage = {name: Usage(path) for name, path in PARTS}
    usage["other"] = Usage(".")
    for dirpath, _dirs, files in os.walk(root):
        base = PurePosixPath(Path(dirpath).relative_to(root).as_posix())
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue  # removed meanwhile (GC, rotation)
            if not stat.S_ISREG(st.st_mode):
                continue
            part = usage[part_of(base / name)]
            part.bytes += st.st_size
            part.disk_bytes += st.st_blocks * 512
            part.files += 1
    return usage

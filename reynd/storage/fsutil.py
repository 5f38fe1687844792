"""Small durable-file primitives (DURABILITY.md rules 1, 3 and 4).

Every call that changes the disk goes through `fsops` (see there).
"""

from __future__ import annotations

import os
from pathlib import Path

from reynd.storage import fsops

__all__ = ["atomic_write", "fsync_dir", "make_dirs", "write_all", "write_durable"]


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written: a short write is not an error."""
    view = memoryview(data)
    while view:
        n = fsops.write(fd, view)
        view = view[n:]


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a created, renamed or removed file) durable."""
    fd = fsops.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsops.fsync(fd)
    finally:
        fsops.close(fd)


def make_dirs(path: Path) -> bool:
    """`mkdir -p` (mode 0o777 & ~umask); True when `path` itself was created.

    The caller syncs the parent of each directory it created (rule 3).
    """
    if path.is_dir():
        return False
    make_dirs(path.parent)
    try:
        fsops.mkdir(path)
    except FileExistsError:
        if not path.is_dir():
            raise
        return False
    return True


def write_durable(path: Path, data: bytes) -> None:
    """Create (or truncate) `path` with `data`, fsynced; the caller syncs the directory."""
    fd = fsops.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
        fsops.fsync(fd)
    finally:
        fsops.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Publish `data` at `path` so a crash leaves either the old file or the new one.

    tmp in the same directory, written in full, fsync, rename, fsync the
    directory: renaming before the fsync is the classic zero-length file.
    """
    tmp = path.with_name(f".tmp-{path.name}")
    write_durable(tmp, data)
    fsops.replace(tmp, path)
    fsync_dir(path.parent)

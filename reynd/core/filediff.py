"""Two workspace trees compared file by file, with unified diffs of text files (pure).

A tree is a flat mapping path -> (kind, mode, ref, size) as the workspace's manifests
hold it; the bytes of a file come from `read`, asked only for files that differ.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_DIFF_BYTES", "FileDelta", "Entry", "compare_trees", "is_binary", "unified"]

# A file larger than this is named, not diffed: a diff of it would not be read.
MAX_DIFF_BYTES = 1024 * 1024

Entry = tuple[str, int, str, int]  # (kind "f" | "l", mode, ref: blob sha256 or link target, size)


@dataclass(frozen=True, slots=True)
class FileDelta:
    path: str
    op: Literal["add", "remove", "change"]
    before: Entry | None
    after: Entry | None
    binary: bool
    patch: str | None


def is_binary(data: bytes) -> bool:
    """git's rule: a NUL byte in the first 8000 bytes; and anything not UTF-8."""
    if b"\0" in data[:8000]:
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return True
    return False


def unified(path: str, before: bytes | None, after: bytes | None) -> str:
    """A unified diff of two texts, `a/PATH` and `b/PATH` as git names them (None: the
    file is absent on that side, /dev/null)."""
    lines = difflib.unified_diff(
        (before or b"").decode().splitlines(keepends=True),
        (after or b"").decode().splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
    )
    out: list[str] = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def compare_trees(
    before: Mapping[str, Entry], after: Mapping[str, Entry], read: Callable[[str], bytes]
) -> list[FileDelta]:
    """Every path whose entry differs, sorted; a text file's change carries its patch."""
    out: list[FileDelta] = []
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        op: Literal["add", "remove", "change"] = (
            "add" if a is None else "remove" if b is None else "change"
        )
        binary, patch = _patch(path, a, b, read)
        out.append(FileDelta(path, op, a, b, binary, patch))
    return out


def _patch(
    path: str, a: Entry | None, b: Entry | None, read: Callable[[str], bytes]
) -> tuple[bool, str | None]:
    """(binary, patch) for one changed path: no patch for links, big or binary files."""
    sides = [e for e in (a, b) if e is not None]
    if any(e[0] != "f" for e in sides) or any(e[3] > MAX_DIFF_BYTES for e in sides):
        return False, None
    if a is not None and b is not None and a[2] == b[2]:
        return False, None  # only the mode changed
    old, new = (None if e is None else read(e[2]) for e in (a, b))
    if any(d is not None and is_binary(d) for d in (old, new)):
        return True, None
    return False, unified(path, old, new)

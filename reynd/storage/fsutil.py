"""Small durable-file primitives (DURABILITY.md rules 1, 3 and 4)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir", "write_all"]


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written: a short write is not an error."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a created, renamed or removed file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Publish `data` at `path` so a crash leaves either the old file or the new one.

    tmp in the same directory, written in full, fsync, rename, fsync the
    directory: renaming before the fsync is the classic zero-length file.
    """
    tmp = path.with_name(f".tmp-{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)

"""Small durable-file primitives (docs/durability.md rules 1, 3 and 4), and private modes.

Every call that changes the disk goes through `fsops` (see there).

Everything reynd creates under its state directory is private: directories
0700, files 0600 (agent options, a command agent's `env`, conversation
history). The mode is given at creation (`make_dir`, `make_dirs`,
`open_private`, `create_empty`), never fixed afterwards, so there is no window
at a wider mode. The umask can only remove bits and these modes have none for
group or other, so the result is the same under any umask that leaves the
owner's bits alone (022, 000, 077...). The process umask is not touched: it
is inherited by the programs a command executor runs, which write the user's
files.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from reynd.storage import crashpoints, fsops

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "atomic_write",
    "create_empty",
    "fsync_dir",
    "make_dir",
    "make_dirs",
    "open_private",
    "restrict_dir",
    "write_all",
    "write_durable",
    "write_halves",
]

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written: a short write is not an error."""
    view = memoryview(data)
    while view:
        n = fsops.write(fd, view)
        view = view[n:]


def write_halves(fd: int, data: bytes, point: str) -> None:
    """write_all, with crash point `point` once half of `data` is written (a torn file)."""
    half = len(data) // 2
    write_all(fd, data[:half])
    crashpoints.hit(point)
    write_all(fd, data[half:])


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a created, renamed or removed file) durable."""
    fd = fsops.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsops.fsync(fd)
    finally:
        fsops.close(fd)


def make_dir(path: Path) -> None:
    """Create one directory, 0700; FileExistsError if anything is at `path`."""
    fsops.mkdir(path, DIR_MODE)


def make_dirs(path: Path) -> bool:
    """`mkdir -p`, each directory it creates 0700; True when `path` itself was created.

    The caller syncs the parent of each directory it created (rule 3).
    """
    if path.is_dir():
        return False
    make_dirs(path.parent)
    try:
        make_dir(path)
    except FileExistsError:
        if not path.is_dir():
            raise
        return False
    return True


def open_private(path: Path, flags: int) -> int:
    """os.open(path, flags | O_CREAT): a file it creates is 0600.

    An existing file keeps its mode (one written by an older reynd is
    shielded by the state directory's own 0700, see `Store.open`).
    """
    return fsops.open(path, flags | os.O_CREAT, FILE_MODE)


def create_empty(path: Path) -> None:
    """Create `path` empty, 0600, unless it exists: for files another library then opens.

    SQLite creates a database 0644 & ~umask, and gives its journal the
    database's mode: an empty file is a valid new database, so creating it
    first makes both private.
    """
    fsops.close(open_private(path, os.O_WRONLY))


def restrict_dir(path: Path) -> int | None:
    """Take group and other permissions off an existing directory; its old mode if it had any.

    The migration for state directories made by an older reynd (0755 under
    umask 022): with the root at 0700, nothing below it is reachable by
    other users, whatever the modes of the files in it.
    """
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if not mode & 0o077:
        return None
    os.chmod(path, mode & ~0o077)
    return mode


def write_durable(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Create (or truncate) `path` with `data`, fsynced; the caller syncs the directory.

    `exclusive`: the file must not exist yet (FileExistsError otherwise).
    """
    fd = open_private(path, os.O_WRONLY | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC))
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
    try:
        write_durable(tmp, data)
        fsops.replace(tmp, path)
    except BaseException:
        # A full disk must not keep the half-written tmp file: its space is wanted back.
        with contextlib.suppress(OSError):
            fsops.unlink(tmp)
        raise
    fsync_dir(path.parent)

"""The state directory's lock: one daemon per `.reyn/`.

An exclusive `flock` on `<state_dir>/state/LOCK`, held for the daemon's life.
The kernel releases it when the process dies, so a crash never leaves a stale
lock; the pid written into the file is only there to name the holder in the
refusal message. The file is never unlinked: unlinking a lock file lets two
processes lock two different inodes under the same name.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reynd.storage.fsutil import FILE_MODE, make_dirs

__all__ = ["LOCK_NAME", "StateLocked", "hold_lock", "lock_path"]

LOCK_NAME = "LOCK"


class StateLocked(Exception):
    """Another process holds the state directory's lock."""

    def __init__(self, pid: int | None, path: Path) -> None:
        holder = f"pid {pid}" if pid else "pid unknown"
        super().__init__(f"another daemon ({holder}) holds {path}")
        self.pid = pid
        self.path = path


def lock_path(state_dir: Path) -> Path:
    """Where the lock of `state_dir` lives."""
    return state_dir / "state" / LOCK_NAME


@contextmanager
def hold_lock(state_dir: Path) -> Iterator[Path]:
    """Hold the lock of `state_dir` for the duration of the block; yields its path.

    Raises StateLocked (with the holder's pid) when another process holds it,
    and RuntimeError when this very process already does (two opens of the same
    state directory in one process are a bug, not a second daemon).
    """
    path = lock_path(state_dir)
    make_dirs(path.parent)
    # os.open, not fsutil.open_private: the lock is no data, and stays out of
    # the simulated disk of the storage tests (which goes through fsops).
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            pid = _read_pid(fd)
            if pid == os.getpid():
                raise RuntimeError(f"{path} is already held by this process") from None
            raise StateLocked(pid, path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the flock


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None

"""Which workspace paths changed since the last look: Linux inotify, through ctypes.

Every directory of the workspace that is not ignored is watched. The kernel
queues an event for a change before the system call that made it returns,
so once a step's executor has returned (its process reaped), every change
it made is in the queue: draining it tells which paths to look at, and what
a step costs is what it changed, not the size of the workspace.

`Dirty` collects what the events say: paths to look at again, directories
created, deleted or moved (everything below them, on disk and in the
model, is looked at), or `full` (the queue overflowed, the workspace root
itself moved, a watch could not be added): look at everything. Without
inotify (another OS, no watch left) a Watcher cannot be made, and the
workspace falls back to a full scan (with its stat cache) per record.

Not seen by inotify: writes through a shared memory map, and changes made
on another machine to a network file system. They are found by the full
scan a checkout runs first, as changes reynd did not record.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import stat as st
import struct
from dataclasses import dataclass, field
from pathlib import Path

from reynd.workspace.tree import MAX_DEPTH, TMP_PREFIX, Ignore

__all__ = ["Dirty", "Watcher", "WatchUnavailable"]

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000

MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
READ_SIZE = 1 << 16


class WatchUnavailable(OSError):
    """inotify cannot watch this workspace (no inotify, or no watch left)."""


@dataclass(slots=True)
class Dirty:
    """What to look at before the next record."""

    paths: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)  # everything below these
    full: bool = False

    def __bool__(self) -> bool:
        return bool(self.paths or self.dirs or self.full)

    def clear(self) -> None:
        self.paths.clear()
        self.dirs.clear()
        self.full = False

    def update(self, other: Dirty) -> None:
        self.paths |= other.paths
        self.dirs |= other.dirs
        self.full = self.full or other.full


def _libc() -> ctypes.CDLL:
    name = ctypes.util.find_library("c")
    lib = ctypes.CDLL(name, use_errno=True)
    if not hasattr(lib, "inotify_init1"):
        raise WatchUnavailable(errno.ENOSYS, "no inotify in this C library")
    lib.inotify_init1.argtypes = [ctypes.c_int]
    lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return lib


class Watcher:
    """One inotify instance watching every directory of a workspace that is not ignored."""

    def __init__(self, root: Path, ignore: Ignore) -> None:
        self.root = root
        self._ignore = ignore
        try:
            self._lib = _libc()
        except OSError as exc:
            raise WatchUnavailable(errno.ENOSYS, f"inotify: {exc}") from None
        fd = self._lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise WatchUnavailable(e, f"inotify_init1: {os.strerror(e)}")
        self.fd: int = fd
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory ("" the root)
        self._buf = b""
        # The root was moved or deleted: these watches follow the old directory and
        # see nothing of one made anew at its path (the owner starts a new Watcher).
        self.root_lost = False
        try:
            self.watch_tree("")
        except BaseException:
            self.close()
            raise
        self.root_lost = not self._dirs  # no root to watch yet: the owner tries again

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def watches(self) -> int:
        return len(self._dirs)

    # -- reading -----------------------------------------------------------------------

    def read_nowait(self) -> bytes:
        """Whatever the kernel queued so far (b"" when nothing): one system call."""
        try:
            return os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return b""

    def drain(self, first: bytes, dirty: Dirty) -> None:
        """Read the whole queue (after `first`, already read) into `dirty`; watch new dirs."""
        data = first
        while data:
            self._absorb(data, dirty)
            data = self.read_nowait()

    def _absorb(self, data: bytes, dirty: Dirty) -> None:
        buf = self._buf + data
        pos = 0
        while len(buf) - pos >= _HEADER.size:
            wd, mask, _, length = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + length
            if end > len(buf):
                break
            raw = buf[pos + _HEADER.size : end].rstrip(b"\0")
            pos = end
            self._event(wd, mask, raw, dirty)
        self._buf = buf[pos:]

    def _event(self, wd: int, mask: int, raw: bytes, dirty: Dirty) -> None:
        if mask & IN_Q_OVERFLOW:
            dirty.full = True
            self.watch_tree("")  # directories made meanwhile were not seen
            return
        base = self._dirs.get(wd)
        if base is None:
            return  # a watch we dropped
        if mask & IN_IGNORED:
            del self._dirs[wd]
            self.root_lost = self.root_lost or base == ""
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            if base == "":  # the workspace itself moved or went: look at everything
                dirty.full = True
                self.root_lost = True
            return  # another directory: its parent's event says it
        self._entry_event(base, mask, raw, dirty)

    def _entry_event(self, base: str, mask: int, raw: bytes, dirty: Dirty) -> None:
        """An event on the entry named `raw` of the watched directory `base`."""
        name = os.fsdecode(raw)
        try:
            name.encode()
        except UnicodeEncodeError:
            return  # never workspace content (see tree.walk)
        rel = f"{base}/{name}" if base else name
        if name.startswith(TMP_PREFIX):
            return
        is_dir = bool(mask & IN_ISDIR)
        if self._ignore(rel, is_dir):
            return
        dirty.paths.add(rel)  # a file there may be gone, or a file may have replaced a dir
        if not is_dir:
            return
        if mask & (IN_CREATE | IN_MOVED_TO):
            self.watch_tree(rel)
            dirty.dirs.add(rel)
        elif mask & (IN_DELETE | IN_MOVED_FROM):
            self._unwatch_tree(rel)
            dirty.dirs.add(rel)

    # -- watches -----------------------------------------------------------------------

    def watch_tree(self, rel: str) -> None:
        """Watch `rel` and every directory below it (each before it is listed)."""
        stack = [rel]
        while stack:
            d = stack.pop()
            path = self.root / d if d else self.root
            wd = self._lib.inotify_add_watch(self.fd, os.fsencode(path), MASK)
            if wd < 0:
                e = ctypes.get_errno()
                if e in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    continue  # gone already (its parent's event says so), or not ours
                raise WatchUnavailable(e, f"inotify_add_watch {path}: {os.strerror(e)}")
            self._dirs[wd] = d
            try:
                entries = list(os.scandir(path))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                sub = f"{d}/{entry.name}" if d else entry.name
                try:
                    is_dir = st.S_ISDIR(entry.stat(follow_symlinks=False).st_mode)
                except FileNotFoundError:
                    continue
                if is_dir and not self._ignore(sub, True) and sub.count("/") < MAX_DEPTH:
                    stack.append(sub)

    def _unwatch_tree(self, rel: str) -> None:
        prefix = rel + "/"
        for wd, d in list(self._dirs.items()):
            if d == rel or d.startswith(prefix):
                self._lib.inotify_rm_watch(self.fd, wd)  # EINVAL when already gone: fine
                del self._dirs[wd]

"""The preflight: proving, before a reset record is written, that a restore can finish.

Read-only but for one probe file per directory the restore changes entries
in. What it finds is refused by the caller (workspace_unrestorable) before
anything is written; see `preflight`.
"""

from __future__ import annotations

import fcntl
import os
import stat as st
import struct
from collections.abc import Callable
from pathlib import Path

from reynd.storage import fsops
from reynd.workspace.blobs import ObjectStore
from reynd.workspace.dirs import Dirs, Unsafe, is_special, lstat_at, os_reason, split_path, tmp_name
from reynd.workspace.model import Item, Tree
from reynd.workspace.restore import CREATE_FLAGS, plan_restore
from reynd.workspace.tree import DIR_FLAGS, FILE_FLAGS, Ignore, Scan

__all__ = ["NAME_MAX", "SPACE_MARGIN", "preflight"]

# FS_IOC_GETFLAGS (_IOR('f', 1, long)) and the inode flags that stop even root.
_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_IMMUTABLE, _APPEND_ONLY = 0x10, 0x20
SPACE_MARGIN = 1 << 20  # bytes kept free beyond what the restore writes
NAME_MAX = 255


def preflight(
    root: Path, ignore: Ignore, current: Scan, target: Tree, objects: ObjectStore
) -> list[tuple[str, str]]:
    """What would stop restoring `target` over `current`: (path, why), empty when none.

    Read-only but for one probe per directory the restore changes entries
    in: a tmp file created and removed, which proves the directory takes
    changes (permissions, a read-only mount, quotas, security modules).
    Checked: every name fits the file system (NAME_MAX); every directory on
    the way is a real one, or can be created; no directory, and no file to
    replace or delete, is immutable or append-only (the inode flags, which
    bind root too); no special file sits where a file goes; no directory
    holding what reynd does not restore sits where a file goes; every blob
    is stored; the space and inodes the writes need are free, with a margin.
    """
    plan = plan_restore(ignore, current, target)
    try:
        check = _Preflight(root, objects, {*plan.deletions, *plan.leftovers})
    except OSError as exc:
        return [(".", f"the workspace directory cannot be opened: {os_reason(exc)}")]
    try:
        for rel in plan.deletions:
            check.guarded(rel, check.deletion, rel)
        for rel, item in plan.writes:
            check.guarded(rel, check.write, rel, item)
        check.space()
    finally:
        check.dirs.close()
    return check.problems


class _Preflight:
    def __init__(self, root: Path, objects: ObjectStore, deleted: set[str]) -> None:
        self.dirs = Dirs(root)
        self.objects = objects
        self.deleted = deleted
        self.problems: list[tuple[str, str]] = []
        self.name_max = _name_max(self.dirs.fd)
        self.probed: dict[str, bool] = {}  # dir -> it takes changes (reported once if not)
        # dir -> (deepest directory there now, True when that is the dir itself); None: blocked
        self.where: dict[str, tuple[str, bool] | None] = {"": ("", True)}
        # st_dev -> [bytes the writes grow by, inodes, largest file]
        self.need: dict[int, list[int]] = {}
        self.free: dict[int, os.statvfs_result] = {}

    def guarded(self, rel: str, step: Callable[..., None], *args: object) -> None:
        """One path's checks; a directory that changes under them refuses that path too."""
        try:
            step(*args)
        except Unsafe as exc:
            self.problems.append((rel, exc.reason))
        except OSError as exc:
            self.problems.append((rel, os_reason(exc)))

    def deletion(self, rel: str) -> None:
        parent, name = split_path(rel)
        try:
            fd = self.dirs.at(parent)
        except Unsafe:
            return  # nothing to delete through it: the restore skips it too
        if fd is None:
            return
        s = lstat_at(name, fd)
        if s is None or st.S_ISDIR(s.st_mode):
            return
        if is_special(s):
            self.problems.append((rel, "a special file (fifo, socket or device): never deleted"))
            return
        if self._flags(rel, name, fd, s, "deleted"):
            self._probe(parent)

    def write(self, rel: str, item: Item) -> None:
        parent, name = split_path(rel)
        longest = max(rel.split("/"), key=lambda p: len(p.encode()))
        if len(longest.encode()) > self.name_max:
            n = len(longest.encode())
            self.problems.append(
                (rel, f"a name of {n} bytes: the file system takes at most {self.name_max}")
            )
            return
        if item.kind == "f" and not self.objects.has(item.ref):
            self.problems.append((rel, f"its stored content (blob {item.ref}) is missing"))
            return
        where = self._where(parent)
        if where is None:
            return  # its problem is recorded once
        deepest, complete = where
        fd = self.dirs.at(deepest)
        if fd is None:
            raise Unsafe(f"{deepest} was removed during the preflight")
        if complete and not self._destination(rel, name, fd):
            return
        if not self._probe(deepest):
            return
        dev = os.fstat(fd).st_dev
        if dev not in self.free:
            self.free[dev] = os.fstatvfs(fd)
        old = lstat_at(name, fd) if complete else None
        size = -(-item.size // 4096) * 4096 if item.kind == "f" else 0
        need = self.need.setdefault(dev, [0, 0, 0])
        # Files are replaced one at a time: the rename frees the old file's blocks
        # (unless another link holds them) before the next tmp file is written, so
        # the peak is the growth of each file plus the largest file once.
        need[0] += max(0, size - _freed(old))
        need[1] += 0 if old is not None and not st.S_ISDIR(old.st_mode) else 1
        need[2] = max(need[2], size)

    def _where(self, rel: str) -> tuple[str, bool] | None:
        """Where the directories on the way to `rel` stand; None when one is blocked."""
        if rel in self.where:
            return self.where[rel]
        up, _ = split_path(rel)
        above = self._where(up)
        out: tuple[str, bool] | None
        if above is None or not above[1]:
            out = above
        else:
            try:
                fd = self.dirs.at(rel)
            except Unsafe:
                fd = None
                if rel not in self.deleted:  # a file or link the restore deletes first is fine
                    self.problems.append(
                        (
                            rel,
                            "not a directory (a symlink, file or special file reynd does not "
                            "restore) where the target has a directory",
                        )
                    )
                    self.where[rel] = None
                    return None
            out = (rel, True) if fd is not None else (up, False)
        self.where[rel] = out
        return out

    def _destination(self, rel: str, name: str, fd: int) -> bool:
        s = lstat_at(name, fd)
        if s is None:
            return True
        if st.S_ISDIR(s.st_mode):
            if self._only_restored(rel, name, fd):
                return True
            self.problems.append(
                (rel, "a directory holding what reynd does not restore is where a file goes")
            )
            return False
        if is_special(s):
            self.problems.append(
                (
                    rel,
                    "a special file (fifo, socket or device) is where a file goes: never replaced",
                )
            )
            return False
        return self._flags(rel, name, fd, s, "replaced")

    def _only_restored(self, rel: str, name: str, fd: int) -> bool:
        """True when directory `rel` holds only what the restore deletes (or nothing)."""
        try:
            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            return False
        try:
            with os.scandir(sub) as it:
                entries = list(it)
            for e in entries:
                path = f"{rel}/{e.name}"
                if e.is_dir(follow_symlinks=False):
                    if not self._only_restored(path, e.name, sub):
                        return False
                elif path not in self.deleted:
                    return False
        finally:
            os.close(sub)
        return True

    def _flags(self, rel: str, name: str, fd: int, s: os.stat_result, what: str) -> bool:
        if not st.S_ISREG(s.st_mode):
            return True  # a symlink carries no inode flags
        try:
            f = os.open(name, FILE_FLAGS, dir_fd=fd)
        except OSError:
            return True  # unreadable to us: the directory's probe still speaks for it
        try:
            kind = _locked(f)
        finally:
            os.close(f)
        if kind:
            self.problems.append((rel, f"the file is {kind} (chattr): it cannot be {what}"))
            return False
        return True

    def _probe(self, rel_dir: str) -> bool:
        """Whether `rel_dir` takes changes: its flags, then a tmp file made and removed."""
        if rel_dir not in self.probed:
            why = self._probe_now(rel_dir)
            self.probed[rel_dir] = why is None
            if why is not None:
                self.problems.append((rel_dir or ".", why))
        return self.probed[rel_dir]

    def _probe_now(self, rel_dir: str) -> str | None:
        try:
            fd = self.dirs.at(rel_dir)
        except Unsafe as exc:
            return exc.reason
        if fd is None:
            return "removed during the preflight"
        kind = _locked(fd)
        if kind:
            return f"the directory is {kind} (chattr): nothing in it can be created or deleted"
        name = tmp_name()
        try:
            fsops.close(fsops.open(name, CREATE_FLAGS, 0o600, dir_fd=fd))
            fsops.unlink(name, dir_fd=fd)
        except OSError as exc:
            return f"the directory takes no change: {os_reason(exc)}"
        return None

    def space(self) -> None:
        for dev, (growth, inodes, largest) in self.need.items():
            vfs = self.free[dev]
            free = vfs.f_bavail * vfs.f_frsize
            size = growth + largest
            need = size + size // 100 + SPACE_MARGIN
            if free < need:
                self.problems.append(
                    (".", f"the restore needs {size} bytes more; {free} are free, {need} needed")
                )
            if vfs.f_files and vfs.f_favail < inodes + 16:
                self.problems.append(
                    (".", f"the restore creates {inodes} files; {vfs.f_favail} inodes are free")
                )


def _freed(old: os.stat_result | None) -> int:
    """The bytes replacing file `old` gives back (none while another link holds it)."""
    if old is None or not st.S_ISREG(old.st_mode) or old.st_nlink != 1:
        return 0
    return int(old.st_blocks) * 512


def _name_max(fd: int) -> int:
    try:
        return os.fpathconf(fd, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX


def _locked(fd: int) -> str:
    """ "immutable" or "append-only" when the inode says so (FS_IOC_GETFLAGS), else ""."""
    try:
        out = fcntl.ioctl(fd, _GETFLAGS, struct.pack("i", 0))
    except OSError:
        return ""  # the file system keeps no such flags
    flags = struct.unpack("i", out)[0]
    if flags & _IMMUTABLE:
        return "immutable"
    return "append-only" if flags & _APPEND_ONLY else ""

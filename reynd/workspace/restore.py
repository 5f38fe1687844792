"""Restoring a tree onto the workspace, and the preflight that proves a restore can finish.

Every call works relative to a directory descriptor (`Dirs`): the workspace
root is opened once, and each directory below it one component at a time,
`O_DIRECTORY | O_NOFOLLOW`, from its parent's descriptor. A path is never
resolved as a string, so no symlink is ever followed, whatever changes
under the restore: a component that is not a real directory is refused,
and before each change the chain of open directories is checked to still
lead from the root (a directory moved or swapped for a symlink since it was
opened is refused from then on). What is refused is reported per path
(`Restored.skipped`), never followed.

Special files (fifos, sockets, devices) are never deleted nor replaced.
A tmp file is named `TMP_PREFIX` + 16 hex digits: it fits in any name the
file system takes, whatever the name of the file it becomes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat as st
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from reynd.storage import crashpoints, fsops
from reynd.storage.fsutil import write_all
from reynd.workspace.blobs import CHUNK, ObjectStore
from reynd.workspace.model import KEPT_MODE, Item, Tree, clean_name
from reynd.workspace.tree import DIR_FLAGS, TMP_PREFIX, Ignore, Scan

__all__ = ["Dirs", "Plan", "Restored", "Unsafe", "plan_restore", "preflight", "restore_tree"]

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# FS_IOC_GETFLAGS (_IOR('f', 1, long)) and the inode flags that stop even root.
_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_IMMUTABLE, _APPEND_ONLY = 0x10, 0x20
SPACE_MARGIN = 1 << 20  # bytes kept free beyond what the restore writes
NAME_MAX = 255


class Unsafe(Exception):
    """Something not reynd's is in the way, or changed under the restore: the path is skipped."""

    def __init__(self, reason: str, level: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.level = level  # Dirs.verify: the depth of the first directory that moved


def tmp_name() -> str:
    """A restore's tmp name: fixed length, whatever the name it becomes."""
    return f"{TMP_PREFIX}{secrets.token_hex(8)}"


@dataclass(slots=True)
class _Open:
    name: str
    fd: int
    ident: tuple[int, int]  # (st_dev, st_ino) when opened
    dirty: bool = False  # entries changed: fsync before closing


def _ident(s: os.stat_result) -> tuple[int, int]:
    return s.st_dev, s.st_ino


class Dirs:
    """The open directories from the workspace root to the one worked in, each O_NOFOLLOW.

    `at(rel)` moves to a directory: it keeps the common prefix open, closes
    the rest (fsyncing those whose entries changed) and opens the new part
    from its parent's descriptor, so at most one descriptor per level of
    depth is open. `failed` collects the directory fsyncs that failed.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        fd = fsops.open(root, DIR_FLAGS)  # through fsops: these are fsynced
        self._chain = [_Open("", fd, _ident(os.fstat(fd)))]
        self.failed: list[tuple[str, str]] = []

    def __enter__(self) -> Dirs:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every descriptor, fsyncing each directory whose entries changed."""
        self._pop(0)

    def at(self, rel: str, create: bool = False) -> int | None:
        """The descriptor of directory `rel` ("" the root); None when missing and not `create`.

        Raises Unsafe when a component is not a real directory, or when an
        open one no longer lies where it was opened.
        """
        parts = rel.split("/") if rel else []
        k = 0
        while k < len(parts) and k + 1 < len(self._chain) and self._chain[k + 1].name == parts[k]:
            k += 1
        self._pop(k + 1)
        try:
            self.verify()
        except Unsafe as exc:
            self._pop(exc.level)  # what no longer lies where it was opened is closed
            raise
        for part in parts[len(self._chain) - 1 :]:
            fd = self._open(part, create)
            if fd is None:
                return None
            self._chain.append(_Open(part, fd, _ident(os.fstat(fd))))
        return self._chain[-1].fd

    def _open(self, name: str, create: bool) -> int | None:
        parent = self._chain[-1]
        while True:
            try:
                return fsops.open(name, DIR_FLAGS, dir_fd=parent.fd)
            except FileNotFoundError:
                if not create:
                    return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Unsafe(
                        f"{self._rel(name)} is not a directory (a symlink or a file): "
                        "never followed"
                    ) from None
                raise
            try:
                fsops.mkdir(name, dir_fd=parent.fd)
            except FileExistsError:
                pass  # made meanwhile: open whatever it is, O_NOFOLLOW
            else:
                parent.dirty = True

    def verify(self) -> None:
        """Raise Unsafe unless each open directory is still the entry of its parent it was.

        The descriptors stay open (a caller may still clean up through one);
        the next `at` closes those that moved.
        """
        try:
            same = _ident(os.stat(self.root, follow_symlinks=False)) == self._chain[0].ident
        except OSError:
            same = False
        if not same:
            raise Unsafe(f"the workspace directory {self.root} was moved or replaced", 1)
        for i in range(1, len(self._chain)):
            up, cur = self._chain[i - 1], self._chain[i]
            try:
                same = _ident(os.stat(cur.name, dir_fd=up.fd, follow_symlinks=False)) == cur.ident
            except OSError:
                same = False
            if not same:
                rel = "/".join(c.name for c in self._chain[1 : i + 1])
                raise Unsafe(
                    f"{rel} changed during the restore (moved, or replaced by a symlink): "
                    "not followed",
                    i,
                )

    def touch(self) -> None:
        """The current directory's entries changed: it is fsynced before it is closed."""
        self._chain[-1].dirty = True

    @property
    def fd(self) -> int:
        return self._chain[-1].fd

    def _rel(self, name: str) -> str:
        return "/".join([*(c.name for c in self._chain[1:]), name])

    def _pop(self, keep: int) -> None:
        while len(self._chain) > keep:
            rel = "/".join(c.name for c in self._chain[1:]) or "."
            c = self._chain.pop()
            try:
                if c.dirty:
                    fsops.fsync(c.fd)
            except OSError as exc:
                self.failed.append((rel, f"fsync of the directory failed: {_why(exc)}"))
            finally:
                fsops.close(c.fd)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a restore does, in order (pure: computed from two trees)."""

    leftovers: list[str]  # tmp files a crash left
    deletions: list[str]  # files and links the target does not have, deepest first
    rmdirs: list[str]  # directories a deletion may leave empty, deepest first
    writes: list[tuple[str, Item]]  # files and links to write, sorted


def _dirs_of(paths: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for p in paths:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            out.add("/".join(parts[:i]))
    return out


def plan_restore(ignore: Ignore, current: Scan, target: Tree) -> Plan:
    """The steps that make `current` equal `target`; paths `ignore` covers are left out."""
    now = current.tree
    gone = [
        p
        for p in now
        if (p not in target or now[p].kind != target[p].kind) and not ignore.covers(p)
    ]
    deletions = sorted(gone, reverse=True)
    rmdirs = sorted(_dirs_of(deletions) - _dirs_of(target), key=lambda p: (-p.count("/"), p))
    writes = [
        (rel, item)
        for rel, item in sorted(target.items())
        if now.get(rel) != item and not ignore.covers(rel)
    ]
    return Plan(list(current.leftovers), deletions, rmdirs, writes)


@dataclass(slots=True)
class Restored:
    written: int = 0
    deleted: int = 0
    # (path, why): something not reynd's in the way, or changed under the restore
    skipped: list[tuple[str, str]] = field(default_factory=list)
    # (path, error): the system refused; the restore is not finished
    failed: list[tuple[str, str]] = field(default_factory=list)


def restore_tree(
    root: Path, ignore: Ignore, current: Scan, target: Tree, objects: ObjectStore
) -> Restored:
    """Make the workspace equal `target`, one atomic rename (or unlink) per file.

    Paths that `ignore` covers are never touched. Directories are created as
    needed; a directory left empty by a deletion is removed unless the target
    needs it. A path that fails does not stop the others: each is reported
    in the result (`skipped` when refused, `failed` when the system failed).
    """
    plan = plan_restore(ignore, current, target)
    out = Restored()
    try:
        dirs = Dirs(root)
    except OSError as exc:
        out.failed.append((".", f"the workspace directory cannot be opened: {_why(exc)}"))
        return out
    with dirs:
        for rel in plan.leftovers:
            _guarded(out, rel, _remove, dirs, rel)
        for rel in plan.deletions:
            if _guarded(out, rel, _remove, dirs, rel, point=True):
                out.deleted += 1
        for d in plan.rmdirs:
            _rmdir(dirs, d)
        for rel, item in plan.writes:
            if _guarded(out, rel, _put, dirs, objects, rel, item, point=True):
                out.written += 1
    out.failed.extend(dirs.failed)
    return out


def _guarded(
    out: Restored, rel: str, op: Callable[..., bool], *args: object, point: bool = False
) -> bool:
    """Run one path's step; what goes wrong is recorded for that path, not raised.

    `point`: crash point workspace.restore.file first (an error it injects
    is this path's, as the I/O call right after it would fail).
    """
    try:
        if point:
            crashpoints.hit("workspace.restore.file")
        return op(*args)
    except Unsafe as exc:
        out.skipped.append((rel, exc.reason))
    except IsADirectoryError:
        out.skipped.append((rel, "a directory is in the way"))
    except FileNotFoundError:  # its directory was removed or replaced under the restore
        out.skipped.append((rel, "a directory on the way was removed during the restore"))
    except OSError as exc:
        out.failed.append((rel, _why(exc)))
    return False


def _split(rel: str) -> tuple[str, str]:
    """(parent, name) of a path; Unsafe unless each component is a plain name.

    A tree comes from manifests and WAL records: a damaged one must not lead
    the restore to `..` (which O_NOFOLLOW does not stop) or to an absolute path.
    """
    if not all(map(clean_name, rel.split("/"))):
        raise Unsafe(f"{rel[:200]!r} is not a path inside the workspace: never followed")
    parent, _, name = rel.rpartition("/")
    return parent, name


def _lstat(name: str, fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _special(s: os.stat_result) -> bool:
    return not (st.S_ISREG(s.st_mode) or st.S_ISLNK(s.st_mode) or st.S_ISDIR(s.st_mode))


def _remove(dirs: Dirs, rel: str) -> bool:
    """Delete the file or link at `rel`; False when there is none (a directory is left)."""
    parent, name = _split(rel)
    fd = dirs.at(parent)
    if fd is None:
        return False
    s = _lstat(name, fd)
    if s is None or st.S_ISDIR(s.st_mode):
        return False
    if _special(s):
        raise Unsafe("a special file (fifo, socket or device): reynd never deletes one")
    try:
        fsops.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return False
    dirs.touch()
    return True


def _rmdir(dirs: Dirs, rel: str) -> None:
    """Remove directory `rel` if it is empty now; anything else leaves it alone."""
    try:
        parent, name = _split(rel)
        fd = dirs.at(parent)
        if fd is None:
            return
        fsops.rmdir(name, dir_fd=fd)
    except (Unsafe, OSError):
        return  # not empty (ignored or unrecorded content), or not a directory
    dirs.touch()


def _put(dirs: Dirs, objects: ObjectStore, rel: str, item: Item) -> bool:
    """Write `item` at `rel`: a tmp file next to it, fsynced, renamed over it."""
    parent, name = _split(rel)
    fd = dirs.at(parent, create=True)
    assert fd is not None  # with create, made if missing
    s = _lstat(name, fd)
    if s is not None and st.S_ISDIR(s.st_mode):
        try:  # an empty directory is nothing reynd records: the file takes its place
            fsops.rmdir(name, dir_fd=fd)
        except OSError:
            raise Unsafe("a directory is in the way") from None
    elif s is not None and _special(s):
        raise Unsafe("a special file (fifo, socket or device) is in the way: never replaced")
    tmp = _link_tmp(item.ref, fd) if item.kind == "l" else _write_tmp(objects, item, fd)
    try:
        dirs.verify()
        fsops.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        _drop(tmp, fd)
        raise
    dirs.touch()
    return True


def _drop(name: str, fd: int) -> None:
    try:
        fsops.unlink(name, dir_fd=fd)
    except OSError:
        return


def _link_tmp(target: str, fd: int) -> str:
    while True:
        tmp = tmp_name()
        try:
            fsops.symlink(target, tmp, dir_fd=fd)
        except FileExistsError:
            continue
        return tmp


def _write_tmp(objects: ObjectStore, item: Item, dir_fd: int) -> str:
    try:
        src = os.open(objects.path(item.ref), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ValueError):  # a failure, not a change in the workspace
        raise OSError(errno.EIO, f"its stored content (blob {item.ref}) is missing") from None
    try:
        while True:
            tmp = tmp_name()
            try:
                fd = fsops.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                continue
            break
        try:
            while chunk := os.read(src, CHUNK):
                write_all(fd, chunk)
            os.fchmod(fd, item.mode & KEPT_MODE)  # an older record may hold setuid
            fsops.fsync(fd)
        except BaseException:
            fsops.close(fd)
            _drop(tmp, dir_fd)
            raise
        fsops.close(fd)
        return tmp
    finally:
        os.close(src)


def _why(exc: OSError) -> str:
    return f"{errno.errorcode.get(exc.errno or 0, 'error')}: {exc.strerror or exc}"


# -- the preflight ---------------------------------------------------------------------


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
        return [(".", f"the workspace directory cannot be opened: {_why(exc)}")]
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
        self.need: dict[int, list[int]] = {}  # st_dev -> [bytes, inodes] the writes need
        self.free: dict[int, os.statvfs_result] = {}

    def guarded(self, rel: str, step: Callable[..., None], *args: object) -> None:
        """One path's checks; a directory that changes under them refuses that path too."""
        try:
            step(*args)
        except Unsafe as exc:
            self.problems.append((rel, exc.reason))
        except OSError as exc:
            self.problems.append((rel, _why(exc)))

    def deletion(self, rel: str) -> None:
        parent, name = _split(rel)
        try:
            fd = self.dirs.at(parent)
        except Unsafe:
            return  # nothing to delete through it: the restore skips it too
        if fd is None:
            return
        s = _lstat(name, fd)
        if s is None or st.S_ISDIR(s.st_mode):
            return
        if _special(s):
            self.problems.append((rel, "a special file (fifo, socket or device): never deleted"))
            return
        if self._flags(rel, name, fd, s, "deleted"):
            self._probe(parent)

    def write(self, rel: str, item: Item) -> None:
        parent, name = _split(rel)
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
        old = _lstat(name, fd) if complete else None
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
        up, _ = _split(rel)
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
        s = _lstat(name, fd)
        if s is None:
            return True
        if st.S_ISDIR(s.st_mode):
            if self._only_restored(rel, name, fd):
                return True
            self.problems.append(
                (rel, "a directory holding what reynd does not restore is where a file goes")
            )
            return False
        if _special(s):
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
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
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
            fsops.close(fsops.open(name, _CREATE_FLAGS, 0o600, dir_fd=fd))
            fsops.unlink(name, dir_fd=fd)
        except OSError as exc:
            return f"the directory takes no change: {_why(exc)}"
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

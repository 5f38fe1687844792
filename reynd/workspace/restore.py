"""Restoring a tree onto the workspace (the preflight that proves it can finish: preflight.py).

Every call works relative to a directory descriptor (`Dirs`, dirs.py), so no
symlink is ever followed, whatever changes under the restore: a component
that is not a real directory is refused, and before each change the chain
of open directories is checked to still lead from the root (a directory
moved or swapped for a symlink since it was opened is refused from then
on). What is refused is reported per path (`Restored.skipped`), never
followed.

Special files (fifos, sockets, devices) are never deleted nor replaced.
A tmp file is named `TMP_PREFIX` + 16 hex digits: it fits in any name the
file system takes, whatever the name of the file it becomes.
"""

from __future__ import annotations

import errno
import os
import stat as st
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reynd.storage import crashpoints, fsops
from reynd.storage.fsutil import write_all
from reynd.workspace.blobs import CHUNK, ObjectStore
from reynd.workspace.dirs import Dirs, Unsafe, is_special, lstat_at, os_reason, split_path, tmp_name
from reynd.workspace.model import KEPT_MODE, Item, Tree
from reynd.workspace.tree import Ignore, Scan

__all__ = ["CREATE_FLAGS", "Plan", "Restored", "plan_restore", "restore_tree"]

CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


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
        out.failed.append((".", f"the workspace directory cannot be opened: {os_reason(exc)}"))
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
        out.failed.append((rel, os_reason(exc)))
    return False


def _remove(dirs: Dirs, rel: str) -> bool:
    """Delete the file or link at `rel`; False when there is none (a directory is left)."""
    parent, name = split_path(rel)
    fd = dirs.at(parent)
    if fd is None:
        return False
    s = lstat_at(name, fd)
    if s is None or st.S_ISDIR(s.st_mode):
        return False
    if is_special(s):
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
        parent, name = split_path(rel)
        fd = dirs.at(parent)
        if fd is None:
            return
        fsops.rmdir(name, dir_fd=fd)
    except (Unsafe, OSError):
        return  # not empty (ignored or unrecorded content), or not a directory
    dirs.touch()


def _put(dirs: Dirs, objects: ObjectStore, rel: str, item: Item) -> bool:
    """Write `item` at `rel`: a tmp file next to it, fsynced, renamed over it."""
    parent, name = split_path(rel)
    fd = dirs.at(parent, create=True)
    assert fd is not None  # with create, made if missing
    s = lstat_at(name, fd)
    if s is not None and st.S_ISDIR(s.st_mode):
        try:  # an empty directory is nothing reynd records: the file takes its place
            fsops.rmdir(name, dir_fd=fd)
        except OSError:
            raise Unsafe("a directory is in the way") from None
        dirs.touch()  # its entries changed, whatever happens to the file next
    elif s is not None and is_special(s):
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
                fd = fsops.open(tmp, CREATE_FLAGS, 0o600, dir_fd=dir_fd)
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

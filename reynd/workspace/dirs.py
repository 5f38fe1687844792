"""The directories a restore works in, each opened O_NOFOLLOW from its parent's descriptor.

The workspace root is opened once, and each directory below it one
component at a time, `O_DIRECTORY | O_NOFOLLOW`, from its parent's
descriptor. A path is never resolved as a string, so no symlink is ever
followed, whatever changes under the restore: a component that is not a
real directory is refused (`Unsafe`), and before each change the chain of
open directories is checked to still lead from the root. Used by the
restore (restore.py) and its preflight (preflight.py).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat as st
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from reynd.storage import fsops
from reynd.workspace.model import clean_name
from reynd.workspace.tree import DIR_FLAGS, TMP_PREFIX

__all__ = [
    "Dirs",
    "Unsafe",
    "ident",
    "is_special",
    "lstat_at",
    "os_reason",
    "split_path",
    "tmp_name",
]


class Unsafe(Exception):
    """Something not reynd's is in the way, or changed under the restore: the path is skipped."""

    def __init__(self, reason: str, level: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.level = level  # Dirs.verify: the depth of the first directory that moved


def tmp_name() -> str:
    """A restore's tmp name: fixed length, whatever the name it becomes."""
    return f"{TMP_PREFIX}{secrets.token_hex(8)}"


# Directories kept open at the deep end of the chain: above them (a tree deeper
# than this), each is closed once passed and opened again only to verify the
# chain, so a deep tree cannot run the daemon out of descriptors.
OPEN_LEVELS = 32


@dataclass(slots=True)
class _Open:
    name: str
    fd: int  # -1: closed (the chain is deeper than OPEN_LEVELS); its ident stays
    ident: tuple[int, int]  # (st_dev, st_ino) when opened
    dirty: bool = False  # entries changed: fsync before closing


def ident(s: os.stat_result) -> tuple[int, int]:
    return s.st_dev, s.st_ino


class Dirs:
    """The open directories from the workspace root to the one worked in, each O_NOFOLLOW.

    `at(rel)` moves to a directory: it keeps the common prefix open, closes
    the rest (fsyncing those whose entries changed) and opens the new part
    from its parent's descriptor, so at most one descriptor per level of
    depth is open, and no more than OPEN_LEVELS below the root. `failed`
    collects the directory fsyncs that failed.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        fd = fsops.open(root, DIR_FLAGS)  # through fsops: these are fsynced
        self._chain = [_Open("", fd, ident(os.fstat(fd)))]
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
            self._reopen_tail()
        except Unsafe as exc:
            self._pop(exc.level)  # what no longer lies where it was opened is closed
            raise
        for part in parts[len(self._chain) - 1 :]:
            fd = self._open(part, create)
            if fd is None:
                return None
            self._chain.append(_Open(part, fd, ident(os.fstat(fd))))
            if len(self._chain) > OPEN_LEVELS + 1:
                self._close(len(self._chain) - OPEN_LEVELS - 1)
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
            same = ident(os.stat(self.root, follow_symlinks=False)) == self._chain[0].ident
        except OSError:
            same = False
        if not same:
            raise Unsafe(f"the workspace directory {self.root} was moved or replaced", 1)
        passing = -1  # a closed level, opened again to check the next one from it
        try:
            for i in range(1, len(self._chain)):
                up, cur = self._chain[i - 1], self._chain[i]
                up_fd = up.fd if up.fd >= 0 else passing
                try:
                    s = os.stat(cur.name, dir_fd=up_fd, follow_symlinks=False)
                    same = ident(s) == cur.ident
                    if same and cur.fd < 0:
                        fd = os.open(cur.name, DIR_FLAGS, dir_fd=up_fd)
                        if passing >= 0:
                            os.close(passing)
                        passing = fd
                        same = ident(os.fstat(fd)) == cur.ident
                except OSError:
                    same = False
                if not same:
                    raise self._moved(i)
        finally:
            if passing >= 0:
                os.close(passing)

    def _reopen_tail(self) -> None:
        """Open again the closed levels the chain ends with (back up from deeper down)."""
        first = len(self._chain)
        while self._chain[first - 1].fd < 0:  # the root's never is
            first -= 1
        for i in range(first, len(self._chain)):
            c = self._chain[i]
            try:
                fd = fsops.open(c.name, DIR_FLAGS, dir_fd=self._chain[i - 1].fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    raise
                raise self._moved(i) from None
            c.fd = fd
            if ident(os.fstat(fd)) != c.ident:  # moved since verify() saw it
                raise self._moved(i)
            if i > OPEN_LEVELS:
                self._close(i - OPEN_LEVELS)

    def touch(self) -> None:
        """The current directory's entries changed: it is fsynced before it is closed."""
        self._chain[-1].dirty = True

    @property
    def fd(self) -> int:
        return self._chain[-1].fd

    def _rel(self, name: str) -> str:
        return "/".join([*(c.name for c in self._chain[1:]), name])

    def _path(self, level: int) -> str:
        """The path of the directory at `level` of the chain ("" the root)."""
        return "/".join(c.name for c in self._chain[1 : level + 1])

    def _moved(self, level: int) -> Unsafe:
        return Unsafe(
            f"{self._path(level)} changed during the restore (moved, or replaced by a symlink): "
            "not followed",
            level,
        )

    def _pop(self, keep: int) -> None:
        while len(self._chain) > keep:
            self._close(len(self._chain) - 1)
            self._chain.pop()

    def _close(self, level: int) -> None:
        """Close the directory at `level` (fsynced first when its entries changed)."""
        c = self._chain[level]
        if c.fd < 0:
            return
        try:
            if c.dirty:
                fsops.fsync(c.fd)
        except OSError as exc:
            why = f"fsync of the directory failed: {os_reason(exc)}"
            self.failed.append((self._path(level) or ".", why))
        finally:
            fsops.close(c.fd)
            c.fd, c.dirty = -1, False


def split_path(rel: str) -> tuple[str, str]:
    """(parent, name) of a path; Unsafe unless each component is a plain name.

    A tree comes from manifests and WAL records: a damaged one must not lead
    the restore to `..` (which O_NOFOLLOW does not stop) or to an absolute path.
    """
    if not all(map(clean_name, rel.split("/"))):
        raise Unsafe(f"{rel[:200]!r} is not a path inside the workspace: never followed")
    parent, _, name = rel.rpartition("/")
    return parent, name


def lstat_at(name: str, fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def is_special(s: os.stat_result) -> bool:
    return not (st.S_ISREG(s.st_mode) or st.S_ISLNK(s.st_mode) or st.S_ISDIR(s.st_mode))


def os_reason(exc: OSError) -> str:
    return f"{errno.errorcode.get(exc.errno or 0, 'error')}: {exc.strerror or exc}"

"""A simulated disk under the storage core (through reynd.storage.fsops): power cuts, I/O errors.

`SimDisk` performs every call for real on a live directory tree, so the code
under test reads back what it wrote (as it would from the page cache), and
alongside records what a disk would have made durable:

- per file (inode): its content as of the last successful fsync/fdatasync,
  and the data operations since, in order (writes at an offset, truncations);
- per directory: its entries as of the last fsync of the directory, and the
  entry operations since (create/mkdir, rename, unlink).

An fsync of a file does not make its directory entry durable, and a
directory fsync does not make a file's data durable (POSIX; stricter than
ext4, which the code must not rely on).

A **power cut** at step N (`cut_at=N`: the N-th disk-changing call, counting
from 0, never executes; from then on every call raises `PowerCut`) leaves the
tracked state frozen. `image(choose)` then builds a state a real disk could
hold, with every loss decided by `choose(n) -> 0..n`:

- each file: its durable content, then a prefix of its pending operations,
  and for the first operation not kept: nothing, a torn prefix of it (cut at
  an arbitrary byte), or the file's size as if every pending write had landed
  with the missing bytes zero-filled (or garbage, for "stale blocks");
- each directory: its durable entries, then a prefix of its pending entry
  operations (a created file may vanish, a rename may not have happened).
  A prefix, not any subset: journaling file systems commit metadata in order.

Not modelled: out-of-order writeback of blocks *inside* one file's unsynced
tail (a hole followed by later data, possible with data=writeback): see
test_power_loss.py for what recovery does with it.

**I/O errors**: `Fault(op, nth, errno, persistent, short)` fails the nth call
of `op` (1-based), and with `persistent` every later one too. A failed
fsync follows Linux: the pages that were pending are not durable, and are
never retried: a later successful fsync does not bring them back (the data
is lost for good unless the file is rewritten), which is why an fsync error
must be fatal (docs/durability.md rule 5). A failed write with `short` first writes
part of the data and returns a short count (as a full disk does), then fails.
"""

from __future__ import annotations

import errno as errno_mod
import os
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Choose = Callable[[int], int]

# Calls that change the disk: each one is a step at which power can be cut.
_STEPS = frozenset(
    {"write", "fsync", "fdatasync", "ftruncate", "replace", "unlink", "mkdir", "rmdir", "symlink"}
)
_OPEN_CHANGES = os.O_CREAT | os.O_TRUNC

TORN_MODES = ("none", "torn", "zeros", "garbage")


class PowerCut(BaseException):  # BaseException: no `except Exception` in the code may swallow it
    """The power went out: nothing after this call happened."""


@dataclass
class Fault:
    op: str  # "write" | "fdatasync" | "fsync" | ...
    nth: int  # 1-based call of `op` that fails
    errno: int = errno_mod.EIO
    persistent: bool = False
    short: bool = False  # a failing write first writes a part and returns short


@dataclass
class _DataOp:
    offset: int  # for a truncation: the new size
    data: bytes | None  # None: truncation
    doomed: bool = False  # its fsync failed: it never becomes durable


@dataclass
class _File:
    durable: bytearray = field(default_factory=bytearray)
    pending: list[_DataOp] = field(default_factory=list)


@dataclass
class _Dir:
    durable: dict[str, int] = field(default_factory=dict)
    # ("link", name, node) | ("unlink", name) | ("rename", src, dst, node)
    pending: list[tuple[Any, ...]] = field(default_factory=list)


def _at(path: str | os.PathLike[str], dir_fd: int | None) -> str | os.PathLike[str]:
    """The path a call relative to `dir_fd` names (the model tracks paths)."""
    if dir_fd is None:
        return path
    return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)


def _apply(buf: bytearray, op: _DataOp) -> None:
    if op.data is None:
        del buf[op.offset :]
        buf.extend(b"\0" * (op.offset - len(buf)))
        return
    end = op.offset + len(op.data)
    if len(buf) < op.offset:
        buf.extend(b"\0" * (op.offset - len(buf)))
    buf[op.offset : end] = op.data


def _apply_dir(entries: dict[str, int], op: tuple[Any, ...]) -> None:
    if op[0] == "link":
        entries[op[1]] = op[2]
    elif op[0] == "unlink":
        entries.pop(op[1], None)
    else:
        entries.pop(op[1], None)
        entries[op[2]] = op[3]


class SimDisk:
    """Install with `fsops.installed(disk)`; see the module docstring."""

    def __init__(
        self,
        top: Path,
        *,
        cut_at: int | None = None,
        faults: list[Fault] | None = None,
        ignore: frozenset[str] = frozenset({"LOCK"}),
    ) -> None:
        self.top = top
        self.cut_at = cut_at
        self.faults = list(faults or [])
        self.ignore = ignore  # names created outside fsops on purpose (the flock file)
        self.steps = 0
        self.dead = False
        self.calls: dict[str, int] = {}
        self.failed: list[tuple[str, int]] = []  # (op, errno) of every injected failure
        self._nodes = 0
        self._files: dict[int, _File] = {}
        self._dirs: dict[int, _Dir] = {}
        self._live: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) -> node
        self._fds: dict[int, tuple[int, bool]] = {}  # fd -> (node, O_APPEND)
        self._root = self._adopt(top)

    # -- bookkeeping -------------------------------------------------------------

    def _new(self, st: os.stat_result, node_dir: bool) -> int:
        self._nodes += 1
        node = self._nodes
        self._live[(st.st_dev, st.st_ino)] = node
        if node_dir:
            self._dirs[node] = _Dir()
        else:
            self._files[node] = _File()
        return node

    def _adopt(self, path: Path) -> int:
        """Register an existing tree as durable."""
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            node = self._new(st, True)
            for child in path.iterdir():
                if child.name not in self.ignore:
                    self._dirs[node].durable[child.name] = self._adopt(child)
            return node
        node = self._new(st, False)
        self._files[node].durable[:] = path.read_bytes()
        return node

    def _node(self, path: str | os.PathLike[str], follow: bool = True) -> int:
        st = os.stat(path, follow_symlinks=follow)
        node = self._live.get((st.st_dev, st.st_ino))
        if node is None:
            raise AssertionError(f"{path} was created outside reynd.storage.fsops")
        return node

    def _parent(self, path: str | os.PathLike[str]) -> tuple[_Dir, str]:
        p = Path(path)
        return self._dirs[self._node(p.parent)], p.name

    def _step(self, op: str) -> None:
        """Count a call; cut the power or inject a fault here when told to."""
        if self.dead:
            raise PowerCut
        n = self.calls[op] = self.calls.get(op, 0) + 1
        if op in _STEPS:
            if self.cut_at is not None and self.steps >= self.cut_at:
                self.dead = True
                raise PowerCut
            self.steps += 1
        for fault in self.faults:
            # A short write fault lets its nth call through (short), then fails.
            first = fault.nth + 1 if fault.short else fault.nth
            if fault.op == op and (n == first or (fault.persistent and n > first)):
                self.failed.append((op, fault.errno))
                raise OSError(fault.errno, f"{os.strerror(fault.errno)} (simulated)")

    def _short_write(self) -> bool:
        n = self.calls["write"]
        return any(f.op == "write" and f.short and n == f.nth for f in self.faults)

    def release(self) -> None:
        """Close every descriptor still open (after a power cut the code could not)."""
        for fd in list(self._fds):
            os.close(fd)
        self._fds.clear()

    # -- the fsops interface -----------------------------------------------------

    def open(
        self,
        path: str | os.PathLike[str],
        flags: int,
        mode: int = 0o777,
        *,
        dir_fd: int | None = None,
    ) -> int:
        if flags & _OPEN_CHANGES:
            self._step("open")  # counted only: the writes and syncs are the steps
        elif self.dead:
            raise PowerCut
        real, path = path, _at(path, dir_fd)
        existed = os.path.lexists(path)
        fd = os.open(real, flags, mode, dir_fd=dir_fd)
        st = os.fstat(fd)
        if existed:
            node = self._live.get((st.st_dev, st.st_ino))
            if node is None:
                os.close(fd)
                raise AssertionError(f"{path} was created outside reynd.storage.fsops")
            if flags & os.O_TRUNC:
                self._files[node].pending.append(_DataOp(0, None))
        else:
            node = self._new(st, False)
            parent, name = self._parent(path)
            parent.pending.append(("link", name, node))
        self._fds[fd] = (node, bool(flags & os.O_APPEND))
        return fd

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        os.close(fd)
        if self.dead:
            raise PowerCut

    def write(self, fd: int, data: bytes | memoryview) -> int:
        self._step("write")
        node, append = self._fds[fd]
        offset = os.fstat(fd).st_size if append else os.lseek(fd, 0, os.SEEK_CUR)
        if self._short_write():
            data = bytes(data[: len(data) // 2])
        n = os.write(fd, data)
        self._files[node].pending.append(_DataOp(offset, bytes(data[:n])))
        return n

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        if self.dead:
            raise PowerCut
        return os.pread(fd, n, offset)

    def _sync(self, op: str, fd: int) -> None:
        node, _ = self._fds[fd]
        try:
            self._step(op)
        except OSError:
            if node in self._files:
                for dop in self._files[node].pending:
                    dop.doomed = True
            raise
        # No real sync: the live tree is thrown away, only the model counts.
        if node in self._dirs:
            d = self._dirs[node]
            for dirop in d.pending:
                _apply_dir(d.durable, dirop)
            d.pending.clear()
        else:
            f = self._files[node]
            for dop in f.pending:
                if not dop.doomed:
                    _apply(f.durable, dop)
            f.pending.clear()

    def fsync(self, fd: int) -> None:
        self._sync("fsync", fd)

    def fdatasync(self, fd: int) -> None:
        self._sync("fdatasync", fd)

    def ftruncate(self, fd: int, length: int) -> None:
        self._step("ftruncate")
        node, _ = self._fds[fd]
        os.ftruncate(fd, length)
        self._files[node].pending.append(_DataOp(length, None))

    def replace(
        self,
        src: str | os.PathLike[str],
        dst: str | os.PathLike[str],
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
    ) -> None:
        self._step("replace")
        os.replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        src, dst = _at(src, src_dir_fd), _at(dst, dst_dir_fd)
        node = self._node(dst, follow=False)  # a symlink is renamed as itself
        src_dir, src_name = self._parent(src)
        dst_dir, dst_name = self._parent(dst)
        if src_dir is dst_dir:
            src_dir.pending.append(("rename", src_name, dst_name, node))
        else:  # two directories: two independent entry changes
            dst_dir.pending.append(("link", dst_name, node))
            src_dir.pending.append(("unlink", src_name))

    def unlink(self, path: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
        self._step("unlink")
        parent, name = self._parent(_at(path, dir_fd))
        os.unlink(path, dir_fd=dir_fd)
        parent.pending.append(("unlink", name))

    def rmdir(self, path: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
        self._step("rmdir")
        parent, name = self._parent(_at(path, dir_fd))
        os.rmdir(path, dir_fd=dir_fd)
        parent.pending.append(("unlink", name))

    def mkdir(
        self, path: str | os.PathLike[str], mode: int = 0o777, *, dir_fd: int | None = None
    ) -> None:
        self._step("mkdir")
        at = _at(path, dir_fd)
        parent, name = self._parent(at)
        os.mkdir(path, mode, dir_fd=dir_fd)
        node = self._new(os.stat(at), True)
        parent.pending.append(("link", name, node))

    def symlink(
        self, target: str, path: str | os.PathLike[str], *, dir_fd: int | None = None
    ) -> None:
        self._step("symlink")
        at = _at(path, dir_fd)
        parent, name = self._parent(at)
        os.symlink(target, path, dir_fd=dir_fd)
        node = self._new(os.lstat(at), False)  # its content: nothing the model reads
        parent.pending.append(("link", name, node))

    # -- after the cut -------------------------------------------------------------

    def image(self, choose: Choose | None = None) -> dict[str, bytes | None]:
        """A state the disk could hold after a power cut now: {relative path: bytes, dir: None}.

        `choose(n)` picks 0..n at every loss decision; None keeps everything
        (the page cache's view, which must equal the live tree).
        """
        everything = choose is None
        out: dict[str, bytes | None] = {}

        def walk(node: int, rel: str) -> None:
            d = self._dirs[node]
            entries = dict(d.durable)
            k = len(d.pending) if everything else _pick(choose, len(d.pending))
            for dirop in d.pending[:k]:
                _apply_dir(entries, dirop)
            for name, child in sorted(entries.items()):
                path = f"{rel}/{name}" if rel else name
                if child in self._dirs:
                    out[path] = None
                    walk(child, path)
                else:
                    out[path] = self._file_image(child, choose)

        walk(self._root, "")
        return out

    def _file_image(self, node: int, choose: Choose | None) -> bytes:
        f = self._files[node]
        buf = bytearray(f.durable)
        if choose is None:
            for dop in f.pending:
                _apply(buf, dop)
            return bytes(buf)
        pending = f.pending
        k = _pick(choose, len(pending))
        for dop in pending[:k]:
            _apply(buf, dop)
        if k == len(pending):
            return bytes(buf)
        mode = TORN_MODES[_pick(choose, len(TORN_MODES) - 1)]
        nxt = pending[k]
        if mode == "torn" and nxt.data:
            _apply(buf, _DataOp(nxt.offset, nxt.data[: _pick(choose, len(nxt.data) - 1)]))
        elif mode in ("zeros", "garbage"):
            # The size reached the disk, not all the data: from an arbitrary
            # byte of the first lost write to the final size, zeros or stale bytes.
            full = bytearray(f.durable)
            for dop in pending:
                _apply(full, dop)
            if nxt.data:
                _apply(buf, _DataOp(nxt.offset, nxt.data[: _pick(choose, len(nxt.data) - 1)]))
            if len(full) > len(buf):
                fill_len = len(full) - len(buf)
                if mode == "zeros":
                    buf.extend(b"\0" * fill_len)
                else:
                    buf.extend(random.Random(fill_len).randbytes(fill_len))
        return bytes(buf)


def _pick(choose: Choose | None, n: int) -> int:
    if choose is None or n <= 0:
        return n if choose is None else 0
    k = choose(n)
    assert 0 <= k <= n
    return k


def live_image(top: Path, ignore: frozenset[str] = frozenset({"LOCK"})) -> dict[str, bytes | None]:
    """The live tree in image form (what the page cache holds)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(top.rglob("*")):
        if path.name in ignore:
            continue
        rel = path.relative_to(top).as_posix()
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


def materialise(image: dict[str, bytes | None], dest: Path) -> None:
    """Write an image out as a real tree under `dest` (which must not exist)."""
    dest.mkdir(parents=True)
    for rel, data in sorted(image.items()):
        path = dest / rel
        if data is None:
            path.mkdir()
        else:
            path.write_bytes(data)

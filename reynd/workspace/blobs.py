"""Content-addressed storage for workspace rewind: file blobs, tree manifests, the seq index.

    state/blobs/ab/cdef...        file contents, named by their sha256 (hex)
    state/manifests/ab/cdef...    tree manifests (JSON), named by their sha256
    state/trees/<seq, 20 digits>  "<manifest hash>\\n": the workspace as of that seq

Every file is published durably: a tmp file written in full and fsynced, a
rename, then an fsync of the directory. An object that exists is never
rewritten (same name, same bytes), so unchanged files and unchanged trees
cost nothing in later generations.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator
from pathlib import Path

from reynd.storage import fsops
from reynd.storage.fsutil import (
    atomic_write,
    fsync_dir,
    make_dirs,
    open_private,
    write_all,
    write_durable,
)

__all__ = ["CHUNK", "ObjectStore", "TreeIndex", "hash_file", "is_digest"]

CHUNK = 1 << 20


_HEX = frozenset("0123456789abcdef")


def is_digest(s: str) -> bool:
    """True for a sha256 in lowercase hex, as every object is named."""
    return len(s) == 64 and _HEX.issuperset(s)


def hash_file(fd: int) -> tuple[str, int]:
    """sha256 (hex) and size of what open file `fd` holds from its offset on."""
    h = hashlib.sha256()
    size = 0
    while chunk := os.read(fd, CHUNK):
        h.update(chunk)
        size += len(chunk)
    return h.hexdigest(), size


class ObjectStore:
    """A directory of immutable objects named by the sha256 of their bytes, fanned out by 2 hex."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._unsynced: set[Path] = set()  # fan-out dirs with renames not yet synced
        if make_dirs(root):
            fsync_dir(root.parent)
        for tmp in root.glob(".tmp-*"):  # a crash mid-write: never published
            tmp.unlink(missing_ok=True)

    def path(self, digest: str) -> Path:
        """Where object `digest` lives; ValueError unless it is a sha256 in hex.

        A digest comes from a manifest or a record: a damaged one must never
        name a file outside the store (an absolute "xx/etc/..." or "../..").
        """
        if not is_digest(digest):
            raise ValueError(f"not an object digest: {digest[:80]!r}")
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return is_digest(digest) and self.path(digest).is_file()

    def read(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    def put_bytes(self, data: bytes, digest: str | None = None) -> tuple[str, int]:
        """Store `data` (whose sha256 is `digest`, when the caller has it already).

        Returns its hash and the bytes added (0 when it was already there).
        """
        digest = digest or hashlib.sha256(data).hexdigest()
        if self.has(digest):
            return digest, 0
        tmp = self._tmp()
        try:
            write_durable(tmp, data, exclusive=True)
            return digest, self._publish(tmp, digest, len(data))
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk gets its space back at once
            raise

    def put_file(self, src: int) -> tuple[str, int, int]:
        """Copy open file `src` in (from offset 0), hashing the bytes copied: (hash, size, added).

        The hash is of exactly the bytes stored, even if the file changes
        while it is read.
        """
        h = hashlib.sha256()
        size = 0
        tmp = self._tmp()
        os.lseek(src, 0, os.SEEK_SET)
        try:
            fd = open_private(tmp, os.O_WRONLY | os.O_EXCL)
            try:
                while chunk := os.read(src, CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    write_all(fd, chunk)
                fsops.fsync(fd)
            finally:
                fsops.close(fd)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk gets its space back at once
            raise
        digest = h.hexdigest()
        if self.has(digest):
            fsops.unlink(tmp)
            return digest, size, 0
        try:
            return digest, size, self._publish(tmp, digest, size)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def sync(self) -> None:
        """Make every object published since the last call durable (one fsync per fan-out dir)."""
        for d in sorted(self._unsynced):
            fsync_dir(d)
        self._unsynced.clear()

    def remove(self, digest: str) -> int:
        """Delete one object; its size (0 if it was not there). The caller syncs (`sync`)."""
        path = self.path(digest)
        try:
            size = path.stat().st_size
            fsops.unlink(path)
        except FileNotFoundError:
            return 0
        self._unsynced.add(path.parent)
        return size

    def __iter__(self) -> Iterator[str]:
        for d in self.root.iterdir():
            if len(d.name) == 2 and d.is_dir():
                for f in d.iterdir():
                    if is_digest(d.name + f.name):  # not a tmp file, nor anything not ours
                        yield d.name + f.name

    def _tmp(self) -> Path:
        return self.root / f".tmp-{secrets.token_hex(8)}"

    def _publish(self, tmp: Path, digest: str, size: int) -> int:
        final = self.path(digest)
        if make_dirs(final.parent):
            fsync_dir(self.root)
        fsops.replace(tmp, final)
        self._unsynced.add(final.parent)
        return size


class TreeIndex:
    """seq -> manifest hash, one small file per seq (`trees/<seq>`), kept sorted in memory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        if make_dirs(root):
            fsync_dir(root.parent)
        self._trees: dict[int, str] = {}
        self.seqs: list[int] = []
        for f in root.iterdir():
            if f.name.startswith(".tmp-"):
                f.unlink(missing_ok=True)
                continue
            if f.name.isdigit():
                digest = f.read_text().strip()
                if len(digest) == 64:
                    self._trees[int(f.name)] = digest
        self.seqs = sorted(self._trees)

    def __len__(self) -> int:
        return len(self.seqs)

    def get(self, seq: int) -> str | None:
        return self._trees.get(seq)

    def set(self, seq: int, digest: str) -> int:
        """Record (durably) that the workspace as of `seq` is manifest `digest`; bytes written."""
        written = self.write(seq, digest)
        self.note(seq, digest)
        return written

    def write(self, seq: int, digest: str) -> int:
        """The file of `set` only (any thread); `note` makes it known. Bytes written."""
        data = f"{digest}\n".encode()
        atomic_write(self.root / f"{seq:020d}", data)
        return len(data)

    def note(self, seq: int, digest: str) -> None:
        """The in-memory half of `set`, for a file `write` made durable."""
        if seq not in self._trees:
            insort(self.seqs, seq)
        self._trees[seq] = digest

    def remove(self, seqs: Iterable[int]) -> None:
        dropped = list(seqs)
        for seq in dropped:
            (self.root / f"{seq:020d}").unlink(missing_ok=True)
            self._trees.pop(seq, None)
        self.seqs = sorted(self._trees)
        if dropped:
            fsync_dir(self.root)

    def newest_in(self, lo: int, hi: int) -> int | None:
        """The highest indexed seq in lo..hi, if any."""
        i = bisect_right(self.seqs, hi) - 1
        if i >= 0 and self.seqs[i] >= lo:
            return self.seqs[i]
        return None

    def items(self) -> Iterator[tuple[int, str]]:
        for seq in self.seqs:
            yield seq, self._trees[seq]

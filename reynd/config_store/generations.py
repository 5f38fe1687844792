"""Generation files (content-addressed copies of the database) and their durable index.

    generations/<sha256>.db   one file per distinct content (db.content_hash)
    index.log                 append-only, one line per entry, fsynced per append

Index lines are `<crc32 of the rest, 8 hex> <op> <args>\\n`:

    gen <seq> <hash>          from boundary seq on, the configuration is generation
                              <hash> (until the next entry on the same lineage:
                              only change points are written, so an unchanged
                              configuration costs nothing per boundary)
    reset <R> <target>        reset record R: everything before it is captured,
                              the restore to <target> may now start
    restored <R>              the restore of reset record R is complete
    base <seq>                the store was created when the log's tip was <seq>:
                              nothing at or below it was captured

A torn last line (crash in the middle of an append, never acknowledged) is cut
on open; a bad line with intact lines after it is damage and stops the daemon.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from bisect import bisect_right, insort
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from reynd.config_store.db import _open, content_hash
from reynd.core.lineage import Lineage
from reynd.storage import fsops
from reynd.storage.errors import StorageError
from reynd.storage.fsutil import create_empty, fsync_dir, open_private, write_all

__all__ = ["ConfigFileDamaged", "GenerationFiles", "GenerationIndex", "ResetState"]

ResetState = Literal["todo", "sealed", "done"]

_CHUNK = 1 << 20


class ConfigFileDamaged(StorageError):
    """A file of the config generation store failed its checks; names it and what to do.

    A storage fault (the daemon refuses to start on it). Its wire form is
    `reynd.protocol.errors.ConfigDamaged`: what a client gets when a rewind or
    checkout was recorded but this kept the configuration from being restored.
    """

    def __init__(self, path: Path, reason: str, hint: str = "") -> None:
        self.path = path
        self.reason = reason
        hint = f". {hint}" if hint else ""
        super().__init__(f"config generation store: {path} is damaged: {reason}{hint}")


@dataclass(slots=True)
class GenerationIndex:
    """seq -> generation hash, and the progress of each restore, persisted in index.log."""

    path: Path
    gens: dict[int, str] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)  # ascending keys of gens
    sealed: dict[int, int] = field(default_factory=dict)  # reset seq -> target
    restored: int = 0  # the newest reset whose restore completed
    base: int = 0
    advanced: int = 0  # boundaries through here share the newest entry (not persisted)
    created: bool = False  # the file did not exist before this open
    _fd: int = -1

    @classmethod
    def open(cls, path: Path) -> GenerationIndex:
        index = cls(path)
        index.created = not path.exists()
        data = b"" if index.created else path.read_bytes()
        good = index._load(data)
        index._fd = open_private(path, os.O_WRONLY | os.O_APPEND)
        if good < len(data):
            fsops.ftruncate(index._fd, good)  # a torn tail: never acknowledged
            fsops.fsync(index._fd)
        if index.created:
            fsync_dir(path.parent)
        return index

    def _load(self, data: bytes) -> int:
        """Apply every intact line; returns the length of the intact prefix."""
        offset = 0
        lines = data.split(b"\n")
        for i, line in enumerate(lines):
            last = i == len(lines) - 1  # no newline after it: unfinished
            ok = not last and len(line) > 9 and line[8:9] == b" "
            if ok:
                try:
                    ok = int(line[:8], 16) == zlib.crc32(line[9:])
                    if ok:
                        self._apply(line[9:].decode().split())
                except (ValueError, IndexError):
                    ok = False
            if not ok:
                if last or all(not rest for rest in lines[i + 1 :]):
                    return offset
                raise ConfigFileDamaged(
                    self.path,
                    f"bad entry at byte {offset} with intact entries after it",
                    "Move the state/config directory away to start the config store afresh "
                    "(runtime settings then come from reynd.toml)",
                )
            offset += len(line) + 1
        return offset

    def _apply(self, words: list[str]) -> None:
        op = words[0]
        if op == "gen":
            seq, digest = int(words[1]), words[2]
            if len(digest) != 64:
                raise ValueError(digest)
            if seq not in self.gens:
                insort(self.seqs, seq)
            self.gens[seq] = digest
        elif op == "reset":
            self.sealed[int(words[1])] = int(words[2])
        elif op == "restored":
            self.restored = max(self.restored, int(words[1]))
        elif op == "base":
            self.base = max(self.base, int(words[1]))
        else:
            raise ValueError(op)

    def close(self) -> None:
        if self._fd >= 0:
            fsops.close(self._fd)
            self._fd = -1

    # -- appends (each durable before it returns) --------------------------------------

    def append(self, entries: Sequence[str]) -> None:
        if not entries:
            return
        data = b"".join(_frame(e) for e in entries)
        write_all(self._fd, data)
        fsops.fsync(self._fd)
        for e in entries:
            self._apply(e.split())

    def add_gens(self, seqs: Sequence[int], digest: str) -> None:
        self.append([f"gen {s} {digest}" for s in seqs])

    def advance(self, seq: int) -> None:
        """Boundaries through `seq` are covered by the entries already written."""
        self.advanced = max(self.advanced, seq)

    # -- queries -----------------------------------------------------------------------

    @property
    def through(self) -> int:
        """Every generation at or below this seq has been indexed (or never will be)."""
        return max(self.seqs[-1] if self.seqs else 0, self.restored, self.base, self.advanced)

    def reset_state(self, reset: int) -> ResetState:
        if reset <= self.restored or reset <= self.base:
            return "done"
        return "sealed" if reset in self.sealed else "todo"

    def candidates(self, target: int, lineage: Lineage) -> Iterator[tuple[int, str]]:
        """Generations on lineage(target) at or below it, nearest first."""
        for lo, hi in lineage.iter_intervals(target) if target > 0 else ():
            i = bisect_right(self.seqs, hi) - 1
            while i >= 0 and self.seqs[i] >= lo:
                yield self.seqs[i], self.gens[self.seqs[i]]
                i -= 1


def _frame(entry: str) -> bytes:
    body = entry.encode()
    return b"%08x " % zlib.crc32(body) + body + b"\n"


@dataclass(frozen=True, slots=True)
class GenerationFiles:
    """The directory of generation files, named by content hash."""

    dir: Path

    def path(self, digest: str) -> Path:
        return self.dir / f"{digest}.db"

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.dir.glob("*.db"))

    def remove_leftovers(self) -> None:
        for tmp in self.dir.glob(".tmp-*"):
            fsops.unlink(tmp)

    def capture(self, conn: sqlite3.Connection, digest: str) -> bool:
        """Write the database behind `conn` (whose content hash is `digest`) as a generation.

        A consistent copy (VACUUM INTO), fsynced, renamed into place, directory
        fsynced. False (nothing written) when that content is already stored.
        """
        final = self.path(digest)
        if final.exists():
            return False
        tmp = self.dir / f".tmp-{digest}.db"
        if tmp.exists():
            fsops.unlink(tmp)
        # VACUUM INTO accepts an empty file: created 0600, not 0644 & ~umask.
        create_empty(tmp)
        conn.execute("VACUUM INTO ?", (str(tmp),))
        _fsync_file(tmp)
        fsops.replace(tmp, final)
        fsync_dir(self.dir)
        return True

    def import_file(self, source: Path) -> str:
        """Store an existing database file as a generation (as is, no migration); its hash."""
        conn = _open_ro(source)
        try:
            digest = content_hash(conn)
        finally:
            conn.close()
        final = self.path(digest)
        if not final.exists():
            tmp = self.dir / f".tmp-{digest}.db"
            _copy_durable(source, tmp)
            fsops.replace(tmp, final)
            fsync_dir(self.dir)
        return digest

    def checkout(self, digest: str, dest: Path) -> None:
        """Copy generation `digest` to `dest` (durably) and check that it is what its name says.

        ConfigFileDamaged (naming the file) when it is not a database, fails
        SQLite's integrity check, or its content does not hash to its name;
        `dest` is then removed.
        """
        source = self.path(digest)
        _copy_durable(source, dest)
        try:
            conn = _open_ro(dest)
            try:
                # Indexes too: the content hash reads the tables only.
                problems = [r[0] for r in conn.execute("PRAGMA integrity_check")]
                actual = content_hash(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            fsops.unlink(dest)
            raise _damaged(source, f"not a readable SQLite database ({exc})") from None
        if problems != ["ok"]:
            fsops.unlink(dest)
            raise _damaged(source, f"SQLite integrity check: {'; '.join(problems[:3])}")
        if actual != digest:
            fsops.unlink(dest)
            raise _damaged(source, f"its content hashes to {actual[:12]}…, not to its name")


def _damaged(path: Path, reason: str) -> ConfigFileDamaged:
    return ConfigFileDamaged(
        path,
        reason,
        "Restore the file from a backup, or move it away: the restore then uses the "
        "previous generation of that lineage (runtime settings changed in between are lost)",
    )


def _open_ro(path: Path) -> sqlite3.Connection:
    # immutable: no lock, no journal, nothing written next to the file.
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def _fsync_file(path: Path) -> None:
    fd = fsops.open(path, os.O_RDONLY)
    try:
        fsops.fsync(fd)
    finally:
        fsops.close(fd)


def _copy_durable(source: Path, dest: Path) -> None:
    fd = open_private(dest, os.O_WRONLY | os.O_TRUNC)
    try:
        with source.open("rb") as f:
            while chunk := f.read(_CHUNK):
                write_all(fd, chunk)
        fsops.fsync(fd)
    finally:
        fsops.close(fd)


def open_fresh(path: Path) -> None:
    """Create an empty current-schema database at `path`, durably."""
    conn = _open(path)
    conn.close()
    _fsync_file(path)

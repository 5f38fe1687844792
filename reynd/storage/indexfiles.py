"""The segment index files: `state/index/<first seq, 20 digits>.idx`, one per WAL segment.

A cache of what a scan of the segment would rebuild (segindex.py), so that
start-up reads it instead of decoding every record. Never the source of
truth: the WAL is. So an index is used only when it passes its own checksums
and a cheap check against its segment (the segment is at least as long as
the index says, and the last record it describes is there, intact, with the
same seq, checksum and time); otherwise it is removed (logged) and the segment
is scanned in full, as if the index had never existed. A segment without an
index is scanned in full too.

Written alongside snapshots: each write appends one chunk per segment for the
records no chunk describes yet, all of them durable already (their fdatasync
returned). So a chunk never describes a record that a crash could take back,
and a crash while writing one leaves a torn chunk: the index is then unusable
(scan), and removed at the next start; the next write starts it again.
Writes are not on the commit path and their failures are not fatal (the
index is dropped), unlike the WAL's.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Final

from reynd.storage import crashpoints, fsops
from reynd.storage.errors import CorruptionError
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.fsutil import fsync_dir, make_dirs, open_private, write_halves
from reynd.storage.recovery import decode_body
from reynd.storage.segindex import Chunk, IndexUnusable, decode_index, encode_chunk

__all__ = ["INDEX_DIR", "SUFFIX", "IndexFiles", "record_crc"]

log = logging.getLogger("reynd.storage.index")

INDEX_DIR: Final = "index"
SUFFIX: Final = ".idx"


class IndexFiles:
    """The index files of one state directory (`state/index/`)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def path(self, first_seq: int) -> Path:
        return self.dir / f"{first_seq:020d}{SUFFIX}"

    # -- reading (at open) ----------------------------------------------------------------

    def load(self, first_seq: int, segment: Path) -> list[Chunk]:
        """The chunks of the segment's index, checked against the segment; [] without one.

        Raises IndexUnusable (the reason) when the index may not be used.
        """
        try:
            data = self.path(first_seq).read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise IndexUnusable(f"cannot read it ({exc})") from None
        chunks = decode_index(data, first_seq)
        if chunks:
            _check_against(chunks[-1], segment)
        return chunks

    def discard(self, first_seq: int, reason: str) -> None:
        """Remove an index that may not be used (it is rebuilt by the next write)."""
        path = self.path(first_seq)
        log.warning("segment index %s not used, segment scanned in full: %s", path, reason)
        self.drop(first_seq)

    def remove_orphans(self, segments: set[int]) -> None:
        """Remove the index of every segment that is gone (a crash after its deletion)."""
        if not self.dir.is_dir():
            return
        for p in self.dir.iterdir():
            if p.name.startswith(".") or p.suffix != SUFFIX:
                continue
            try:
                first = int(p.stem)
            except ValueError:
                continue
            if first not in segments:
                self.drop(first)

    # -- writing ---------------------------------------------------------------------------

    def append(self, segment: Path, chunk: Chunk) -> None:
        """Append `chunk` (its `last_crc` is read here) to its segment's index, synced.

        Any thread. The records it describes must be durable. Raises OSError
        or CorruptionError (the segment does not hold what `chunk` says),
        after which the caller drops the index (`drop`).
        """
        first_seq = int(segment.stem)
        chunk = replace(chunk, last_crc=_last_crc(chunk, segment))
        data = encode_chunk(chunk)
        if make_dirs(self.dir):
            fsync_dir(self.dir.parent)
        path = self.path(first_seq)
        created = not path.exists()
        fd = open_private(path, os.O_WRONLY | os.O_APPEND)
        try:
            write_halves(fd, data, "index.mid_write")
            fsops.fdatasync(fd)
        finally:
            fsops.close(fd)
        if created:
            fsync_dir(self.dir)
        crashpoints.hit("index.after_chunk")

    def drop(self, first_seq: int) -> None:
        """Remove an index that may not be used, or that a failed write left (best effort)."""
        try:
            fsops.unlink(self.path(first_seq))
            fsync_dir(self.dir)
        except FileNotFoundError:
            pass
        except OSError as exc:
            # It stays; the next start finds it torn or out of step again, and scans.
            log.warning("cannot remove segment index %s: %s", self.path(first_seq), exc)

    def drop_all(self) -> None:
        """Remove every index file (best effort, as `drop`): the next start scans in full."""
        if self.dir.is_dir():
            for p in self.dir.glob(f"*{SUFFIX}"):
                if p.stem.isdigit():
                    self.drop(int(p.stem))

    def remove(self, first_seq: int) -> None:
        """Remove the index of a segment retention deleted; the caller syncs the directory."""
        with contextlib.suppress(FileNotFoundError):
            fsops.unlink(self.path(first_seq))


def _last_record(chunk: Chunk, segment: Path) -> bytes:
    start = chunk.offsets[-1]
    with segment.open("rb") as f:
        f.seek(start)
        return f.read(chunk.end - start)


def _check_against(chunk: Chunk, segment: Path) -> None:
    """The segment holds what the index's last chunk says, at its last record (cheap)."""
    try:
        size = segment.stat().st_size
    except FileNotFoundError:
        raise IndexUnusable(f"{segment} is gone") from None
    if size < chunk.end:
        raise IndexUnusable(f"{segment} is {size} bytes, the index describes {chunk.end}")
    data = _last_record(chunk, segment)
    try:
        body, end = next_frame(data, 0)
    except FrameInvalid as exc:
        raise IndexUnusable(f"the last record it describes is not intact ({exc})") from None
    if end != len(data):
        raise IndexUnusable("the last record it describes has another length")
    try:
        event = decode_body(body, segment, chunk.offsets[-1], chunk.last)
    except CorruptionError as exc:
        raise IndexUnusable(exc.reason) from None
    if int(data[8:16], 16) != chunk.last_crc or (event.seq, event.ts) != (
        chunk.last,
        chunk.last_ts,
    ):
        raise IndexUnusable(
            f"the segment holds another record at byte {chunk.offsets[-1]} than the index says"
        )


def _last_crc(chunk: Chunk, segment: Path) -> int:
    """The checksum of the last record `chunk` describes, read from the segment and checked."""
    return record_crc(segment, chunk.offsets[-1], chunk.end, chunk.last)


def record_crc(segment: Path, start: int, end: int, seq: int) -> int:
    """The checksum in the frame of record `seq`, bytes start..end of `segment`, once checked.

    Raises CorruptionError when those bytes are not exactly that record, intact.
    """
    with segment.open("rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        body, stop = next_frame(data, 0)
    except FrameInvalid as exc:
        raise CorruptionError(segment, start, seq, str(exc)) from None
    event = decode_body(body, segment, start, seq)
    if stop != len(data) or event.seq != seq:
        raise CorruptionError(segment, start, seq, "not the record the index describes")
    return int(data[8:16], 16)

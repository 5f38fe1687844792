"""The write-ahead log: segmented, checksummed, append-only, one global seq.

Layout: `<state>/wal/<first seq, 20 digits>.jsonl`, one framed event per line
(see framing.py). Seqs are contiguous across segments, so a record is found
by bisecting segment first seqs, then by its index in that segment's offset
array: reads never scan.

Threads: `write_batch` and the sync run one batch at a time, on the owner's
event loop (a small batch whose fdatasync runs in the kernel through AIO) or
on the committer's one worker thread (storage/batch.py), and touch only the
writer's file descriptor; `publish` and the readers run on the owner's
thread and see only records that are already durable.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from reynd.protocol.events import Event
from reynd.storage import crashpoints, fsops
from reynd.storage.errors import CorruptionError, WalFailed
from reynd.storage.extent import NAME, LogExtent, save_extent
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.fsutil import fsync_dir, make_dirs, open_private, write_all
from reynd.storage.indexfiles import IndexFiles
from reynd.storage.recovery import RecoveryReport, decode_body, scan_segment
from reynd.storage.segindex import Chunk, IndexUnusable
from reynd.storage.segments import SUFFIX, TORN_DIR, Segment, segment_path

# RecoveryReport, Segment, segment_path, SUFFIX and TORN_DIR are re-exported.
__all__ = [
    "SUFFIX",
    "TORN_DIR",
    "Extent",
    "Placement",
    "RecoveryReport",
    "Segment",
    "Wal",
    "segment_path",
]

log = logging.getLogger(__name__)


class Placement(NamedTuple):
    """Where the writer put one record: which segment, at which offset.

    A named tuple: the writer thread makes one per record, and a tuple is
    made at a third of the cost of a frozen dataclass.
    """

    seq: int
    segment: int  # first seq of the segment
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Extent:
    """The framed bytes of records first..last: `path`, bytes start..end."""

    first: int
    last: int
    path: Path
    start: int
    end: int

    def read(self) -> bytes:
        """The bytes, from a descriptor of its own (blocking)."""
        with self.path.open("rb") as f:
            f.seek(self.start)
            data = f.read(self.end - self.start)
        if len(data) != self.end - self.start:
            raise CorruptionError(self.path, self.start, self.first, "segment shorter than indexed")
        return data


def _end(seg: Segment, i: int) -> int:
    """The offset just past record index i of `seg`."""
    return seg.offsets[i + 1] if i + 1 < len(seg.offsets) else seg.size


class Wal:
    """The log. Open with `Wal.open`; one instance per state directory."""

    def __init__(self, wal_dir: Path, segment_bytes: int) -> None:
        self.dir = wal_dir
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self._firsts: list[int] = []  # first seq of each segment, for bisect
        self._read_fds: dict[int, int] = {}
        self._read_fds_lock = threading.Lock()
        # Writer-thread state.
        self._wfd = -1
        self._wfirst = 0
        self._wsize = 0
        self._glue: Set[int] = frozenset()  # seqs of a batch not all written yet
        self._failed: BaseException | None = None  # a write or sync failed: no more writes
        self.index: IndexFiles | None = None  # the segments' index files, when kept
        self._read_only = False
        # state/wal/extent, once the open's checks passed (`track_extent`): rewritten
        # by the writer thread at each new segment, by the owner at a clean close.
        self._extent: LogExtent | None = None
        self._extent_lock = threading.Lock()

    # -- opening and recovery -----------------------------------------------

    @classmethod
    def open(
        cls,
        wal_dir: Path,
        segment_bytes: int,
        on_record: Callable[[Event, int], None],
        *,
        index: IndexFiles | None = None,
        on_chunk: Callable[[Chunk], None] | None = None,
        read_only: bool = False,
    ) -> tuple[Wal, RecoveryReport]:
        """Verify every record, or take a segment's index for the records it describes.

        `on_record(event, nbytes)` sees each scanned record and `on_chunk` each
        chunk of a usable index (`index`), all in seq order. The records after
        what an index describes (and every record of a segment without a
        usable one) are scanned and verified one by one. A torn tail of the
        last segment (nothing valid after the first bad byte) was never
        acknowledged: it is cut, kept under wal/torn/, and synced. Any other
        bad record raises CorruptionError. `read_only` (a verification) changes
        nothing: a torn tail is only reported, and the log cannot be written.
        """
        if read_only:
            if not wal_dir.is_dir():
                raise FileNotFoundError(f"no WAL directory {wal_dir}")
        elif make_dirs(wal_dir):
            fsync_dir(wal_dir.parent)
        wal = cls(wal_dir, segment_bytes)
        wal.index = index
        report = RecoveryReport()
        paths = sorted(p for p in wal_dir.iterdir() if p.suffix == SUFFIX and p.is_file())
        if index is not None and not read_only:
            index.remove_orphans({int(p.stem) for p in paths if p.stem.isdigit()})
        expected: int | None = None
        for i, path in enumerate(paths):
            seg = _segment_at(path, expected)
            if index is not None and on_chunk is not None and not read_only:
                wal._take_index(seg, index, on_chunk)
            last = i == len(paths) - 1
            scan_segment(seg, last=last, on_record=on_record, report=report, cut=not read_only)
            if not seg.offsets and not last:
                raise CorruptionError(path, 0, seg.first_seq, "empty segment before the last one")
            wal._add_segment(seg)
            expected = seg.last_seq + 1
            report.records += len(seg.offsets)
            report.indexed += seg.indexed
        report.segments = len(wal.segments)
        report.scanned = report.records - report.indexed
        wal._read_only = read_only
        if not read_only:
            wal._open_writer()
        return wal, report

    @staticmethod
    def _take_index(seg: Segment, index: IndexFiles, on_chunk: Callable[[Chunk], None]) -> None:
        try:
            chunks = index.load(seg.first_seq, seg.path)
        except IndexUnusable as exc:
            index.discard(seg.first_seq, str(exc))
            return
        for chunk in chunks:
            on_chunk(chunk)
            seg.offsets.extend(chunk.offsets)
            seg.size, seg.last_ts = chunk.end, chunk.last_ts
        seg.indexed = len(seg.offsets)

    def _add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        self._firsts.append(seg.first_seq)

    def _open_writer(self) -> None:
        if self.segments:
            seg = self.segments[-1]
            self._wfirst, self._wsize = seg.first_seq, seg.size
            self._wfd = fsops.open(seg.path, os.O_WRONLY | os.O_APPEND)
        # else: the first write creates segment 1.

    # -- properties -------------------------------------------------------------

    @property
    def head(self) -> int:
        """The highest durable seq (0 when empty)."""
        return self.segments[-1].last_seq if self.segments else 0

    @property
    def first_seq(self) -> int:
        """The lowest seq still in the log (1 when nothing was truncated)."""
        return self.segments[0].first_seq if self.segments else self.head + 1

    def bytes_between(self, lo: int, hi: int) -> int:
        """Bytes of the records lo..hi (inclusive), all durable."""
        if lo > hi:
            return 0
        total = 0
        for seg, a, b in self._spans(lo, hi):
            end = _end(seg, b)
            total += end - seg.offsets[a]
        return total

    # -- writer thread -------------------------------------------------------------

    def write_batch(
        self, frames: list[tuple[int, bytes]], glued: Set[int] = frozenset()
    ) -> list[Placement]:
        """Write framed records (seq, frame) in order; not durable until `sync`.

        `glued`: seqs that continue an atomic batch (Staged.glued). They never
        start a new segment, so that a batch lies in one file and recovery,
        which only cuts the last segment, can drop it whole. A batch may end
        past this call (a follower's shipment): its later seqs are kept.

        Any failure here or in `sync` leaves the log refusing every later
        write (WalFailed): what reached the disk is unknown.
        """
        self._check_writable()
        try:
            return self._write_batch(frames, self._glue | glued)
        except BaseException as exc:
            self._failed = exc
            raise

    def _write_batch(self, frames: list[tuple[int, bytes]], glue: Set[int]) -> list[Placement]:
        crashpoints.hit("wal.write")
        out: list[Placement] = []
        buf: list[bytes] = []
        mid_batch = crashpoints.armed("wal.mid_batch")
        for seq, frame in frames:
            full = self._wsize >= self.segment_bytes and seq not in glue
            if self._wfd < 0 or full:
                if buf:
                    write_all(self._wfd, b"".join(buf))
                    buf.clear()
                self._rotate(seq)
            out.append(Placement(seq, self._wfirst, self._wsize, len(frame)))
            if mid_batch and seq in glue:
                # Tests: the batch's records before this one and half of this
                # one are in the file when the process dies.
                half = len(frame) // 2
                write_all(self._wfd, b"".join([*buf, frame[:half]]))
                buf = [frame[half:]]
                crashpoints.hit("wal.mid_batch")
            else:
                buf.append(frame)
            self._wsize += len(frame)
        if buf:
            write_all(self._wfd, b"".join(buf))
        if frames:
            self._glue = frozenset(s for s in glue if s > frames[-1][0])
        crashpoints.hit("wal.after_write")
        return out

    def _rotate(self, first_seq: int) -> None:
        if self._wfd >= 0:
            # Records in the old segment must be durable before the new file
            # can hold later ones: recovery treats only the last segment's
            # tail as possibly torn.
            fsops.fdatasync(self._wfd)
            fsops.close(self._wfd)
        path = segment_path(self.dir, first_seq)
        self._wfd = open_private(path, os.O_WRONLY | os.O_EXCL | os.O_APPEND)
        fsync_dir(self.dir)
        # The file is durable first: the extent never lists a segment a crash can take back.
        # Every seq below it is durable too (synced above): the log never ends below them.
        self._update_extent(add=first_seq, issued=first_seq - 1)
        self._wfirst, self._wsize = first_seq, 0

    # -- the extent file (extent.py) -------------------------------------------------

    def track_extent(self, extent: LogExtent, *, on_disk: bool, required: bool = False) -> None:
        """Keep `extent` up to date from now on, starting with the segments there are (owner).

        Called once the open's checks passed; `on_disk`: `extent` is what the
        file holds (else it is written whatever changed: a migration). `required`:
        the file must hold `extent` (an accepted loss), else a disk that refuses the
        write only postpones it (to the next segment). Only the
        sealed segments' end is recorded as durable here: the last segment's
        records may still sit in the page cache after a crash of the process.
        """
        self._extent = extent
        sealed = self._firsts[-1] - 1 if self._firsts else 0
        for seg in self.segments[:-1]:
            if seg.last_seq > extent.issued:
                # Not known synced yet (a copied or restored log): make it so before
                # the file says it is (a no-op for pages already on disk).
                fd = fsops.open(seg.path, os.O_RDONLY)
                try:
                    fsops.fsync(fd)
                finally:
                    fsops.close(fd)
        # A new, empty log has nothing to record yet: its first segment writes the file.
        force = not on_disk and bool(self._firsts or extent.issued or extent.lost)
        if required:
            self._update_extent(firsts=list(self._firsts), issued=sealed, force=force)
        else:
            self._extent_if_room(firsts=list(self._firsts), issued=sealed, force=force)

    def record_head(self) -> None:
        """Record the head as durable (a clean stop: no append in flight, all synced)."""
        if self._failed is not None or self._read_only:
            return  # what reached the disk is not known
        if self._wfd >= 0:
            fsops.fdatasync(self._wfd)
        self._extent_if_room(issued=self.head)

    def _extent_if_room(
        self, *, issued: int = 0, firsts: list[int] | None = None, force: bool = False
    ) -> None:
        """`_update_extent`, unless the disk refuses it (ENOSPC, EIO...): then logged.

        For the writes nothing acknowledged needs (a clean stop's head, a start's
        refresh): the file on disk stays valid, only older, and a full disk must
        not fail a stop or a start for it. A later loss names fewer seqs, at worst.
        """
        try:
            self._update_extent(issued=issued, firsts=firsts, force=force)
        except OSError as exc:
            log.warning("extent.not_recorded: %s (head %d): %s", self.dir / NAME, self.head, exc)

    def _update_extent(
        self,
        *,
        add: int | None = None,
        issued: int = 0,
        firsts: list[int] | None = None,
        force: bool = False,
    ) -> None:
        if self._extent is None:
            return
        with self._extent_lock:
            old = self._extent
            segments = list(old.segments) if firsts is None else firsts
            if add is not None and add not in segments:
                segments.append(add)
            new = LogExtent(
                segments=sorted(segments), issued=max(old.issued, issued), lost=list(old.lost)
            )
            if new != old or force:
                save_extent(self.dir, new)
                self._extent = new

    def sync(self) -> None:
        """fdatasync the current segment. An error here is fatal for the caller."""
        fd = self.start_sync()
        if fd >= 0:  # else nothing was ever written (an empty batch on an empty log)
            self.finish_sync(fd)

    def finish_sync(self, fd: int) -> None:
        """fdatasync `fd` (from `start_sync`) and record the outcome (`sync_done`)."""
        try:
            fsops.fdatasync(fd)
        except BaseException as exc:
            self.sync_done(exc)
        self.sync_done(None)

    def start_sync(self) -> int:
        """The fd to fdatasync now, or -1 when nothing was ever written.

        For a caller that runs the sync itself (kernel AIO); it must then
        call `sync_done` with the outcome.
        """
        self._check_writable()
        if self._wfd < 0:
            return -1
        try:
            crashpoints.hit("wal.sync")
        except BaseException as exc:
            self.sync_done(exc)
        return self._wfd

    def sync_done(self, error: BaseException | None) -> None:
        """Record a sync's outcome: raises `error` (and refuses all later writes) if any."""
        if error is not None:
            # Never retried: after a failed fsync Linux may have dropped the
            # pages, and a later fsync would report success (rule 5).
            self._failed = error
            raise error
        crashpoints.hit("wal.after_sync")

    def fits_segment(self, nbytes: int) -> bool:
        """True when `nbytes` more can be written without opening a segment."""
        return self._wfd >= 0 and self._wsize + nbytes <= self.segment_bytes

    def _check_writable(self) -> None:
        if self._read_only:
            raise WalFailed("this log was opened read-only (a verification)")
        if self._failed is not None:
            raise WalFailed(
                f"an earlier WAL write or sync failed ({self._failed!r}); "
                "nothing more is written until the store is reopened (recovery)"
            ) from self._failed

    # -- owner thread ------------------------------------------------------------

    def publish(self, placements: list[Placement], ts: float = 0.0) -> None:
        """Make durable records visible to readers, in seq order; `ts` is their append time."""
        for p in placements:
            if not self.segments or self.segments[-1].first_seq != p.segment:
                self._add_segment(Segment(p.segment, segment_path(self.dir, p.segment)))
            seg = self.segments[-1]
            if p.seq != seg.first_seq + len(seg.offsets):
                raise AssertionError(f"placement of seq {p.seq} out of order")
            seg.offsets.append(p.offset)
            seg.size = p.offset + p.length
            seg.last_ts = ts

    def drop_oldest(self, count: int) -> list[Path]:
        """Delete the `count` oldest segments (never the last one); returns their paths.

        Oldest first, so that a crash part-way leaves a contiguous log; the
        directory is synced once at the end. Owner thread only.
        """
        count = min(count, len(self.segments) - 1)
        dropped = self.segments[:count]
        for seg in dropped:
            fd = self._read_fds.pop(seg.first_seq, None)
            if fd is not None:
                fsops.close(fd)
            fsops.unlink(seg.path)
            if self.index is not None:
                self.index.remove(seg.first_seq)
            crashpoints.hit("gc.after_unlink")
        if dropped:
            fsync_dir(self.dir)
            if self.index is not None and self.index.dir.is_dir():
                fsync_dir(self.index.dir)
        del self.segments[:count]
        del self._firsts[:count]
        if self._extent is not None and dropped:
            with self._extent_lock:  # written at the next new segment or clean stop
                gone = {seg.first_seq for seg in dropped}
                self._extent.segments = [s for s in self._extent.segments if s not in gone]
        return [seg.path for seg in dropped]

    def read(self, lo: int, hi: int, kinds: Set[str] | None = None) -> Iterator[Event]:
        """Durable events with lo <= seq <= hi, in order, checksums verified.

        `kinds`: only the records of these kinds (`_read_kinds`).
        """
        if kinds is not None:
            yield from self._read_kinds(lo, hi, kinds)
            return
        for seg, a, b in self._spans(lo, hi):
            start = seg.offsets[a]
            end = _end(seg, b)
            data = fsops.pread(self._read_fd(seg), end - start, start)
            pos = 0
            for i in range(a, b + 1):
                seq = seg.first_seq + i
                try:
                    body, pos = next_frame(data, pos)
                except FrameInvalid as exc:
                    raise CorruptionError(seg.path, start + pos, seq, str(exc)) from None
                yield self._decoded(seg, i, body)

    def _read_kinds(self, lo: int, hi: int, kinds: Set[str]) -> Iterator[Event]:
        """The records of `kinds` among lo..hi, found by a search of the bytes.

        A record's body starts with its kind (`"rec":{"kind":"step.committed",`),
        so the records of other kinds are neither parsed nor decoded: a read
        of a few kinds costs what they hold, plus a scan in C of the rest.
        A hit inside another record's text is that record's, and is dropped
        once its frame says its kind is another.
        """
        prefixes = tuple(f'{{"kind":"{k}"'.encode() for k in sorted(kinds))
        needles = [b'"rec":' + prefix for prefix in prefixes]
        for seg, i, body in self._found(lo, hi, needles):
            if body.startswith(prefixes):
                yield self._decoded(seg, i, body)

    def span_bytes(self, lo: int, hi: int) -> int:
        """The framed bytes of durable records lo..hi (what a search of them scans)."""
        return sum(_end(seg, b) - seg.offsets[a] for seg, a, b in self._spans(lo, hi))

    def read_having(self, lo: int, hi: int, needles: Sequence[bytes]) -> Iterator[Event]:
        """The records among lo..hi whose body holds one of `needles`, found by a search of
        the bytes (as `_read_kinds`): a needle in the frame's header never matches one
        that starts with a quote (the header holds no string but `crc`'s hex digits)."""
        for seg, i, body in self._found(lo, hi, needles):
            if any(n in body for n in needles):
                yield self._decoded(seg, i, body)

    def _found(
        self, lo: int, hi: int, needles: Sequence[bytes]
    ) -> Iterator[tuple[Segment, int, bytes]]:
        """(segment, index, body) of each record among lo..hi whose frame holds a needle.

        The segment is searched through a read-only mapping of its file: a copy of a
        long span (a new buffer of its size, every page of it faulted in) cost ten
        times the search itself.
        """
        for seg, a, b in self._spans(lo, hi):
            start = seg.offsets[a]
            end = _end(seg, b)
            found: list[tuple[int, bytes]] = []
            with mmap.mmap(self._read_fd(seg), 0, access=mmap.ACCESS_READ) as data:
                hits: set[int] = set()
                for needle in needles:
                    at = data.find(needle, start, end)
                    while at != -1:
                        i = bisect_right(seg.offsets, at, a, b + 1) - 1
                        hits.add(i)
                        # The rest of this record holds nothing new: search from the next one.
                        at = data.find(needle, _end(seg, i), end) if i < b else -1
                for i in sorted(hits):
                    frame = data[seg.offsets[i] : _end(seg, i)]
                    try:
                        body, _ = next_frame(frame, 0)
                    except FrameInvalid as exc:
                        raise CorruptionError(
                            seg.path, seg.offsets[i], seg.first_seq + i, str(exc)
                        ) from None
                    found.append((i, body))
            for i, body in found:
                yield seg, i, body

    @staticmethod
    def _decoded(seg: Segment, i: int, body: bytes) -> Event:
        seq = seg.first_seq + i
        event = decode_body(body, seg.path, seg.offsets[i], seq)
        if event.seq != seq:
            raise CorruptionError(seg.path, seg.offsets[i], seq, "seq mismatch on read")
        return event

    def extents(self, lo: int, hi: int, max_bytes: int) -> list[Extent]:
        """Where the framed bytes of durable records lo..hi lie, split at segment ends.

        An extent holds at least one record and stops before `max_bytes` when
        it can. Owner thread; the bytes themselves may be read on any thread
        (a durable record's bytes never change).
        """
        out: list[Extent] = []
        for seg, a, b in self._spans(lo, hi):
            i = a
            while i <= b:
                start = seg.offsets[i]
                j = i
                while j < b and _end(seg, j + 1) - start <= max_bytes:
                    j += 1
                out.append(
                    Extent(seg.first_seq + i, seg.first_seq + j, seg.path, start, _end(seg, j))
                )
                i = j + 1
        return out

    def _spans(self, lo: int, hi: int) -> Iterator[tuple[Segment, int, int]]:
        if lo < self.first_seq or hi > self.head:
            raise KeyError(
                f"seqs {lo}..{hi} are not all in the log ({self.first_seq}..{self.head})"
            )
        k = bisect_right(self._firsts, lo) - 1
        while lo <= hi:
            seg = self.segments[k]
            b = min(hi, seg.last_seq)
            yield seg, lo - seg.first_seq, b - seg.first_seq
            lo = b + 1
            k += 1

    def _read_fd(self, seg: Segment) -> int:
        fd = self._read_fds.get(seg.first_seq)
        if fd is None:
            with self._read_fds_lock:  # readers run on several worker threads
                fd = self._read_fds.get(seg.first_seq)
                if fd is None:
                    fd = fsops.open(seg.path, os.O_RDONLY)
                    self._read_fds[seg.first_seq] = fd
        return fd

    def close(self) -> None:
        """Sync and close every descriptor (no sync after a failed write or sync)."""
        if self._wfd >= 0:
            if self._failed is None:
                fsops.fdatasync(self._wfd)
            fsops.close(self._wfd)
            self._wfd = -1
        for fd in self._read_fds.values():
            fsops.close(fd)
        self._read_fds.clear()


def _segment_at(path: Path, expected: int | None) -> Segment:
    """The segment file `path`, named for its first seq: `expected` (any, for the first one)."""
    try:
        first = int(path.stem)
    except ValueError:
        raise CorruptionError(path, 0, None, "segment name is not a seq") from None
    if expected is not None and first != expected:
        raise CorruptionError(
            path, 0, expected, f"segment starts at seq {first}, expected {expected}"
        )
    return Segment(first, path)

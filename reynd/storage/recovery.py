"""Reading a WAL segment back at open: verify every record, cut a torn tail.

Only the tail may be torn (docs/durability.md rule 7): a bad record in the last
segment with no intact record after it was never acknowledged, so it is cut
(its bytes kept under wal/torn/) and the cut is synced. Any other bad record
is corruption and stops the open, naming file, offset and seq.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from reynd.protocol.events import AnyEvent, Event
from reynd.storage import fsops
from reynd.storage.errors import CorruptionError
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.fsutil import fsync_dir, make_dir, write_durable
from reynd.storage.segments import TORN_DIR, Segment

__all__ = ["RecoveryReport", "cut_tail", "decode_body", "scan_segment"]

log = logging.getLogger("reynd.storage.wal")

_decoder = msgspec.json.Decoder(AnyEvent)


@dataclass(slots=True)
class RecoveryReport:
    """What open() found: counts, and the torn tail it cut, if any."""

    segments: int = 0
    records: int = 0
    indexed: int = 0  # records taken from segment index files instead of a scan
    scanned: int = 0  # records read and verified one by one
    torn_path: Path | None = None
    torn_offset: int = 0
    torn_bytes: int = 0
    torn_saved_to: Path | None = None


def decode_body(body: bytes, path: Path, offset: int, seq: int | None) -> Event:
    """Decode one record body; a body that passed its checksum but does not decode is named."""
    try:
        event: Event = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise CorruptionError(
            path,
            offset,
            seq,
            f"checksum is valid but the record does not decode ({exc}); "
            "was it written by a newer reynd?",
        ) from None
    return event


def _check_in_order(
    event: Event, seq: int, batch: list[tuple[Event, int, int]], path: Path, offset: int
) -> None:
    """Raise CorruptionError unless `event` is record `seq`, continuing the open `batch`."""
    if event.seq != seq:
        raise CorruptionError(path, offset, seq, f"record carries seq {event.seq}, expected {seq}")
    if batch and event.more != batch[-1][0].more - 1:
        raise CorruptionError(
            path,
            offset,
            seq,
            f"record ends no batch ({batch[-1][0].more} more records were announced)",
        )


def scan_segment(
    seg: Segment,
    *,
    last: bool,
    on_record: Callable[[Event, int], None],
    report: RecoveryReport,
    cut: bool = True,
) -> None:
    """Verify every record of `seg` from byte `seg.size` on, extending its offset index.

    `on_record` sees each record in order. `last`: the newest segment, the
    only one whose tail may be torn; the torn bytes are cut (`cut`) or only
    reported (a read-only verification). Records before `seg.size` are the
    ones its index file described (none when it has none).
    """
    base = seg.size
    with seg.path.open("rb") as f:
        f.seek(base)
        data = f.read()
    pos = 0
    seq = seg.first_seq + len(seg.offsets)
    # The records of an atomic batch whose last record is not read yet: held
    # back from `on_record` until it is, dropped with the tail when it never is.
    batch: list[tuple[Event, int, int]] = []  # (event, pos, length)
    torn = len(data)
    while pos < len(data):
        try:
            body, end = next_frame(data, pos)
        except FrameInvalid as exc:
            if last and not _valid_record_after(data, pos):
                torn = pos
                break
            raise CorruptionError(seg.path, base + pos, seq, str(exc)) from None
        event = decode_body(body, seg.path, base + pos, seq)
        _check_in_order(event, seq, batch, seg.path, base + pos)
        batch.append((event, pos, end - pos))
        if event.more == 0:
            for held, at, length in batch:
                _record(seg, held, base + at, length, on_record)
            batch.clear()
        pos = end
        seq += 1
    if batch:
        if not last:
            raise CorruptionError(
                seg.path,
                base + batch[0][1],
                batch[0][0].seq,
                "an atomic batch ends the segment unfinished",
            )
        # The batch's last record never reached the disk: none of it was
        # acknowledged, and a prefix of it must not become visible.
        torn = batch[0][1]
    if torn < len(data):
        if cut:
            cut_tail(seg.path, data[torn:], base + torn, report)
        else:
            report.torn_path, report.torn_offset = seg.path, base + torn
            report.torn_bytes = len(data) - torn
    seg.size = base + torn


def _record(
    seg: Segment, event: Event, offset: int, length: int, on_record: Callable[[Event, int], None]
) -> None:
    seg.offsets.append(offset)
    seg.last_ts = event.ts
    try:
        on_record(event, length)
    except ValueError as exc:
        # A checksummed record the log cannot hold (e.g. a reset whose
        # target does not precede it) is corruption, not a crash.
        raise CorruptionError(seg.path, offset, event.seq, str(exc)) from None


def cut_tail(path: Path, tail: bytes, offset: int, report: RecoveryReport) -> None:
    """Keep `tail`, the bytes of `path` from `offset` on, under wal/torn/ (synced), then cut."""
    wal_dir = path.parent
    torn_dir = wal_dir / TORN_DIR
    if not torn_dir.exists():
        make_dir(torn_dir)
        fsync_dir(wal_dir)
    # A retried append lands at the same offset and may tear again: never
    # overwrite an earlier copy.
    saved = torn_dir / f"{path.stem}.{offset}.torn"
    n = 1
    while saved.exists():
        saved = torn_dir / f"{path.stem}.{offset}.{n}.torn"
        n += 1
    write_durable(saved, tail)
    fsync_dir(torn_dir)
    # Only after the copy is durable do we cut the original.
    fd = fsops.open(path, os.O_WRONLY)
    try:
        fsops.ftruncate(fd, offset)
        fsops.fsync(fd)
    finally:
        fsops.close(fd)
    log.warning("cut torn WAL tail: %s at %d (%d bytes kept in %s)", path, offset, len(tail), saved)
    report.torn_path, report.torn_offset = path, offset
    report.torn_bytes, report.torn_saved_to = len(tail), saved


def _valid_record_after(data: bytes, pos: int) -> bool:
    """True when some intact record starts after `pos`: then `pos` is not a torn tail."""
    k = data.find(b'{"crc":"', pos + 1)
    while k >= 0:
        try:
            next_frame(data, k)
        except FrameInvalid:
            k = data.find(b'{"crc":"', k + 1)
            continue
        return True
    return False

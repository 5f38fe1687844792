"""Reading a WAL segment back at open: verify every record, cut a torn tail.

Only the tail may be torn (DURABILITY.md rule 7): a bad record in the last
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


def scan_segment(
    seg: Segment,
    *,
    last: bool,
    on_record: Callable[[Event, int], None],
    report: RecoveryReport,
) -> None:
    """Verify every record of `seg`, filling its offset index; `on_record` sees each in order.

    `last`: the newest segment, the only one whose tail may be torn.
    """
    data = seg.path.read_bytes()
    pos = 0
    seq = seg.first_seq
    while pos < len(data):
        try:
            body, end = next_frame(data, pos)
        except FrameInvalid as exc:
            if last and not _valid_record_after(data, pos):
                cut_tail(seg.path, data, pos, report)
                break
            raise CorruptionError(seg.path, pos, seq, str(exc)) from None
        event = decode_body(body, seg.path, pos, seq)
        if event.seq != seq:
            raise CorruptionError(
                seg.path, pos, seq, f"record carries seq {event.seq}, expected {seq}"
            )
        seg.offsets.append(pos)
        seg.last_ts = event.ts
        try:
            on_record(event, end - pos)
        except ValueError as exc:
            # A checksummed record the log cannot hold (e.g. a reset whose
            # target does not precede it) is corruption, not a crash.
            raise CorruptionError(seg.path, pos, seq, str(exc)) from None
        pos = end
        seq += 1
    seg.size = pos


def cut_tail(path: Path, data: bytes, pos: int, report: RecoveryReport) -> None:
    """Keep the bytes of `path` from `pos` on under wal/torn/ (synced), then truncate there."""
    wal_dir = path.parent
    torn_dir = wal_dir / TORN_DIR
    if not torn_dir.exists():
        make_dir(torn_dir)
        fsync_dir(wal_dir)
    # A retried append lands at the same offset and may tear again: never
    # overwrite an earlier copy.
    saved = torn_dir / f"{path.stem}.{pos}.torn"
    n = 1
    while saved.exists():
        saved = torn_dir / f"{path.stem}.{pos}.{n}.torn"
        n += 1
    write_durable(saved, data[pos:])
    fsync_dir(torn_dir)
    # Only after the copy is durable do we cut the original.
    fd = fsops.open(path, os.O_WRONLY)
    try:
        fsops.ftruncate(fd, pos)
        fsops.fsync(fd)
    finally:
        fsops.close(fd)
    log.warning(
        "cut torn WAL tail: %s at %d (%d bytes kept in %s)", path, pos, len(data) - pos, saved
    )
    report.torn_path, report.torn_offset = path, pos
    report.torn_bytes, report.torn_saved_to = len(data) - pos, saved


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

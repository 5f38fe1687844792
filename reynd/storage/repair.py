"""`reynd repair`: the explicit, operator-run cut of a damaged WAL.

Opening refuses a log with a bad record before its tail (it could be bit rot
in acknowledged data, and guessing would be worse than stopping). Repair is
the decision to give up everything from that record on:

1. the highest seq the cut bytes name is recorded in the extent file
   (extent.py), so that a crash in any later step leaves a start that
   refuses and a repair that still knows how far the log reached;
2. the segment indexes of the cut segment and of every later one are
   removed (they describe records that are about to go);
3. every byte from the bad record to the end of the log is moved under
   `wal/torn/` (the cut part of the segment, and every later segment whole),
   durably; a cut inside an atomic batch starts at the batch's first record
   instead, as recovery would otherwise cut the rest of the batch at the next open;
4. the segment is truncated there and synced;
5. one `lost` record is appended for each seq that was cut, up to the highest
   seq found in the cut bytes or proven acknowledged (the extent file), so no
   seq is ever issued twice and seqs stay contiguous. The state afterwards
   is the state as of the last intact record.

Every write goes through fsops, so the simulated disk of the storage tests
sees it (tests/storage/test_repair_disk.py cuts the power at each step).

`accept_lost_segments` is the same decision for a log whose newest segment
files are gone (a start refuses it with ExtentLost): every seq proven
acknowledged past the head becomes a `lost` record. The loss is written to
the extent file first, so a crash part-way leaves a start that still
refuses, and running the repair again finishes it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from reynd.protocol.events import Lost
from reynd.storage import fsops
from reynd.storage.extent import LogExtent, load_extent, present_segments, save_extent
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.fsutil import fsync_dir, make_dirs, write_durable
from reynd.storage.indexfiles import INDEX_DIR, IndexFiles
from reynd.storage.lock import hold_lock
from reynd.storage.wal import SUFFIX, TORN_DIR

__all__ = ["AcceptReport", "RepairReport", "accept_lost_segments", "audit_reach", "truncate_at"]

if TYPE_CHECKING:
    from reynd.storage.store import Store

_SEQ = re.compile(rb'"seq":(\d{1,19})')


@dataclass(frozen=True, slots=True)
class RepairReport:
    segment: Path
    offset: int
    first_lost: int
    last_lost: int
    saved: tuple[Path, ...]


def truncate_at(root: Path, segment_name: str, offset: int) -> RepairReport:
    """Cut the log at `offset` of `segment_name` and fill the cut seqs with `lost` records."""
    from reynd.storage.store import AcceptLoss, Store  # the store appends the lost records

    wal_dir = root / "state" / "wal"
    segment = wal_dir / segment_name
    if not segment.is_file() or segment.suffix != SUFFIX:
        raise FileNotFoundError(f"no WAL segment {segment}")
    with hold_lock(root):
        data = segment.read_bytes()
        if not 0 <= offset <= len(data):
            raise ValueError(f"offset {offset} is outside {segment} (0..{len(data)})")
        kept, offset = _cut_point(data, offset, segment)
        first_lost = int(segment.stem) + kept
        later = sorted(p for p in wal_dir.iterdir() if p.suffix == SUFFIX and p.name > segment.name)
        cut = data[offset:]
        highest = max(
            [first_lost - 1, _highest_seq(cut), *(_highest_seq(p.read_bytes()) for p in later)]
        )
        # Recorded before anything moves: a crash part-way then leaves a start
        # that refuses, and a repair that still fills every seq the cut bytes
        # named (rule 8), even once the later segments are out of the log.
        _prove_issued(wal_dir, highest)
        index = IndexFiles(root / "state" / INDEX_DIR)
        if index.dir.is_dir():
            for path in [segment, *later]:
                index.remove(int(path.stem))
            fsync_dir(index.dir)
        saved = _move_aside(wal_dir, segment, offset, cut, later)
        fd = fsops.open(segment, os.O_WRONLY)
        try:
            fsops.ftruncate(fd, offset)
            fsops.fsync(fd)  # the new size too: no directory entry changes
        finally:
            fsops.close(fd)
    reason = f"cut by reynd repair at {segment.name}:{offset}"
    why = f"the cut bytes name seq {highest}"
    store = Store.open(root, accept_loss=AcceptLoss(reason, highest, why))
    try:
        if store.head != first_lost - 1:
            raise AssertionError(f"after the cut the head is {store.head}, not {first_lost - 1}")
        highest = _fill_lost(store, reason)
    finally:
        store.close(record_head=True)
    return RepairReport(segment, offset, first_lost, highest, tuple(saved))


def _prove_issued(wal_dir: Path, highest: int) -> None:
    """Make the extent file say the log reached `highest` (durably, before any cut)."""
    extent = load_extent(wal_dir) or LogExtent(segments=present_segments(wal_dir))
    if highest > extent.issued:
        extent.issued = highest
        save_extent(wal_dir, extent)


def _move_aside(
    wal_dir: Path, segment: Path, offset: int, cut: bytes, later: list[Path]
) -> list[Path]:
    """Keep `cut` (the bytes of `segment` from `offset`) and the `later` segments under
    wal/torn/, durably; the paths they are kept at."""
    torn_dir = wal_dir / TORN_DIR
    make_dirs(torn_dir)
    saved: list[Path] = []
    if cut:
        saved.append(_save(torn_dir / f"{segment.stem}.{offset}.cut", cut))
    for path in later:
        dest = torn_dir / f"{path.name}.removed"
        fsops.replace(path, dest)
        saved.append(dest)
    fsync_dir(torn_dir)
    # Durable before the cut (rule 3): a crash must never leave the later
    # segments after a shortened one (a gap no start accepts), nor the cut
    # bytes nowhere (`wal/torn` itself may be new).
    fsync_dir(wal_dir)
    return saved


@dataclass(frozen=True, slots=True)
class AcceptReport:
    first_lost: int
    last_lost: int  # < first_lost: no seq past the head was proven acknowledged
    missing: tuple[Path, ...]  # the segment files that were gone
    why: str  # what proved the seqs acknowledged
    next_seq: int


def accept_lost_segments(root: Path) -> AcceptReport | None:
    """Give up the acknowledged seqs whose segment files are gone; None when none are."""
    from reynd.storage.store import AcceptLoss, Store

    reason = "segment files gone, the loss accepted by reynd repair --accept-lost-segments"
    # The audit log is not synced and never read by recovery, but a seq it names was
    # committed: after a crash it often knows more of the lost segment than anything else.
    audit = audit_reach(root / "events")
    why = f"the audit log ({root / 'events'}) names seq {audit}"
    store = Store.open(root, accept_loss=AcceptLoss(reason, audit, why))
    try:
        loss = store.accepted
        if loss is None:
            return None
        _fill_lost(store, reason)
        return AcceptReport(loss.first, loss.last, loss.missing, loss.why, store.next_seq)
    finally:
        store.close(record_head=True)


def audit_reach(events_dir: Path, tail: int = 1 << 20) -> int:
    """The highest seq the newest audit files name (0: none); reads their last `tail` bytes."""
    from reynd.audit.codec import GZ_SUFFIX, whole_lines
    from reynd.audit.files import parse_name

    files = sorted(
        (parsed, p)
        for p in (events_dir.iterdir() if events_dir.is_dir() else ())
        if (parsed := parse_name(p.name)) is not None
    )
    best = 0
    for _, path in files[-2:]:  # a run's last file may hold only its first lines
        compressed = path.name.endswith(GZ_SUFFIX)
        try:
            with path.open("rb") as f:
                # A compressed file reads from its start (a member's start cannot be
                # found from the middle): about [audit] file_bytes, ~10x that decoded.
                f.seek(0 if compressed else max(0, path.stat().st_size - tail))
                data = f.read()
        except OSError:
            continue
        if compressed:
            data = whole_lines(data, compressed=True)[0]
        best = max(best, _highest_audit_seq(data))
    return best


class _AuditLine(msgspec.Struct):
    seq: int = 0


_audit_line = msgspec.json.Decoder(_AuditLine)


def _highest_audit_seq(data: bytes) -> int:
    best = 0
    for line in data.split(b"\n"):
        try:
            best = max(best, _audit_line.decode(line).seq)
        except (msgspec.DecodeError, TypeError):
            continue  # a torn or partial line (the tail's first one, a crash)
    return best


def _fill_lost(store: Store, reason: str) -> int:
    """Append a `lost` record for every seq of the accepted loss past the head; the last one."""
    last = store.accepted.last if store.accepted is not None else store.head
    for start in range(store.head + 1, last + 1, 4096):
        count = min(4096, last + 1 - start)
        store.append([Lost(reason=reason) for _ in range(count)])
    return max(last, store.head)


class _More(msgspec.Struct):
    more: int = 0  # records of the same atomic batch after this one (events.Event.more)


_more = msgspec.json.Decoder(_More)


def _cut_point(data: bytes, offset: int, path: Path) -> tuple[int, int]:
    """(intact records kept, where to cut): `offset` (a record boundary), or earlier.

    Earlier when `offset` falls inside an atomic batch: the cut starts at
    the batch's first record, never leaving a batch's prefix in the log.
    """
    pos = count = 0
    batch: tuple[int, int] | None = None  # (count, offset) at the open batch's first record
    while pos < offset:
        start = pos
        try:
            body, pos = next_frame(data, pos)
        except FrameInvalid:
            raise ValueError(
                f"{path}: offset {offset} is past a bad record at {pos}; cut at {pos} instead"
            ) from None
        more = _more.decode(body).more
        if more and batch is None:
            batch = (count, start)
        elif not more:
            batch = None
        count += 1
    if pos != offset:
        raise ValueError(f"{path}: offset {offset} is not at a record boundary")
    return batch if batch is not None else (count, offset)


def _highest_seq(data: bytes) -> int:
    """The highest seq mentioned in damaged bytes (0 when none can be read)."""
    return max((int(m.group(1)) for m in _SEQ.finditer(data)), default=0)


def _save(path: Path, data: bytes) -> Path:
    write_durable(path, data)
    return path

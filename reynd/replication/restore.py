"""`reynd restore`: rebuild a state directory from a replica prefix (blocking; a CLI command).

Everything is written into a temporary sibling directory, verified by
opening it as the daemon would (every record checked, the tip rebuilt),
and only then renamed into place: an interrupted restore leaves no
half-restored state directory behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from reynd.replication import layout
from reynd.replication.identity import Identity, Progress, new_store_id, save_identity
from reynd.replication.identity import save_progress as save_progress_hint
from reynd.replication.objects import Bucket, Missing, Refused
from reynd.storage.errors import CorruptionError, StorageError
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.fsutil import fsync_dir, make_dirs, write_durable
from reynd.storage.options import StorageOptions
from reynd.storage.recovery import decode_body
from reynd.storage.retained import Retained, load_retained, save_retained
from reynd.storage.segments import segment_path
from reynd.storage.snapshots import decode_snapshot
from reynd.storage.store import Store

__all__ = ["Listing", "RestoreError", "RestoreReport", "read_listing", "records_of", "restore"]


_ATTEMPTS = 5
_KEEP = frozenset(("reynd.toml",))  # files of the target directory a restore keeps


class RestoreError(Exception):
    """The restore cannot go on; the message says why and what to do."""


class ReplicaShort(RestoreError):
    """The prefix lacks records it says were shipped (or its newest claim holds none)."""


@dataclass(slots=True)
class Listing:
    """What a prefix holds, sorted by kind of object."""

    claims: dict[int, layout.Claim] = field(default_factory=dict)
    wal: list[layout.WalObject] = field(default_factory=list)
    snapshots: list[tuple[int, int]] = field(default_factory=list)
    retained: list[tuple[int, int]] = field(default_factory=list)  # (generation, floor)
    shipped: list[tuple[int, int]] = field(default_factory=list)  # (generation, seq) markers

    def plan(self, to_seq: int | None = None, *, allow_gap: bool = False) -> layout.RestorePlan:
        return layout.plan_restore(
            self.claims,
            self.wal,
            self.snapshots,
            self.retained,
            to_seq,
            shipped=self.shipped,
            allow_gap=allow_gap,
        )


def read_listing(bucket: Bucket) -> Listing:
    """List the prefix and read every claim (blocking)."""
    out = Listing()
    for key in bucket.list_keys():
        if (gen := layout.parse_claim_key(key)) is not None:
            claim = read_claim(bucket, gen)
            if claim is not None:
                out.claims[gen] = claim
        elif (obj := layout.parse_wal_key(key)) is not None:
            out.wal.append(obj)
        elif (snap := layout.parse_snapshot_key(key)) is not None:
            out.snapshots.append(snap)
        elif (kept := layout.parse_retained_key(key)) is not None:
            out.retained.append(kept)
        elif (marker := layout.parse_shipped_key(key)) is not None:
            out.shipped.append(marker)
    return out


def read_claim(bucket: Bucket, generation: int) -> layout.Claim | None:
    """The claim of `generation`; None if it is gone; Refused if it is not one reynd wrote."""
    key = layout.claim_key(generation)
    try:
        data = bucket.get(key)
    except Missing:
        return None  # deleted by hand since the listing
    try:
        claim = msgspec.json.decode(data, type=layout.Claim)
    except msgspec.DecodeError as exc:
        raise Refused(
            f"{bucket.location}{key} is not a generation claim reynd wrote ({exc}): "
            "remove it, or use another prefix"
        ) from None
    if claim.format > layout.FORMAT or claim.generation != generation:
        raise Refused(
            f"{bucket.location}{key} has format {claim.format} and generation "
            f"{claim.generation}: written by a newer reynd, or by hand; this reynd reads "
            f"format {layout.FORMAT}"
        )
    return claim


@dataclass(frozen=True, slots=True)
class RestoreReport:
    generation: int
    floor: int
    head: int
    shipped: int  # the last seq the prefix says was shipped
    records: int
    snapshots: int
    wal_bytes: int
    objects: int
    duration_s: float
    adopted: bool  # the restored directory may continue shipping to this prefix


def restore(
    bucket: Bucket,
    state_dir: Path,
    *,
    to_seq: int | None = None,
    adopt: bool = False,
    segment_bytes: int = StorageOptions().segment_bytes,
    say: Callable[[str], None] = lambda _: None,
) -> RestoreReport:
    """Rebuild `state_dir` from `bucket`'s prefix, up to `to_seq` or its end.

    `state_dir` must be absent, empty, or hold only a reynd.toml (kept).
    `adopt`: a daemon started on it may continue the prefix (it claims the
    next generation, and the daemon writing there now stands down); only
    for a full restore (`to_seq` None or the end).
    """
    if state_dir.exists() and (
        not state_dir.is_dir() or any(p.name not in _KEEP for p in state_dir.iterdir())
    ):
        raise RestoreError(f"{state_dir} exists and is not empty: restore into a new directory")
    bucket.check()
    for _ in range(_ATTEMPTS - 1):
        # Missing: the source compacted tail objects into a segment object
        # since the listing; list again.
        with contextlib.suppress(Missing):
            return _restore(bucket, state_dir, to_seq, adopt, segment_bytes, say)
    return _restore(bucket, state_dir, to_seq, adopt, segment_bytes, say)


def _restore(  # noqa: PLR0917
    bucket: Bucket,
    state_dir: Path,
    to_seq: int | None,
    adopt: bool,
    segment_bytes: int,
    say: Callable[[str], None],
) -> RestoreReport:
    started = time.perf_counter()
    location = bucket.location
    listing = read_listing(bucket)
    try:
        plan = listing.plan(to_seq)
    except layout.GapError as exc:
        raise ReplicaShort(f"{location}: {exc}") from None
    except ValueError as exc:
        raise RestoreError(f"--to-seq: {exc}") from None
    say(
        f"restoring seqs {plan.floor}..{plan.head} from {location} "
        f"(generation {plan.generation}, {len(plan.wal)} WAL objects, "
        f"{len(plan.snapshots)} snapshots)"
    )
    tmp = state_dir.with_name(f".restore-{state_dir.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        wal_bytes, kept, adopted = _build(
            bucket,
            plan,
            tmp,
            adopt=adopt and (to_seq is None or _is_end(plan, listing.wal)),
            segment_bytes=segment_bytes,
        )
        if state_dir.exists():
            for own in state_dir.iterdir():  # only _KEEP, checked above
                os.replace(own, tmp / own.name)
            state_dir.rmdir()
        else:
            make_dirs(state_dir.parent)
        os.replace(tmp, state_dir)
        fsync_dir(state_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return RestoreReport(
        generation=plan.generation,
        floor=plan.floor,
        head=plan.head,
        shipped=plan.shipped,
        records=plan.head - plan.floor + 1,
        snapshots=kept,
        wal_bytes=wal_bytes,
        objects=len(plan.wal) + len(plan.snapshots),
        duration_s=time.perf_counter() - started,
        adopted=adopted,
    )


def _build(
    bucket: Bucket,
    plan: layout.RestorePlan,
    tmp: Path,
    *,
    adopt: bool,
    segment_bytes: int,
) -> tuple[int, int, bool]:
    """Write and verify the restored directory at `tmp`: (WAL bytes, snapshots, adopted)."""
    location = bucket.location
    state = tmp / "state"
    make_dirs(state / "wal")
    make_dirs(state / "snapshots")
    wal_bytes = _write_wal(bucket, plan, state / "wal", segment_bytes)
    kept = _write_snapshots(bucket, plan, state / "snapshots")
    if plan.retained is not None:
        _write_retained(bucket, plan, state)
    elif plan.floor > 1:
        raise RestoreError(
            f"{location}: the history starts at seq {plan.floor} but no retained-history "
            "file covers it"
        )
    # Continuing the prefix from an earlier seq would hide what came after it.
    adopted = adopt
    identity = Identity(store_id=new_store_id())
    if adopted:
        identity = Identity(
            store_id=identity.store_id,
            adopted_url=str(location),
            adopted_generation=plan.generation,
        )
        hint = Progress(url=str(location), generation=plan.generation, shipped=plan.head)
        save_progress_hint(state, hint)
    save_identity(state, identity)
    fsync_dir(state)
    # The proof: open it as the daemon will (every record verified, tip rebuilt).
    with Store.open(tmp, StorageOptions(segment_bytes=segment_bytes)) as store:
        head = store.head
    if head != plan.head:
        raise RestoreError(f"restored head is {head}, expected {plan.head}")
    return wal_bytes, kept, adopted


def _is_end(plan: layout.RestorePlan, wal: list[layout.WalObject]) -> bool:
    return not any(o.generation == plan.generation and o.last > plan.head for o in wal)


def _write_wal(bucket: Bucket, plan: layout.RestorePlan, wal_dir: Path, segment_bytes: int) -> int:
    """Segment files holding seqs floor..head, each record checked; returns the bytes written."""
    total = 0
    fd = -1
    size = 0
    expected = plan.floor
    try:
        for piece in plan.wal:
            key = piece.obj.key
            data = bucket.get(key)
            records = records_of(data, key, piece.obj.first)
            for seq, start, end in records:
                if seq < piece.lo or seq < expected:
                    continue
                if seq > piece.hi:
                    break
                if seq != expected:
                    raise RestoreError(f"{key}: seq {seq} where {expected} was expected")
                if fd < 0 or size >= segment_bytes:
                    if fd >= 0:
                        os.fsync(fd)
                        os.close(fd)
                    path = segment_path(wal_dir, seq)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    size = 0
                os.write(fd, data[start:end])
                size += end - start
                total += end - start
                expected += 1
        if expected != plan.head + 1:
            raise RestoreError(f"the objects end at seq {expected - 1}, expected {plan.head}")
    finally:
        if fd >= 0:
            os.fsync(fd)
            os.close(fd)
    fsync_dir(wal_dir)
    return total


def records_of(data: bytes, key: str, first: int) -> list[tuple[int, int, int]]:
    """(seq, start, end) of every record in an object; RestoreError if any is damaged."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    seq = first
    while pos < len(data):
        try:
            body, end = next_frame(data, pos)
            event = decode_body(body, Path(key), pos, seq)
        except (FrameInvalid, CorruptionError) as exc:
            raise RestoreError(f"{key}: damaged record at byte {pos}: {exc}") from None
        if event.seq != seq:
            raise RestoreError(f"{key}: byte {pos} holds seq {event.seq}, expected {seq}")
        out.append((seq, pos, end))
        pos, seq = end, seq + 1
    return out


def _write_snapshots(bucket: Bucket, plan: layout.RestorePlan, directory: Path) -> int:
    kept = 0
    for gen, seq in plan.snapshots:
        path = directory / f"{seq:020d}.snap"
        if path.exists():
            continue  # shipped by two generations
        data = bucket.get(layout.snapshot_key(gen, seq))
        try:
            decode_snapshot(data, path)
        except StorageError:
            continue  # the WAL restores without it; the daemon would discard it anyway
        write_durable(path, data)
        kept += 1
    fsync_dir(directory)
    return kept


def _write_retained(bucket: Bucket, plan: layout.RestorePlan, state: Path) -> None:
    assert plan.retained is not None
    (state / "retained").write_bytes(bucket.get(layout.retained_key(*plan.retained)))
    source = load_retained(state)
    save_retained(
        state,
        Retained(
            floor=source.floor,
            next_seq=plan.head + 1,
            resets=[(r, t) for r, t in source.resets if r <= plan.head],
            tags=[t for t in source.tags if t[0] <= plan.head],
        ),
    )

"""Garbage collection of WAL segments and snapshots, in three steps.

1. `plan_gc` (owner thread, cheap): which segments go, the new floor, and the
   entry points into the dropped history that kept seqs still depend on (the
   seq just below the new floor, and the target of every kept reset record
   that forks from below it).
2. `prepare_gc` (any thread, reads only): a snapshot at every entry point
   that lacks one, then the retained file (floor, the reset records below
   it, the seq watermark), then a trial reconstruct of the tip under the new
   floor. Nothing is deleted unless all of this succeeded; an entry state no
   snapshot can hold (UnencodableState) keeps every segment, and is logged.
3. `apply_gc` (owner thread): delete the segments, oldest first, and the
   snapshots outside both windows; forget their catalog entries.

A crash between any two operations leaves a state that opens: the retained
file is durable before the first segment is deleted, and a segment that
survived a crash is simply collected again next time.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reynd.core.reconstruct import plan_reconstruct
from reynd.core.reduce import apply
from reynd.core.retention import (
    Forced,
    Horizon,
    RetentionPolicy,
    SegmentInfo,
    floor_for_recovery,
    horizon_budget,
    kept_reason,
    plan_wal,
    snapshots_to_keep,
)
from reynd.storage import crashpoints
from reynd.storage.errors import UnencodableState
from reynd.storage.retained import Retained, save_retained
from reynd.storage.snapshots import encode_snapshot
from reynd.storage.store import Store

__all__ = [
    "GcPlan",
    "GcReport",
    "apply_gc",
    "collect",
    "plan_gc",
    "prepare_gc",
    "reclaimable_snapshots",
]

log = logging.getLogger(__name__)

# The ages of the WAL's segments, at least (reynd.core.retention.AgeClock.segment_ages).
AgesOf = Callable[[Sequence[SegmentInfo]], Sequence[float]]


@dataclass(slots=True)
class GcPlan:
    floor: int  # the new floor (first seq of the first kept segment)
    drop_segments: int
    drop_bytes: int
    entries: list[int]  # seqs below the floor that kept history depends on
    policy: RetentionPolicy
    now: float
    reason: str = ""  # why the floor stops there (the horizon keeping the oldest segment)
    written: list[tuple[int, int]] = field(default_factory=list)  # entry snapshots (seq, size)
    forced: Forced | None = None  # what the budget forced out of the default horizon


@dataclass(frozen=True, slots=True)
class GcReport:
    floor_before: int
    floor: int
    segments_dropped: int
    bytes_dropped: int
    snapshots_dropped: int
    snapshots_written: int
    duration_ms: float
    dropped: tuple[Path, ...] = ()
    reason: str = ""  # why no further segment went (GcPlan.reason)


def segment_infos(store: Store) -> list[SegmentInfo]:
    return [SegmentInfo(s.first_seq, s.last_seq, s.size, s.last_ts) for s in store.wal.segments]


def newest_active_snapshot(store: Store) -> int:
    for seq in reversed(store.snapshots.seqs):
        if seq <= store.head and store.lineage.is_active(seq):
            return seq
    return 0


def free_bytes(path: Path) -> int | None:
    """What the filesystem holding `path` has free for reynd (None: cannot tell)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def plan_gc(
    store: Store,
    policy: RetentionPolicy,
    now: float | None = None,
    *,
    keep_from: int | None = None,
    ages: AgesOf | None = None,
) -> GcPlan:
    """Step 1: what may go under `policy` (over the store's in-memory indexes, and statvfs).

    `keep_from`: a segment holding this seq or a later one stays, whatever
    the policy says (replication has not shipped it yet). `ages`: how old
    each segment is at least (the daemon's AgeClock); else `now` minus its time.
    The default horizon's budget is measured against the free space now.
    """
    now = time.time() if now is None else now
    segments = segment_infos(store)
    required = floor_for_recovery(store.state, newest_active_snapshot(store))
    seg_ages = ages(segments) if ages is not None else None
    horizon = Horizon(
        store.catalog.nth_newest(policy.horizon_checkpoints),
        horizon_budget(policy, free_bytes(store.root), sum(s.size for s in segments)),
    )
    wal = plan_wal(segments, store.head, required, policy, now, ages=seg_ages, horizon=horizon)
    drop, forced = wal.drop, wal.forced
    if keep_from is not None:
        drop = min(drop, sum(1 for s in segments if s.last_seq < keep_from))
        forced = _clipped(forced, segments, wal.drop, drop)
    # Segments a crashed collection left below the floor always go: the
    # floor never moves down (their entry points may already be gone).
    drop = max(drop, sum(1 for s in segments[:-1] if s.last_seq < store.floor))
    floor = segments[drop].first_seq if drop else store.floor
    # Computed whether or not segments go: the entry snapshots written by an
    # earlier collection stay pinned while kept history still forks from them.
    entries = {floor - 1}
    entries.update(t for r, t in store.lineage.resets if r >= floor and t < floor)
    entries.discard(0)  # genesis needs no snapshot
    reason = kept_reason(
        segments,
        store.head,
        required,
        policy,
        now,
        segment_bytes=store.wal.segment_bytes,
        keep_from=keep_from,
        ages=seg_ages,
        horizon=horizon,
    )
    return GcPlan(
        floor,
        drop,
        sum(s.size for s in segments[:drop]),
        sorted(entries),
        policy,
        now,
        reason,
        forced=forced,
    )


def _clipped(
    forced: Forced | None, segments: Sequence[SegmentInfo], planned: int, drop: int
) -> Forced | None:
    """`forced` as far as the first `drop` segments go (replication held the rest back).

    The forced segments are the newest `forced.segments` of the `planned` ones.
    """
    if forced is None or drop >= planned:
        return forced
    gone = segments[planned - forced.segments : drop]
    if not gone:
        return None
    return Forced(gone[-1].last_seq, sum(s.size for s in gone), len(gone), forced.budget)


def reclaimable_snapshots(store: Store, plan: GcPlan) -> list[int]:
    """The snapshots apply_gc would remove under `plan` (read only)."""
    keep = snapshots_to_keep(
        store.snapshots.seqs,
        floor=plan.floor,
        pinned=set(plan.entries),
        times=store.snapshots.times(),
        policy=plan.policy,
        now=plan.now,
    )
    return [s for s in store.snapshots.seqs if s not in keep]


def prepare_gc(store: Store, plan: GcPlan) -> None:
    """Step 2: make the dropped history unnecessary; read-only for the in-memory indexes."""
    if not plan.drop_segments:
        return
    for seq in plan.entries:
        if seq in store.snapshots.sizes:
            continue
        try:
            data = encode_snapshot(store.execute(store.plan(seq)))
        except UnencodableState as exc:
            log.error("gc keeps the WAL below seq %d: %s", plan.floor, exc)  # noqa: TRY400
            plan.floor, plan.drop_segments, plan.drop_bytes = store.floor, 0, 0
            plan.reason = f"no snapshot can hold the state as of seq {seq} ({exc}): the WAL is kept"
            return
        store.snapshots.write(data, seq)
        plan.written.append((seq, len(data)))
    crashpoints.hit("gc.after_entry_snapshots")
    # The trial: the tip rebuilds under the new floor from what will remain.
    # It runs before the retained file is written, because that file's floor
    # is the store's floor from then on, even if no segment is deleted yet.
    snapshots = sorted({*store.snapshots.seqs, *(s for s, _ in plan.written)})
    trial = plan_reconstruct(store.lineage, store.head, snapshots, plan.floor)
    state = store.snapshots.load(trial.snapshot) if trial.snapshot else None
    if state is not None:
        for lo, hi in trial.ranges:
            for event in store.wal.read(lo, hi):
                apply(state, event)
    resets = [(r, t) for r, t in store.lineage.resets if r < plan.floor]
    retained = Retained(
        floor=plan.floor,
        next_seq=store.head + 1,
        resets=resets,
        tags=store.tags.as_of(plan.floor),
    )
    save_retained(store.root / "state", retained)
    crashpoints.hit("gc.after_retained")


def apply_gc(store: Store, plan: GcPlan) -> GcReport:
    """Step 3: delete what `prepare_gc` made unnecessary (owner thread)."""
    started = time.perf_counter()
    floor_before = store.floor
    for seq, size in plan.written:
        store.snapshots.add(seq, size)
    floor = plan.floor if plan.drop_segments else store.floor
    dropped = store.wal.drop_oldest(plan.drop_segments) if plan.drop_segments else []
    store.retained = Retained(
        floor=floor,
        next_seq=store.head + 1,
        resets=[(r, t) for r, t in store.lineage.resets if r < floor],
        tags=store.tags.as_of(floor),
    )
    store.forget_below_floor()
    gone = reclaimable_snapshots(store, plan)  # plan.floor is store.floor by now
    for seq in gone:
        store.snapshots.remove(seq)
    return GcReport(
        floor_before,
        store.floor,
        len(dropped),
        plan.drop_bytes if dropped else 0,
        len(gone),
        len(plan.written),
        (time.perf_counter() - started) * 1e3,
        tuple(dropped),
        plan.reason,
    )


def collect(store: Store, policy: RetentionPolicy, now: float | None = None) -> GcReport:
    """All three steps in a row (tests, tools, a stopped daemon's state directory)."""
    started = time.perf_counter()
    plan = plan_gc(store, policy, now)
    prepare_gc(store, plan)
    report = apply_gc(store, plan)
    return GcReport(
        report.floor_before,
        report.floor,
        report.segments_dropped,
        report.bytes_dropped,
        report.snapshots_dropped,
        report.snapshots_written,
        (time.perf_counter() - started) * 1e3,
        report.dropped,
        report.reason,
    )

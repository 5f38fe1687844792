"""Retention arithmetic (pure): how far the WAL floor may rise, which snapshots stay.

Two windows, one policy:

- the fine window is the WAL: every seq from the floor to the tip can be
  read, rewound to and checked out, on any branch;
- the coarse window is the snapshots kept below the floor: the state as of
  exactly those seqs stays readable and reachable by checkout.

By default the WAL floor is what recovery needs: nothing above the newest
snapshot on the active lineage, and nothing a turn or skill run in flight
still replays from (min of every agent's applied-by-snapshot seq and every
active skill run's last-phase seq, plus one). Deeper horizons are opt-in, by
count, by age and by size. The WAL is dropped by whole segments, oldest
first, and the segment holding the tip is never dropped, so truncation costs
what it drops and a used seq is never issued again.

Ages are never taken from the wall clock alone (`AgeClock`): a clock stepped
forward would make seconds-old history look days old, and what GC drops is
gone for good. An age is at most the monotonic time since the daemon first
saw the record (at its start, or at a collection), so no step of the wall
clock while the daemon runs can make anything older than it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated

import msgspec

from reynd.protocol.state import RuntimeState

__all__ = [
    "MAX_SIGHTINGS",
    "AgeClock",
    "RetentionPolicy",
    "Sighting",
    "SegmentInfo",
    "floor_for_recovery",
    "kept_reason",
    "plan_wal_drop",
    "snapshots_to_keep",
]


class RetentionPolicy(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The `[retention]` table of reynd.toml (also `retention.set`)."""

    wal_keep_records: Annotated[int, msgspec.Meta(ge=0)] = 0
    wal_keep_age_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    wal_keep_bytes: Annotated[int, msgspec.Meta(ge=0)] = 0
    snapshot_keep: Annotated[int, msgspec.Meta(ge=0)] = 4
    snapshot_keep_age_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    gc_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 600.0


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    first_seq: int
    last_seq: int
    size: int
    last_ts: float


MAX_SIGHTINGS = 256


@dataclass(frozen=True, slots=True)
class Sighting:
    """The daemon knew the WAL reached `head` when its clocks read `wall` and `mono`."""

    head: int
    wall: float
    mono: float


@dataclass(frozen=True, slots=True)
class AgeClock:
    """Ages of records and snapshots that no step of the wall clock can inflate.

    `start` is read once as the daemon starts: what the WAL held then is aged
    by the wall clock of that moment plus the monotonic time since. A record
    appended later is at most as old as the monotonic time since the first
    `later` sighting at or above its seq (collections add them: `saw`); until
    one covers it, it counts as new. Every age is also at most the wall
    clock's own, so a clock stepped back keeps more, never less. Monotonic
    time stands still while the machine sleeps: history is then kept longer.
    """

    start: Sighting
    later: tuple[Sighting, ...] = ()

    def saw(self, head: int, wall: float, mono: float, floor: int) -> AgeClock:
        """This clock with the WAL seen up to `head` now; sightings below `floor` forgotten.

        At most MAX_SIGHTINGS are kept (a floor held still by a turn in flight must not
        grow them without end): every other one goes, and what it covered is aged from
        the next one, a later one, so ages only shrink.
        """
        kept = tuple(s for s in self.later if s.head >= floor)
        if head <= self.start.head or (kept and kept[-1].head >= head):
            return replace(self, later=kept)
        if len(kept) >= MAX_SIGHTINGS:
            kept = kept[1::2]
        return replace(self, later=(*kept, Sighting(head, wall, mono)))

    def now(self, wall: float, mono: float) -> float:
        """The time to age against: the wall clock, never ahead of the start's plus monotonic."""
        return min(wall, self.start.wall + max(0.0, mono - self.start.mono))

    def age(self, seq: int, ts: float, wall: float, mono: float) -> float:
        """How old the record `seq`, stamped `ts`, is at least (negative: from the future)."""
        age = self.now(wall, mono) - ts
        if seq <= self.start.head:
            return age
        for s in self.later:  # heads ascend
            if seq <= s.head:
                return min(age, mono - s.mono)
        return min(age, 0.0)  # appended since the last sighting: too new to judge

    def segment_ages(
        self, segments: Sequence[SegmentInfo], wall: float, mono: float
    ) -> list[float]:
        """`age` of each segment's last record, for `plan_wal_drop`."""
        return [self.age(s.last_seq, s.last_ts, wall, mono) for s in segments]


def floor_for_recovery(state: RuntimeState, newest_active_snapshot: int) -> int:
    """The lowest seq a restart (and the turns in flight) still needs from the WAL."""
    floor = newest_active_snapshot + 1
    for agent in state.agents.values():
        for chain in agent.pending_chains:
            floor = min(floor, chain.started_seq)  # act-turn rewinds land inside it
        for run in agent.skill_runs.values():
            floor = min(floor, run.phase_seq)
    return max(1, floor)


def plan_wal_drop(
    segments: Sequence[SegmentInfo],
    head: int,
    required: int,
    policy: RetentionPolicy,
    now: float,
    *,
    ages: Sequence[float] | None = None,
) -> int:
    """How many of the oldest segments may go (the new floor is the next one's first seq).

    A segment goes only when all of it lies below every horizon: what
    recovery requires, the kept record count, the kept age and the kept
    size. The segment holding the tip always stays. `ages`: how old each
    segment's last record is at least (`AgeClock.segment_ages`); without
    them, `now` minus its time.
    """
    return _plan(segments, head, required, policy, now, ages=ages)[0]


# Why the oldest kept segment stays (the first horizon it fails), for kept_reason.
_Why = tuple[str, SegmentInfo | None]


def _plan(
    segments: Sequence[SegmentInfo],
    head: int,
    required: int,
    policy: RetentionPolicy,
    now: float,
    *,
    ages: Sequence[float] | None,
) -> tuple[int, _Why]:
    """plan_wal_drop's count, and what stopped it at the first segment kept."""
    floor = required
    if policy.wal_keep_records:
        floor = min(floor, head - policy.wal_keep_records + 1)
    if ages is None:
        ages = [now - s.last_ts for s in segments]
    remaining = sum(s.size for s in segments)
    drop = 0
    for seg in segments[:-1]:
        # `segments[:-1]` alone does not protect the tip: after a crash right
        # after a rotation the last segment is empty and the tip is in the one
        # before it.
        if seg.last_seq >= head:
            return drop, ("tip", seg)
        if seg.last_seq >= floor:
            return drop, ("records" if floor < required else "recovery", seg)
        if policy.wal_keep_age_s and ages[drop] <= policy.wal_keep_age_s:
            return drop, ("age", seg)
        if policy.wal_keep_bytes and remaining - seg.size < policy.wal_keep_bytes:
            return drop, ("bytes", seg)
        remaining -= seg.size
        drop += 1
    return drop, ("tip", segments[-1] if segments else None)


def _mib(n: float) -> str:
    """A size in words: 1536 -> '1.5 KiB' (as reynctl shows sizes)."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def kept_reason(
    segments: Sequence[SegmentInfo],
    head: int,
    required: int,
    policy: RetentionPolicy,
    now: float,
    *,
    segment_bytes: int,
    keep_from: int | None = None,
    ages: Sequence[float] | None = None,
) -> str:
    """In words, why no (further) WAL segment can go now: the horizon that keeps the oldest.

    Pure, over the same inputs as plan_wal_drop (`keep_from`: the first seq
    replication has not shipped).
    """
    drop, (why, seg) = _plan(segments, head, required, policy, now, ages=ages)
    whole = "segments are removed whole, oldest first, once sealed and below the floor"
    if keep_from is not None and drop and segments[drop - 1].last_seq >= keep_from:
        return f"replication has not shipped seqs from {keep_from} on: {whole} and shipped"
    if seg is None:
        return "the WAL is empty"
    span = f"segment {seg.first_seq}..{seg.last_seq} ({_mib(seg.size)})"
    if why == "tip":
        size = sum(s.size for s in segments[drop:])
        count = len(segments) - drop
        held = "one segment" if count == 1 else f"{count} segments"
        return (
            f"the WAL left is {held} ({_mib(size)}; a segment is sealed at "
            f"{_mib(segment_bytes)}, [storage] segment_bytes) holding the tip: {whole}"
        )
    if why == "recovery":
        return (
            f"{span} holds seqs from {required} on, which a restart still replays (the newest "
            "snapshot on the active branch, or a turn or skill run in flight, is below them): "
            f"{whole}; a later snapshot moves the floor up"
        )
    if why == "records":
        return f"{span}: wal_keep_records = {policy.wal_keep_records} keeps it"
    if why == "age":
        age = max(0.0, ages[drop] if ages is not None else now - seg.last_ts)
        return (
            f"{span} was last written {age:.0f} s ago: wal_keep_age_s = "
            f"{policy.wal_keep_age_s:g} keeps it"
        )
    return f"{span}: wal_keep_bytes = {policy.wal_keep_bytes} keeps it"


def snapshots_to_keep(
    snapshots: Sequence[int],
    *,
    floor: int,
    pinned: set[int],
    times: dict[int, float],
    policy: RetentionPolicy,
    now: float,
) -> set[int]:
    """Snapshots that stay: all at or above floor - 1, the pinned ones, and the coarse window.

    `pinned` are the snapshots the kept WAL depends on (entry points into the
    dropped history). The coarse window keeps the newest `snapshot_keep`
    below the floor, and with an age horizon every one younger than it.
    """
    keep = {s for s in snapshots if s >= floor - 1} | (pinned & set(snapshots))
    below = sorted((s for s in snapshots if s < floor - 1), reverse=True)
    keep.update(below[: policy.snapshot_keep])
    if policy.snapshot_keep_age_s:
        cutoff = now - policy.snapshot_keep_age_s
        keep.update(s for s in below if times.get(s, 0.0) >= cutoff)
    return keep

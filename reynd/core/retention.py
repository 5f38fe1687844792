"""Retention arithmetic (pure): how far the WAL floor may rise, which snapshots stay.

Two windows, one policy:

- the fine window is the WAL: every seq from the floor to the tip can be
  read, rewound to and checked out, on any branch;
- the coarse window is the snapshots kept below the floor: the state as of
  exactly those seqs stays readable and reachable by checkout.

The WAL floor never rises past what recovery needs: nothing above the newest
snapshot on the active lineage, and nothing a turn or skill run in flight
still replays from (min of every agent's applied-by-snapshot seq and every
active skill run's last-phase seq, plus one). Out of the box the *default
horizon* also keeps every checkpoint of the last 7 days or the last 1,000
checkpoints, whichever keeps more, inside a disk budget (`horizon_budget`):
only the budget can force part of it out, and the plan says so (`Forced`).
The explicit horizons, by count, by age and by size, are never forced. A
policy that sets an explicit horizon but no horizon key (one written before
the default horizon existed) keeps its old meaning: no default horizon
(`legacy`). The WAL is dropped by whole segments, oldest first, and the
segment holding the tip is never dropped, so truncation costs what it drops
and a used seq is never issued again.

Ages are never taken from the wall clock alone (`AgeClock`): a clock stepped
forward would make seconds-old history look days old, and what GC drops is
gone for good. An age is at most the monotonic time since the daemon first
saw the record (at its start, or at a collection), so no step of the wall
clock while the daemon runs can make anything older than it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated

import msgspec

from reynd.protocol.state import RuntimeState

__all__ = [
    "HORIZON_KEYS",
    "KEEP_KEYS",
    "MAX_SIGHTINGS",
    "AgeClock",
    "Forced",
    "Horizon",
    "WalPlan",
    "horizon_budget",
    "legacy",
    "plan_wal",
    "without_horizon",
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
    # The default horizon: kept unless the budget forces it out (0: that part off).
    horizon_checkpoints: Annotated[int, msgspec.Meta(ge=0)] = 1000
    horizon_age_s: Annotated[float, msgspec.Meta(ge=0)] = 7 * 86400.0
    # The budget: the WAL stays within the smaller of these two (0: that limit off).
    budget_bytes: Annotated[int, msgspec.Meta(ge=0)] = 10 << 30
    budget_free_pct: Annotated[float, msgspec.Meta(ge=0, le=100)] = 50.0


# The explicit keep keys a policy had before the default horizon, and the horizon's own.
KEEP_KEYS = frozenset(
    {"wal_keep_records", "wal_keep_age_s", "wal_keep_bytes", "snapshot_keep", "snapshot_keep_age_s"}
)
HORIZON_KEYS = frozenset({"horizon_checkpoints", "horizon_age_s"})


def legacy(keys: Iterable[str]) -> bool:
    """Whether a policy setting these keys predates the default horizon (and so has none).

    An operator who chose what to keep, before the horizon existed, meant
    exactly that; setting only `gc_interval_s` or the budget chose nothing.
    """
    chosen = set(keys)
    return bool(chosen & KEEP_KEYS) and not chosen & HORIZON_KEYS


def without_horizon(policy: RetentionPolicy) -> RetentionPolicy:
    """`policy` with the default horizon off: what it meant before the horizon existed."""
    return msgspec.structs.replace(policy, horizon_checkpoints=0, horizon_age_s=0.0)


def horizon_budget(policy: RetentionPolicy, free_bytes: int | None, wal_bytes: int) -> int | None:
    """The bytes of WAL the default horizon may keep (None: no limit).

    The smaller of `budget_bytes` and `budget_free_pct` of the space the WAL
    could have: what the filesystem has free now plus what the WAL holds (so
    the budget does not shrink because the WAL grew into it, and never takes
    more than that share from everything else on the disk).
    """
    limits = []
    if policy.budget_bytes:
        limits.append(policy.budget_bytes)
    if policy.budget_free_pct and free_bytes is not None:
        limits.append(int((free_bytes + wal_bytes) * policy.budget_free_pct / 100))
    return min(limits) if limits else None


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


@dataclass(frozen=True, slots=True)
class Forced:
    """Segments the budget forced out of the default horizon: through `through_seq`, `bytes`."""

    through_seq: int
    bytes: int
    segments: int
    budget: int


@dataclass(frozen=True, slots=True)
class Horizon:
    """Where the default horizon stands now (plan_wal).

    `checkpoint_floor`: the oldest of the `horizon_checkpoints` newest
    checkpoints (None: none); `budget`: `horizon_budget` (None: no limit).
    """

    checkpoint_floor: int | None = None
    budget: int | None = None


@dataclass(frozen=True, slots=True)
class WalPlan:
    """How many of the oldest segments go; why the next stays; what the budget forced out."""

    drop: int
    why: str  # the first horizon the oldest kept segment fails (kept_reason words it)
    kept: SegmentInfo | None
    forced: Forced | None = None


def plan_wal_drop(
    segments: Sequence[SegmentInfo],
    head: int,
    required: int,
    policy: RetentionPolicy,
    now: float,
    *,
    ages: Sequence[float] | None = None,
    horizon: Horizon | None = None,
) -> int:
    """How many of the oldest segments may go (the new floor is the next one's first seq).

    See `plan_wal`; this is its count.
    """
    return plan_wal(segments, head, required, policy, now, ages=ages, horizon=horizon).drop


def plan_wal(
    segments: Sequence[SegmentInfo],
    head: int,
    required: int,
    policy: RetentionPolicy,
    now: float,
    *,
    ages: Sequence[float] | None = None,
    horizon: Horizon | None = None,
) -> WalPlan:
    """Which of the oldest segments go, and why the first kept one stays.

    A segment goes only when all of it lies below every horizon: what
    recovery requires, the kept record count, the kept age and the kept
    size, and the default horizon (the checkpoints from
    `horizon.checkpoint_floor` on, and the last `horizon_age_s`) unless the
    WAL from it on is over `horizon.budget` bytes: then it goes, and
    `forced` says so. The segment
    holding the tip always stays. `ages`: how old each segment's last record
    is at least (`AgeClock.segment_ages`); without them, `now` minus its time.
    """
    checkpoint_floor, budget = (
        (horizon.checkpoint_floor, horizon.budget) if horizon else (None, None)
    )
    floor = required
    if policy.wal_keep_records:
        floor = min(floor, head - policy.wal_keep_records + 1)
    if ages is None:
        ages = [now - s.last_ts for s in segments]
    remaining = sum(s.size for s in segments)
    drop, forced = 0, None
    for seg in segments[:-1]:
        # `segments[:-1]` alone does not protect the tip: after a crash right
        # after a rotation the last segment is empty and the tip is in the one
        # before it.
        why = _kept_by(
            seg,
            age=ages[drop],
            head=head,
            floor=floor,
            required=required,
            remaining=remaining,
            policy=policy,
        )
        if why is None and _in_horizon(seg, ages[drop], policy, checkpoint_floor):
            if budget is None or remaining <= budget:
                why = "horizon"
            else:
                forced = _force(forced, seg, budget)
        if why is not None:
            return WalPlan(drop, why, seg, forced)
        remaining -= seg.size
        drop += 1
    return WalPlan(drop, "tip", segments[-1] if segments else None, forced)


def _kept_by(
    seg: SegmentInfo,
    *,
    age: float,
    head: int,
    floor: int,
    required: int,
    remaining: int,
    policy: RetentionPolicy,
) -> str | None:
    """The horizon no budget can force that keeps `seg` (None: none does)."""
    if seg.last_seq >= head:
        return "tip"
    if seg.last_seq >= floor:
        return "records" if floor < required else "recovery"
    if policy.wal_keep_age_s and age <= policy.wal_keep_age_s:
        return "age"
    if policy.wal_keep_bytes and remaining - seg.size < policy.wal_keep_bytes:
        return "bytes"
    return None


def _in_horizon(
    seg: SegmentInfo, age: float, policy: RetentionPolicy, checkpoint_floor: int | None
) -> bool:
    """Whether `seg` holds a checkpoint of the default horizon (or may: by age)."""
    if policy.horizon_age_s and age <= policy.horizon_age_s:
        return True
    counted = policy.horizon_checkpoints and checkpoint_floor is not None
    return bool(counted) and seg.last_seq >= (checkpoint_floor or 0)


def _force(forced: Forced | None, seg: SegmentInfo, budget: int) -> Forced:
    if forced is None:
        return Forced(seg.last_seq, seg.size, 1, budget)
    return Forced(seg.last_seq, forced.bytes + seg.size, forced.segments + 1, budget)


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
    horizon: Horizon | None = None,
) -> str:
    """In words, why no (further) WAL segment can go now: the horizon that keeps the oldest.

    Pure, over the same inputs as plan_wal (`keep_from`: the first seq
    replication has not shipped).
    """
    plan = plan_wal(segments, head, required, policy, now, ages=ages, horizon=horizon)
    drop, why, seg = plan.drop, plan.why, plan.kept
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
    if why == "horizon":
        budget = horizon.budget if horizon else None
        limit = "no budget" if budget is None else f"within the budget of {_mib(budget)}"
        return (
            f"{span} is inside the default horizon (horizon_checkpoints = "
            f"{policy.horizon_checkpoints}, horizon_age_s = {policy.horizon_age_s:g}; {limit})"
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

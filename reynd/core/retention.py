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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import msgspec

from reynd.protocol.state import RuntimeState

__all__ = [
    "RetentionPolicy",
    "SegmentInfo",
    "floor_for_recovery",
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
    segments: Sequence[SegmentInfo], head: int, required: int, policy: RetentionPolicy, now: float
) -> int:
    """How many of the oldest segments may go (the new floor is the next one's first seq).

    A segment goes only when all of it lies below every horizon: what
    recovery requires, the kept record count, the kept age and the kept
    size. The segment holding the tip always stays.
    """
    floor = required
    if policy.wal_keep_records:
        floor = min(floor, head - policy.wal_keep_records + 1)
    cutoff = now - policy.wal_keep_age_s if policy.wal_keep_age_s else None
    remaining = sum(s.size for s in segments)
    drop = 0
    for seg in segments[:-1]:
        # `segments[:-1]` alone does not protect the tip: after a crash right
        # after a rotation the last segment is empty and the tip is in the one
        # before it.
        if seg.last_seq >= floor or seg.last_seq >= head:
            break
        if cutoff is not None and seg.last_ts >= cutoff:
            break
        if policy.wal_keep_bytes and remaining - seg.size < policy.wal_keep_bytes:
            break
        remaining -= seg.size
        drop += 1
    return drop


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

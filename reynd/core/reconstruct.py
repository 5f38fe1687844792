"""Reconstruct(N) as a pure plan: which snapshot to load, which seqs to replay.

state_as_of(N) = the nearest snapshot on lineage(N) at or below N, then the
records of lineage(N) above it, up to N. The plan walks lineage(N) one
interval at a time (one per reset record on the path) and stops at the first
snapshot it meets, so its cost is bounded by the distance to that snapshot,
not by the length of history.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from reynd.core.lineage import Lineage
from reynd.protocol import errors

__all__ = ["ReplayPlan", "plan_from_kept", "plan_reconstruct"]


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """Load `snapshot` (0 = genesis, the empty state), then replay `ranges` in order."""

    target: int
    snapshot: int
    ranges: tuple[tuple[int, int], ...]  # ascending, inclusive

    @property
    def replay_count(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)


def plan_reconstruct(
    lineage: Lineage, target: int, snapshots: Sequence[int], floor: int = 1
) -> ReplayPlan:
    """Plan state_as_of(`target`) from sorted snapshot seqs.

    `floor` is the lowest seq still in the WAL: a plan that would replay a
    record below it is impossible and raises BelowFloor.
    """
    if not 0 <= target <= lineage.head:
        raise errors.SeqOutOfRange(
            f"seq {target} is outside 0..{lineage.head} (the tip)",
            {"seq": target, "head": lineage.head},
        )
    ranges: list[tuple[int, int]] = []
    snapshot = 0
    for lo, hi in lineage.iter_intervals(target):
        i = bisect_right(snapshots, hi) - 1
        if i >= 0 and snapshots[i] >= lo:
            snapshot = snapshots[i]
            if snapshot < hi:
                ranges.append((snapshot + 1, hi))
            break
        ranges.append((lo, hi))
    ranges.reverse()
    if ranges and ranges[0][0] < floor:
        raise errors.BelowFloor(
            f"seq {target} cannot be rebuilt: its history below seq {floor} was collected "
            f"by retention (the floor is {floor})",
            {"seq": target, "floor": floor},
        )
    return ReplayPlan(target, snapshot, tuple(ranges))


def plan_from_kept(lineage: Lineage, plan: ReplayPlan, kept: Sequence[int]) -> ReplayPlan | None:
    """A plan for `plan.target` that starts from a state kept in memory, when one is nearer.

    `kept`: sorted seqs whose states are at hand. The plan returned starts from the
    highest of them on lineage(target) at or below it (its `snapshot` names that
    seq), when it lies above `plan`'s snapshot: both are on lineage(target), so the
    higher is the nearer. None when no kept state helps. `plan` is planned first
    (it raises what a reconstruct raises: a target out of range, below the floor),
    so a kept state never answers a read the log itself would refuse.
    """
    nearer = plan_reconstruct(lineage, plan.target, kept, floor=0)
    if nearer.snapshot <= plan.snapshot:
        return None
    return nearer

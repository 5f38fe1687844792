"""Lineage of the global log: which seqs are active, and on which branch.

Pure code, no I/O. Every operation appends, so the tip is always the highest
seq. A reset record R with target N makes parent(R) = N; every other record s
has parent(s) = s - 1. lineage(s) is s, parent(s), ... down to 0 (genesis).
A seq is active when it lies on lineage(tip).

Only reset records shape a lineage, so the lineage of any seq is a handful of
contiguous intervals, one per reset record on its path. The active lineage is
kept as sorted intervals, which makes `is_active` a bisect.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Abandoned", "Branch", "Interval", "Lineage"]

Interval = tuple[int, int]  # inclusive (lo, hi), lo >= 1


@dataclass(frozen=True, slots=True)
class Branch:
    """A node of the branch tree.

    Branch 0 is the root. Branch R (a reset record's seq) starts at R, forks
    from `origin_seq` (the reset's target) on branch `parent`, and holds the
    seqs R..tip. `active` is True for the checked-out branch, the one that
    holds the tip.
    """

    id: int
    origin_seq: int
    parent: int | None
    tip: int
    active: bool


@dataclass(frozen=True, slots=True)
class Abandoned:
    """The open interval (target, reset) of the lineage that `reset` replaced.

    `seqs` are the intervals of that lineage which lie above `target`, the
    entries the reset left behind (the seeds' dead-branch with id = reset).
    """

    reset: int
    target: int
    seqs: tuple[Interval, ...]


class Lineage:
    """The lineage of a log whose seqs run 1..head, given its reset records."""

    __slots__ = ("_active_hi", "_active_lo", "_reset_seqs", "_targets", "head")

    def __init__(self) -> None:
        self.head = 0
        self._reset_seqs: list[int] = []
        self._targets: list[int] = []
        # Active lineage as ascending, disjoint intervals (genesis 0 implied).
        self._active_lo: list[int] = []
        self._active_hi: list[int] = []

    # -- building ---------------------------------------------------------

    def observe(self, seq: int, target: int | None = None) -> None:
        """Record that `seq` was appended; `target` is set when it is a reset record."""
        if seq != self.head + 1:
            raise ValueError(f"seq {seq} does not follow head {self.head}")
        if target is None:
            self.observe_plain_through(seq)
            return
        if not 0 <= target < seq:
            raise ValueError(f"reset {seq} targets {target}, which does not precede it")
        if self.is_active(target):
            self._truncate_active(target)
        else:
            intervals = self.intervals(target)
            self._active_lo = [lo for lo, _ in reversed(intervals)]
            self._active_hi = [hi for _, hi in reversed(intervals)]
        self._reset_seqs.append(seq)
        self._targets.append(target)
        self.head = seq
        self._active_lo.append(seq)
        self._active_hi.append(seq)

    def observe_plain_through(self, seq: int) -> None:
        """Record plain (non-reset) records head+1..seq at once, in O(1)."""
        if seq <= self.head:
            return
        if self._active_hi and self._active_hi[-1] == self.head:
            self._active_hi[-1] = seq
        else:
            self._active_lo.append(self.head + 1)
            self._active_hi.append(seq)
        self.head = seq

    @classmethod
    def restore(cls, resets: list[tuple[int, int]], head: int) -> Lineage:
        """The lineage of a log 1..head whose only reset records are `resets`.

        Retention drops old WAL records but keeps their reset records (they
        shape the lineage of what is kept); this rebuilds the lineage from
        them in O(number of resets).
        """
        lineage = cls()
        for seq, target in sorted(resets):
            lineage.observe_plain_through(seq - 1)
            lineage.observe(seq, target)
        lineage.observe_plain_through(head)
        return lineage

    def _truncate_active(self, n: int) -> None:
        i = bisect_right(self._active_lo, n)  # intervals[i:] start above n
        del self._active_lo[i:]
        del self._active_hi[i:]
        if self._active_hi and self._active_hi[-1] > n:
            self._active_hi[-1] = n

    # -- queries ----------------------------------------------------------

    @property
    def resets(self) -> list[tuple[int, int]]:
        """All reset records as (seq, target), ascending."""
        return list(zip(self._reset_seqs, self._targets, strict=True))

    def resets_between(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The reset records with lo <= seq <= hi, as (seq, target), ascending."""
        a = bisect_left(self._reset_seqs, lo)
        b = bisect_right(self._reset_seqs, hi)
        return list(zip(self._reset_seqs[a:b], self._targets[a:b], strict=True))

    def newest_resets(self, below: int | None, limit: int) -> list[tuple[int, int]]:
        """Up to `limit` reset records with seq < `below` (None: all), newest first."""
        b = len(self._reset_seqs) if below is None else bisect_left(self._reset_seqs, below)
        a = max(0, b - limit)
        return list(zip(self._reset_seqs[a:b], self._targets[a:b], strict=True))[::-1]

    def is_reset(self, seq: int) -> bool:
        i = bisect_right(self._reset_seqs, seq) - 1
        return i >= 0 and self._reset_seqs[i] == seq

    def target_of(self, reset: int) -> int:
        """The target of reset record `reset` (KeyError when it is not one)."""
        i = bisect_right(self._reset_seqs, reset) - 1
        if i < 0 or self._reset_seqs[i] != reset:
            raise KeyError(reset)
        return self._targets[i]

    def parent(self, seq: int) -> int:
        """parent(s): the reset's target for a reset record, else s - 1."""
        self._check(seq)
        if seq == 0:
            raise ValueError("genesis has no parent")
        i = bisect_right(self._reset_seqs, seq) - 1
        if i >= 0 and self._reset_seqs[i] == seq:
            return self._targets[i]
        return seq - 1

    def is_active(self, seq: int) -> bool:
        """True when `seq` lies on lineage(head). Genesis is always active."""
        if seq == 0:
            return True
        if not 0 < seq <= self.head:
            return False
        i = bisect_right(self._active_lo, seq) - 1
        return i >= 0 and seq <= self._active_hi[i]

    def branch_of(self, seq: int) -> int:
        """The nearest reset record at or below `seq` on its lineage (0 = root)."""
        self._check(seq)
        # Every record between a reset and `seq` is plain, so that reset is on
        # lineage(seq): the nearest reset by number is the nearest by lineage.
        i = bisect_right(self._reset_seqs, seq) - 1
        return self._reset_seqs[i] if i >= 0 else 0

    def iter_intervals(self, seq: int) -> Iterator[Interval]:
        """lineage(seq) minus genesis, as intervals from the top down."""
        self._check(seq)
        cur = seq
        while cur > 0:
            i = bisect_right(self._reset_seqs, cur) - 1
            if i < 0:
                yield (1, cur)
                return
            yield (self._reset_seqs[i], cur)
            cur = self._targets[i]

    def intervals(self, seq: int) -> list[Interval]:
        """lineage(seq) minus genesis, as intervals from the top down."""
        return list(self.iter_intervals(seq))

    def active_intervals(self) -> list[Interval]:
        """The active lineage, ascending."""
        return list(zip(self._active_lo, self._active_hi, strict=True))

    def active_below(self, seq: int) -> Iterator[Interval]:
        """The active lineage at or below `seq`, as intervals from the top down: one
        bisect to the interval that holds `seq` (or the next below it), then a walk."""
        i = bisect_right(self._active_lo, seq) - 1
        while i >= 0:
            yield self._active_lo[i], min(self._active_hi[i], seq)
            i -= 1

    def on_lineage(self, seq: int, of: int) -> bool:
        """True when `seq` lies on lineage(`of`)."""
        if seq == 0:
            return True
        if seq > of:
            return False
        for lo, hi in self.iter_intervals(of):
            if hi < seq:
                return False
            if lo <= seq:
                return True
        return False

    def common(self, a: int, b: int) -> int:
        """The highest seq on both lineage(a) and lineage(b) (their nearest common ancestor)."""
        if self.on_lineage(b, a):
            return b
        if self.on_lineage(a, b):
            return a
        # Both lineages are disjoint intervals from the top down: walk them side by side
        # (one step per interval; comparing every pair took seconds at 10^3 rewinds).
        ours, theirs = self.intervals(a), self.intervals(b)
        i = j = 0
        while i < len(ours) and j < len(theirs):
            (lo, hi), (lo2, hi2) = ours[i], theirs[j]
            if lo > hi2:  # ours[i] lies wholly above theirs[j]
                i += 1
            elif lo2 > hi:
                j += 1
            else:  # the first overlap met is the highest
                return min(hi, hi2)
        return 0

    def branches(self) -> list[Branch]:
        """The branch tree, root first, in the order the branches were made."""
        current = self.branch_of(self.head)
        ids = [0, *self._reset_seqs]
        out = []
        for k, bid in enumerate(ids):
            tip = ids[k + 1] - 1 if k + 1 < len(ids) else self.head
            if bid == 0:
                out.append(Branch(0, 0, None, tip, current == 0))
            else:
                origin = self._targets[k - 1]
                out.append(Branch(bid, origin, self.branch_of(origin), tip, current == bid))
        return out

    def abandoned(self, reset: int) -> Abandoned:
        """What reset record `reset` abandoned: lineage(reset - 1) above its target."""
        target = self.target_of(reset)
        seqs: list[Interval] = []
        for lo, hi in self.iter_intervals(reset - 1):
            if hi <= target:
                break
            seqs.append((max(lo, target + 1), hi))
        return Abandoned(reset, target, tuple(seqs))

    def leaving(self, target: int) -> list[Interval]:
        """What a move of the tip to `target` abandons: lineage(head) above
        common(head, target), as ascending intervals (empty when `target` is
        the head; all of lineage(head) above `target` for an active one)."""
        floor = self.common(self.head, target)
        return [
            (max(lo, floor + 1), hi)
            for lo, hi in zip(self._active_lo, self._active_hi, strict=True)
            if hi > floor
        ]

    def arriving(self, target: int) -> list[Interval]:
        """What a move of the tip to `target` lands on: lineage(target) above
        common(head, target), as ascending intervals (empty for an active `target`)."""
        floor = self.common(self.head, target)
        return [(max(lo, floor + 1), hi) for lo, hi in self.intervals(target) if hi > floor][::-1]

    def _check(self, seq: int) -> None:
        if not 0 <= seq <= self.head:
            raise ValueError(f"seq {seq} is outside 0..{self.head}")

"""The time index: where the tip stood, and which checkpoint was newest, at a wall-clock time.

Pure code, no I/O. Its positions are the records that fix where the tip
stands: every checkpoint (generation) and every reset record, in seq order,
on every branch. Each carries an *effective time*, the running maximum of the
positions' `ts`: a checkpoint's or reset's time is never taken to be before
an earlier one's. A wall clock stepped backwards (NTP, a VM resumed) thus makes a
run of records share the time of the newest one before the step, instead of
making the sequence go back and forth; the sequence stays monotone, and
every lookup is a bisect. With a clock that never steps back, effective time
and `ts` are the same.

Between two positions the tip only gains plain records (mid-turn work) on the
same branch, so the newest position at or before T says where the tip was at
T: a checkpoint's own seq, or a reset record's target (its state is the
target's). Genesis, seq 0, stands before every position while nothing has
been collected.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, chain

__all__ = ["Timeline"]

Interval = tuple[int, int]  # inclusive (lo, hi), as Lineage yields them


class Timeline:
    """Positions (checkpoints and reset records) by effective time; append in seq order."""

    __slots__ = ("_genesis", "_latest", "_seqs", "_start", "_targets", "_times")

    def __init__(self) -> None:
        self._seqs: array[int] = array("Q")  # ascending
        self._times: array[float] = array("d")  # effective times, non-decreasing
        self._targets: dict[int, int] = {}  # reset record -> its target
        self._start = 0  # positions before this index were collected
        self._latest = float("-inf")  # the running maximum of every ts seen
        self._genesis = True  # seq 0 reachable as "before everything"

    def __len__(self) -> int:
        return len(self._seqs) - self._start

    # -- building -----------------------------------------------------------

    def add(self, seq: int, ts: float, target: int | None = None) -> None:
        """A checkpoint at `seq` (or, with `target`, a reset record), appended at `ts`."""
        if self._seqs and seq <= self._seqs[-1]:
            raise ValueError(f"position {seq} is not above {self._seqs[-1]}")
        self._latest = max(self._latest, ts)
        self._seqs.append(seq)
        self._times.append(self._latest)
        if target is not None:
            self._targets[seq] = target

    @classmethod
    def build(
        cls,
        gen_seqs: Sequence[int],
        gen_times: Sequence[float],
        resets: Iterable[tuple[int, int, float]],
    ) -> Timeline:
        """The index of generations (ascending seqs, their ts) and reset records
        (seq, target, ts), as a process start has them. The running maximum is
        taken in C (`accumulate`) over the generations between two resets, so a
        million checkpoints build in a fraction of a second."""
        timeline = cls()
        seqs, times = timeline._seqs, timeline._times
        done = 0
        for seq, target, ts in sorted(resets):
            upto = bisect_left(gen_seqs, seq, done)
            timeline._extend(gen_seqs[done:upto], gen_times[done:upto])
            done = upto
            timeline.add(seq, ts, target)
        timeline._extend(gen_seqs[done:], gen_times[done:])
        assert len(seqs) == len(times)
        return timeline

    def _extend(self, seqs: Sequence[int], times: Sequence[float]) -> None:
        if not seqs:
            return
        if self._seqs and seqs[0] <= self._seqs[-1]:
            raise ValueError(f"position {seqs[0]} is not above {self._seqs[-1]}")
        running = array("d", accumulate(chain((self._latest,), times), max))
        self._seqs.extend(seqs)
        self._times.extend(running[1:])
        self._latest = running[-1]

    def drop_below(self, seq: int) -> None:
        """Forget positions below `seq` (collected by retention); genesis too when
        records were (seq > 1: a log's first record is seq 1)."""
        if seq > 1:
            self._genesis = False
        self._start = max(self._start, bisect_left(self._seqs, seq, self._start))

    # -- queries --------------------------------------------------------------

    def oldest(self) -> tuple[int, float] | None:
        """The oldest kept position and its effective time, or None."""
        if self._start >= len(self._seqs):
            return None
        return self._seqs[self._start], self._times[self._start]

    def newest_at(self, t: float) -> int:
        """Index of the newest position whose effective time is at or before `t`
        (below the first kept index when there is none)."""
        return bisect_right(self._times, t, self._start) - 1

    def tip_at(self, t: float) -> int | None:
        """The seq whose state the tip had at time `t`: the newest checkpoint at or
        before `t`, or the target of a later reset record; 0 (genesis) when `t`
        precedes every position and nothing was collected; None when `t`
        precedes every kept position."""
        i = self.newest_at(t)
        if i < self._start:
            return 0 if self._genesis else None
        seq = self._seqs[i]
        return self._targets.get(seq, seq)

    def checkpoint_at(
        self, t: float, lineage_below: Callable[[int], Iterable[Interval]]
    ) -> int | None:
        """The newest checkpoint at or before `t` on a lineage; `lineage_below(s)`
        gives that lineage at or below seq s, as intervals from the top down
        (Lineage.active_below for the active one).

        Only a reset record can start an interval, so each interval costs one
        bisect, and the walk goes past an interval only when it holds no
        checkpoint at or before `t`: O(log n) for any history's length.
        Genesis and None as for `tip_at`.
        """
        i = self.newest_at(t)
        if i >= self._start:
            for lo, hi in lineage_below(self._seqs[i]):
                j = bisect_right(self._seqs, hi, self._start) - 1
                if j >= self._start and self._seqs[j] in self._targets:
                    j -= 1  # the interval's own reset record (lo): what lies below it
                if j >= self._start and self._seqs[j] >= lo:
                    return self._seqs[j]
        return 0 if self._genesis else None

    def seq_bounds(self, after: float | None, before: float | None) -> tuple[int, int | None]:
        """(at_least, below): the seqs of positions with after < time < before, as seq
        bounds for a page of generations (`below` None: no upper bound)."""
        at_least = 0
        below: int | None = None
        if after is not None:
            i = bisect_right(self._times, after, self._start)
            at_least = self._seqs[i] if i < len(self._seqs) else self._seqs_end()
        if before is not None:
            i = bisect_left(self._times, before, self._start)
            below = self._seqs[i] if i < len(self._seqs) else None
        return at_least, below

    def _seqs_end(self) -> int:
        return self._seqs[-1] + 1 if self._seqs else 1

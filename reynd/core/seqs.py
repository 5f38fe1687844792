"""A sorted list of seqs that grows at the top and is cut at the bottom (pure).

The store keeps one for the records of one kind that a reader needs to find
without reading the log (workspace file records): an append is O(1), a range
query two bisects, and `drop_below` forgets what retention collected.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

__all__ = ["SeqList"]


class SeqList:
    def __init__(self) -> None:
        self._seqs: array[int] = array("Q")
        self._start = 0  # entries before this index were dropped

    def __len__(self) -> int:
        return len(self._seqs) - self._start

    def add(self, seq: int) -> None:
        """Record `seq`; seqs must arrive in ascending order."""
        if self._seqs and seq <= self._seqs[-1]:
            raise ValueError(f"seq {seq} is not above {self._seqs[-1]}")
        self._seqs.append(seq)

    def extend(self, seqs: array[int]) -> None:
        """Record `seqs`, ascending and all above the last one (a segment index's run)."""
        if seqs and self._seqs and seqs[0] <= self._seqs[-1]:
            raise ValueError(f"seq {seqs[0]} is not above {self._seqs[-1]}")
        self._seqs.extend(seqs)

    def between(self, lo: int, hi: int) -> list[int]:
        """The seqs in lo..hi, ascending."""
        a = bisect_left(self._seqs, lo, self._start)
        b = bisect_right(self._seqs, hi, a)
        return list(self._seqs[a:b])

    def drop_below(self, seq: int) -> None:
        """Forget seqs below `seq` (their records are gone)."""
        self._start = max(self._start, bisect_left(self._seqs, seq, self._start))

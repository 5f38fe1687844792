"""The generation catalog: every user-facing checkpoint, in seq order.

Pure and compact (parallel arrays, interned agent names): a daemon with a
million generations keeps them in tens of megabytes, and a page is a bisect
plus a walk of at most the page's length over entries that pass the filter.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from reynd.core.labels import Labels, Packed
from reynd.protocol.events import GenerationKind

__all__ = ["KINDS", "Catalog", "Columns", "Entry"]

KINDS: Final[tuple[GenerationKind, ...]] = ("turn", "plan_step", "phase")
_KIND_CODE: Final = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    kind: GenerationKind
    agent: str
    created_at: float
    label: str


@dataclass(frozen=True, slots=True)
class Columns:
    """A run of consecutive catalog entries, column by column (for the segment index).

    `agents` index `names`, which is local to the run.
    """

    seqs: array[int]  # "Q", ascending
    kinds: array[int]  # "B": index into KINDS
    agents: array[int]  # "I": index into names
    times: array[float]  # "d"
    names: tuple[str, ...]
    labels: Packed


class Catalog:
    """Append-only in seq order; `drop_below` forgets entries collected by retention."""

    def __init__(self) -> None:
        self._seqs: array[int] = array("Q")
        self._kinds: array[int] = array("B")
        self._agents: array[int] = array("I")
        self._times: array[float] = array("d")
        self._labels = Labels()
        self._names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self._start = 0  # entries before this index were dropped

    def __len__(self) -> int:
        return len(self._seqs) - self._start

    def nth_newest(self, n: int) -> int | None:
        """The seq of the n-th newest generation kept (the oldest if fewer; None: none). O(1)."""
        if n < 1 or len(self) == 0:
            return None
        return self._seqs[max(self._start, len(self._seqs) - n)]

    def add(
        self, seq: int, kind: GenerationKind, agent: str, created_at: float, label: str
    ) -> None:
        """Record a generation; seqs must arrive in ascending order."""
        if self._seqs and seq <= self._seqs[-1]:
            raise ValueError(f"generation {seq} is not above {self._seqs[-1]}")
        agent_id = self._intern(agent)
        self._seqs.append(seq)
        self._kinds.append(_KIND_CODE[kind])
        self._agents.append(agent_id)
        self._times.append(created_at)
        self._labels.append(label)

    def extend(self, cols: Columns) -> None:
        """Add a run of entries at once; the caller checked them (ascending, known kinds)."""
        if not cols.seqs:
            return
        if self._seqs and cols.seqs[0] <= self._seqs[-1]:
            raise ValueError(f"generation {cols.seqs[0]} is not above {self._seqs[-1]}")
        ids = [self._intern(name) for name in cols.names]
        if ids == list(range(len(ids))):
            self._agents.extend(cols.agents)
        else:
            self._agents.extend(array("I", map(ids.__getitem__, cols.agents)))
        self._seqs.extend(cols.seqs)
        self._kinds.extend(cols.kinds)
        self._times.extend(cols.times)
        self._labels.extend_packed(cols.labels)

    def columns(self, lo: int, hi: int) -> Columns:
        """The entries with lo <= seq <= hi, dropped ones included (what a scan would add)."""
        a = bisect_left(self._seqs, lo)
        b = bisect_right(self._seqs, hi)
        agents = self._agents[a:b]
        used = sorted(set(agents))
        local = {g: i for i, g in enumerate(used)}
        return Columns(
            self._seqs[a:b],
            self._kinds[a:b],
            array("I", map(local.__getitem__, agents)),
            self._times[a:b],
            tuple(self._names[g] for g in used),
            self._labels.packed(a, b),
        )

    def _intern(self, agent: str) -> int:
        agent_id = self._name_ids.get(agent)
        if agent_id is None:
            agent_id = self._name_ids[agent] = len(self._names)
            self._names.append(agent)
        return agent_id

    def knows_agent(self, agent: str) -> bool:
        return agent in self._name_ids

    def entry(self, i: int) -> Entry:
        return Entry(
            self._seqs[i],
            KINDS[self._kinds[i]],
            self._names[self._agents[i]],
            self._times[i],
            self._labels[i],
        )

    def newest_first(
        self,
        *,
        below: int | None = None,
        at_least: int = 0,
        agent: str | None = None,
        kind: GenerationKind | None = None,
    ) -> Iterator[Entry]:
        """Entries with at_least <= seq < below (no upper bound when None), newest first."""
        end = len(self._seqs) if below is None else bisect_left(self._seqs, below, self._start)
        start = bisect_left(self._seqs, at_least, self._start, end)
        agent_id = self._name_ids.get(agent, -1) if agent is not None else None
        kind_code = _KIND_CODE[kind] if kind is not None else None
        for i in range(end - 1, start - 1, -1):
            if agent_id is not None and self._agents[i] != agent_id:
                continue
            if kind_code is not None and self._kinds[i] != kind_code:
                continue
            yield self.entry(i)

    def span(self, after: int, upto: int) -> tuple[int, int] | None:
        """The first and last generation seqs in (after, upto], or None: two bisects."""
        lo = bisect_right(self._seqs, after, self._start)
        hi = bisect_right(self._seqs, upto, self._start) - 1
        return (self._seqs[lo], self._seqs[hi]) if lo <= hi else None

    def at(self, seq: int) -> Entry | None:
        """The generation cut at exactly `seq`, if any."""
        i = bisect_left(self._seqs, seq, self._start)
        if i < len(self._seqs) and self._seqs[i] == seq:
            return self.entry(i)
        return None

    def times(self) -> tuple[array[int], array[float]]:
        """The kept entries' seqs and times, ascending by seq (to build the time index)."""
        return self._seqs[self._start :], self._times[self._start :]

    def drop_below(self, seq: int) -> None:
        """Forget generations below `seq` (their records are gone)."""
        self._start = max(self._start, bisect_left(self._seqs, seq, self._start))

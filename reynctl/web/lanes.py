"""The branch tree as the page draws it: the TUI's lanes (reynctl.tui.graph), as numbers (pure).

`lanes` gives each node its column, so the page places a circle at (column,
row) and a line from it to its parent's row. It places nodes as the TUI's
`layout` does (tests/test_web_timeline.py holds them equal) without drawing
the TUI's text: the rows of 10^4 checkpoints are laid out in tens of
milliseconds, where building the TUI's nodes and lines took most of a second.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

from reynctl.tui.graph import Nearest, branch_holding, lineage_intervals
from reynd.protocol import methods as m

__all__ = ["Lanes", "columns", "lanes", "node_row", "waiting_before"]


def lanes(
    generations: Sequence[m.Generation], branches: Sequence[m.BranchInfo], head: int
) -> list[dict[str, Any]]:
    """One dict per node, newest first: seq, col, parent (a seq), kind, marks.

    The nodes of the TUI's `build_nodes`: every generation, every reset record,
    genesis, and the tip when it is not a generation itself.
    """
    active = {lo for lo, hi in lineage_intervals(head, branches) if lo <= hi}
    rows: dict[int, dict[str, Any]] = {0: node_row(0, "genesis", True)}
    branch_of = {0: 0}
    for g in generations:
        rows[g.seq] = node_row(g.seq, g.kind, g.active, agent=g.agent, label=g.label, tags=g.tags)
        branch_of[g.seq] = g.branch
    for b in branches:
        if b.parent is not None:  # a reset record: active when its branch is on lineage(head)
            rows[b.id] = node_row(b.id, "reset", b.id in active, target=b.origin_seq)
            branch_of[b.id] = b.id
    if head not in rows:
        rows[head] = node_row(head, "tip", True)
        holder = branch_holding(head, branches)
        branch_of[head] = holder.id if holder else 0
    nearest = Nearest(branch_of, branches)
    order = sorted(rows, reverse=True)
    parents = [nearest.parent(seq, branch_of[seq]) for seq in order]
    out = []
    for seq, parent, col in zip(order, parents, columns(order, parents), strict=True):
        row = rows[seq]
        row["col"], row["parent"], row["here"] = col, parent, seq == head
        out.append(row)
    return out


def node_row(
    seq: int,
    kind: str,
    active: bool,
    *,
    agent: str = "",
    label: str = "",
    tags: Sequence[str] = (),
    target: int | None = None,
) -> dict[str, Any]:
    """A node's row, laid out at column 0 with no parent yet."""
    return {
        "seq": seq,
        "col": 0,
        "parent": None,
        "kind": kind,
        "active": active,
        "here": False,
        "agent": agent,
        "label": label,
        "tags": list(tags),
        "target": target,
    }


def columns(seqs: Sequence[int], parents: Sequence[int | None]) -> list[int]:
    """Each node's column, as the TUI's `layout` places it: nodes newest first (see `Lanes`)."""
    state = Lanes()
    return [state.place(seq, parent) for seq, parent in zip(seqs, parents, strict=True)]


class Lanes:
    """The lanes part way down a layout: `place` the next node (newer ones placed before).

    A lane waits for a seq (the parent of the node above it in that lane). A node
    takes the leftmost lane waiting for it (the others waiting for it end there),
    else the leftmost free lane, else a new one on the right; its lane then waits
    for its parent. Lanes waiting are found by seq and free ones from a heap:
    O(n log n), where scanning every lane at every row was O(n * lanes).

    What follows a row depends only on `lanes` (what each lane waits for) and the
    nodes below: two layouts whose lanes are equal at a row place every node
    below it alike (`reynctl.web.relayout` stops there). `touched`, when a list,
    collects the lanes each `place` set.
    """

    __slots__ = ("free", "lanes", "touched", "waiting")

    def __init__(self) -> None:
        self.lanes: list[int | None] = []  # the seq each lane waits for; None: free
        self.waiting: dict[int, list[int]] = {}  # seq -> the lanes waiting for it
        self.free: list[int] = []  # a heap of lanes that became free (some taken since)
        self.touched: list[int] | None = None

    @classmethod
    def of(cls, waits: Sequence[int | None]) -> Lanes:
        """The lanes part way down a layout where lane i waits for `waits[i]` (None: free)."""
        state = cls()
        state.lanes = list(waits)
        while state.lanes and state.lanes[-1] is None:
            state.lanes.pop()
        for i, seq in enumerate(state.lanes):
            if seq is None:
                state.free.append(i)  # ascending: a heap
            else:
                state.waiting.setdefault(seq, []).append(i)
        return state

    def place(self, seq: int, parent: int | None) -> int:
        """The column of the node `seq` (whose parent is `parent`), the next one down."""
        lanes, free, touched = self.lanes, self.free, self.touched
        mine = self.waiting.pop(seq, None)
        if mine:
            col = min(mine)
            for i in mine:
                if i != col:
                    lanes[i] = None
                    heapq.heappush(free, i)
                    if touched is not None:
                        touched.append(i)
        else:
            while free and (free[0] >= len(lanes) or lanes[free[0]] is not None):
                heapq.heappop(free)  # taken again, or cut off the right end
            if free:
                col = heapq.heappop(free)
            else:
                col = len(lanes)
                lanes.append(None)
        lanes[col] = parent
        if touched is not None:
            touched.append(col)
        if parent is None:
            heapq.heappush(free, col)
        else:
            self.waiting.setdefault(parent, []).append(col)
        while lanes and lanes[-1] is None:
            lanes.pop()
        return col


def waiting_before(rows: Sequence[Mapping[str, Any]], k: int) -> list[int | None]:
    """What each lane waits for before the `k`-th of a layout's `rows` (newest first) is
    placed, read off the rows above it (no placing again): a lane waits for the parent of
    the last node placed in it, until the layout reaches that parent."""
    last: dict[int, int | None] = {}
    for col, parent in map(_col_parent, islice(rows, k)):
        last[col] = parent
    bottom = rows[k]["seq"] if k < len(rows) else -1  # parents at or below it are to come
    waits = [last.get(i) for i in range(1 + max(last, default=-1))]
    return [p if p is not None and p <= bottom else None for p in waits]


_col_parent = operator.itemgetter("col", "parent")

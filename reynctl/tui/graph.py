"""The timeline as a graph, like `git log --graph`: pure functions, no I/O.

Nodes are the generations (turn / plan-step / phase boundaries) of every
branch, the reset records that made the branches (from `branches.list`), the
tip when it is not itself a node, and genesis (seq 0). Each node's parent is
the nearest node below it on its own lineage (docs/design.md, The log and the lineage), so an
abandoned branch is drawn as a lane that joins the lane of the seq it forked
from. The newest node is the tip, so the active lineage is always column 0.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from reynd.protocol import methods as m

__all__ = ["Nearest", "Node", "Row", "branch_holding", "build_nodes", "layout", "lineage_intervals"]

NodeKind = Literal["turn", "plan_step", "phase", "reset", "tip", "genesis"]


@dataclass(frozen=True, slots=True)
class Node:
    """One row of the timeline that stands for a seq."""

    seq: int
    kind: NodeKind
    active: bool
    branch: int
    agent: str = ""
    label: str = ""
    created_at: float = 0.0
    target: int | None = None  # a reset record's target seq
    parent: int | None = None  # the seq of the parent node
    here: bool = False  # the tip: "you are here"
    tags: tuple[str, ...] = ()  # the tags that name this seq


@dataclass(frozen=True, slots=True)
class Row:
    """A line of the graph: a node (`node` set) or a link line that joins lanes."""

    graph: str
    node: Node | None = None
    below: str = ""  # the lanes just under a node row (to draw rows inside it)


def branch_holding(seq: int, branches: Sequence[m.BranchInfo]) -> m.BranchInfo | None:
    """The branch that holds `seq` (the newest one when the lists raced)."""
    best: m.BranchInfo | None = None
    for b in branches:
        if b.id <= seq and (best is None or b.id > best.id) and (seq <= b.tip or b.id == seq):
            best = b
    if best is None:  # a seq above every known tip (the lists raced): the newest branch
        older = [b for b in branches if b.id <= seq]
        best = max(older, key=lambda b: b.id, default=None)
    return best


def lineage_intervals(seq: int, branches: Sequence[m.BranchInfo]) -> list[tuple[int, int]]:
    """lineage(seq) as closed intervals, newest first: [(branch id, seq), (.., origin), ...]."""
    by_id = {b.id: b for b in branches}
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    at = seq
    b = branch_holding(at, branches)
    while True:
        if b is None or b.id in seen:
            out.append((0, at))
            break
        seen.add(b.id)
        out.append((b.id, at))
        if b.parent is None:
            break
        at = b.origin_seq
        # Branches hold disjoint ranges [id, tip]: the parent named is the one
        # holding the origin, unless the lists raced (then search them all).
        up = by_id.get(b.parent)
        b = up if up is not None and up.id <= at <= up.tip else branch_holding(at, branches)
    return out


def build_nodes(
    generations: Iterable[m.Generation], branches: Sequence[m.BranchInfo], head: int
) -> list[Node]:
    """Every node, newest first, each with its parent."""
    active = lineage_intervals(head, branches)
    nodes: dict[int, Node] = {0: Node(seq=0, kind="genesis", active=True, branch=0)}
    for g in generations:
        nodes[g.seq] = Node(
            seq=g.seq,
            kind=g.kind,
            active=g.active,
            branch=g.branch,
            agent=g.agent,
            label=g.label,
            created_at=g.created_at,
            tags=tuple(g.tags),
        )
    # A reset record starts its own branch: it is active when that branch is on lineage(head).
    active_branches = {lo for lo, hi in active if lo <= hi}
    for b in branches:
        if b.parent is not None:
            nodes[b.id] = Node(
                seq=b.id,
                kind="reset",
                active=b.id in active_branches,
                branch=b.id,
                target=b.origin_seq,
            )
    if head not in nodes:
        holder = branch_holding(head, branches)
        nodes[head] = Node(seq=head, kind="tip", active=True, branch=holder.id if holder else 0)
    nearest = Nearest({seq: node.branch for seq, node in nodes.items()}, branches)
    return [
        replace(node, parent=nearest.parent(seq, node.branch), here=seq == head)
        for seq, node in sorted(nodes.items(), reverse=True)
    ]


class Nearest:
    """The nearest node at or below a seq on its lineage, in O(log n) amortised.

    A node's parent is the nearest node below it on its own lineage: the
    previous node of its own branch, else the nearest one at or below the
    branch's origin on its parent branch, and so on down. What lies below a
    branch's origin is the same for every node of the branch, so it is found
    once per branch (a walk of every branch per node made 10^4 nodes and
    10^3 branches take minutes).
    """

    def __init__(self, branch_of: dict[int, int], branches: Sequence[m.BranchInfo]) -> None:
        """`branch_of`: each node's seq and its branch."""
        self.by_id = {b.id: b for b in branches}
        self.members: dict[int, list[int]] = {}
        for seq in sorted(branch_of):
            self.members.setdefault(branch_of[seq], []).append(seq)
        self.below_origin: dict[int, int] = {}

    def parent(self, seq: int, branch: int) -> int | None:
        """The parent of the node `seq` of `branch` (None for genesis)."""
        return None if seq == 0 else self.at_or_below(seq - 1, branch)

    def at_or_below(self, seq: int, branch: int) -> int:
        passed: list[int] = []  # branches left through their origin: they share the answer
        while True:
            info = self.by_id.get(branch)
            mine = self.members.get(branch, [])
            i = bisect.bisect_right(mine, seq) - 1
            if i >= 0 and mine[i] >= (info.id if info else 0):
                found = mine[i]
                break
            if info is None or info.parent is None:
                found = 0  # genesis
                break
            if branch in self.below_origin:
                found = self.below_origin[branch]
                break
            passed.append(branch)
            seq, branch = info.origin_seq, info.parent
        for b in passed:
            self.below_origin[b] = found
        return found


def _cells(lanes: Sequence[int | None]) -> list[str]:
    return ["│" if lane is not None else " " for lane in lanes]


def _join(cells: Sequence[str], fill: Sequence[str] | None = None) -> str:
    if not cells:
        return ""
    gaps = fill if fill is not None else [" "] * (len(cells) - 1)
    parts = [cells[0]]
    for gap, cell in zip(gaps, cells[1:], strict=True):
        parts += [gap, cell]
    return "".join(parts).rstrip()


def layout(nodes: Sequence[Node]) -> list[Row]:
    """Lanes for `nodes` (newest first): one row per node, plus link rows where lanes join."""
    lanes: list[int | None] = []  # the seq each lane waits for
    rows: list[Row] = []
    for node in nodes:
        mine = [i for i, want in enumerate(lanes) if want == node.seq]
        if mine:
            col, merged = mine[0], mine[1:]
        else:
            col = lanes.index(None) if None in lanes else len(lanes)
            if col == len(lanes):
                lanes.append(None)
            merged = []
        if merged:
            last = max(merged)
            cells = _cells(lanes)
            fill = [" "] * (len(lanes) - 1)
            for i in range(col, last):
                fill[i] = "─"
            cells[col] = "├"
            for i in range(col + 1, last + 1):
                if i in merged:
                    cells[i] = "┘" if i == last else "┴"
                elif lanes[i] is not None:
                    cells[i] = "┼"
                else:
                    cells[i] = "─"
            rows.append(Row(graph=_join(cells, fill)))
            for i in merged:
                lanes[i] = None
        cells = _cells(lanes)
        while len(cells) <= col:
            cells.append(" ")
        cells[col] = "◉" if node.here else ("●" if node.active else "○")
        graph = _join(cells)
        lanes[col] = node.parent
        while lanes and lanes[-1] is None:
            lanes.pop()
        below = _cells(lanes)
        while len(below) <= col:
            below.append(" ")
        rows.append(Row(graph=graph, node=node, below=_join(below)))
    return rows

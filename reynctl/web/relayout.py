"""The layout of a new head from an older head's, reset records among those between (pure).

Records appended above a layout's head leave the older rows' parents as they
were (a parent is the nearest node below on the row's own lineage, and every
new node lies above them all). A reset moves the active lineage: the rows it
leaves or joins change their active flag, and the rows of the old lineage
leave column 0 (which the active lineage holds) until the lanes meet again
where the two lineages join. So the new layout is the old one's rows with the
new ones on top, placed again from the top only while its lanes differ from
the old layout's at the same row (the two are run side by side: below a row
where they are equal every node is placed alike), and with the active flags
redone only where lineage(old head) and lineage(new head) differ. Where the
new layout's lanes are the old ones with one more in front (a reset at the
top waiting for its target further down: after a checkout far back, the
whole tree down to it) the rows down to that node are each one column right
of where they were, with no placing (`_shifted_until`). It equals
`reynctl.web.timeline.layout` of the same lists (tests/test_web_timeline.py):
a rewind at 10^5 records and 10^3 branches places tens of rows, not 22,000,
and a checkout to genesis none.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reynctl.tui.graph import branch_holding, lineage_intervals
from reynctl.web.lanes import Lanes, node_row, waiting_before
from reynd.protocol import methods as m
from reynd.protocol import moves as mv

__all__ = ["Relaid", "lineage_changes", "relaid"]


@dataclass(frozen=True, slots=True)
class Relaid:
    """The new layout, and the change a page showing the old one needs: the new layout's
    first `count` rows replace its first `replace` rows (the rest are the same)."""

    layout: dict[str, Any]
    replace: int
    count: int


def lineage_changes(
    old: Sequence[tuple[int, int]], new: Sequence[tuple[int, int]]
) -> list[tuple[int, int, bool]]:
    """The seq ranges [lo, hi] on one of two lineages only (as `lineage_intervals` gives
    them), ascending, each with whether it lies on `new`: one sweep of their ends.

    The oldest intervals the two share (most of a lineage 10^3 branches deep, after a
    rewind) are left out first: both hold them, so they change nothing.
    """
    shared = 0
    while shared < min(len(old), len(new)) and old[-1 - shared] == new[-1 - shared]:
        shared += 1
    old, new = old[: len(old) - shared], new[: len(new) - shared]
    events: list[tuple[int, int, int]] = []  # (seq, which lineage, +1 entering / -1 leaving)
    for side, spans in enumerate((old, new)):
        for lo, hi in spans:
            if lo <= hi:
                events += ((lo, side, 1), (hi + 1, side, -1))
    events.sort()
    out: list[tuple[int, int, bool]] = []
    depth = [0, 0]
    for i, (seq, side, step) in enumerate(events):
        depth[side] += step
        if i + 1 < len(events) and events[i + 1][0] == seq:
            continue  # the depths hold from this seq on once all of its ends are counted
        on_old, on_new = depth[0] > 0, depth[1] > 0
        if on_old != on_new:
            end = events[i + 1][0] - 1  # an interval entered is left: there is a next one
            if out and out[-1][1] == seq - 1 and out[-1][2] == on_new:
                out[-1] = (out[-1][0], end, on_new)
            else:
                out.append((seq, end, on_new))
    return out


def relaid(
    previous: Mapping[str, Any],
    *,
    old_branches: Sequence[m.BranchInfo],
    head: int,
    branches: Sequence[m.BranchInfo],
    newer: Sequence[m.Generation],
    moves: Mapping[int, mv.ReflogEntry],
    truncated: bool,
) -> Relaid:
    """The layout of `head` from `previous`, the layout of an older (lower) head whose branches
    were `old_branches` (the same, but for tips, and newer ones), with the generations
    `newer` above it (newest first); `moves`: the new reset records' reflog entries."""
    old_head: int = previous["head"]
    old: list[dict[str, Any]] = previous["rows"]
    dropped = 1 if old and old[0]["kind"] == "tip" else 0  # the old tip's row, no node now
    kept = old[dropped:]
    new_lineage = lineage_intervals(head, branches)

    # The new nodes, with their branches.
    on_new = {lo for lo, hi in new_lineage if lo <= hi}
    nodes: dict[int, tuple[dict[str, Any], int]] = {}
    for g in newer:
        row = node_row(g.seq, g.kind, g.active, agent=g.agent, label=g.label, tags=g.tags)
        nodes[g.seq] = (row, g.branch)
    for info in branches:
        if info.id > old_head and info.parent is not None:
            row = node_row(info.id, "reset", info.id in on_new, target=info.origin_seq)
            move = moves.get(info.id)
            if move is not None:
                row["reason"], row["op"] = move.reason, move.op
            nodes[info.id] = (row, info.id)
    if head not in nodes:
        holder = branch_holding(head, branches)
        nodes[head] = (node_row(head, "tip", True), holder.id if holder else 0)
    top = sorted(nodes)

    # Their parents: the nearest node below on their lineage, found by seq among all
    # (bisects: `top` ascending, `kept` descending; no pass over the 22,000 rows).
    by_id = {b.id: b for b in branches}

    def highest(seq: int) -> int | None:
        """The highest node at or below `seq`."""
        i = bisect.bisect_right(top, seq) - 1
        if i >= 0:
            return top[i]
        k = bisect.bisect_left(kept, -seq, key=_descending)
        return kept[k]["seq"] if k < len(kept) else None

    def at_or_below(seq: int, branch: int) -> int:
        # Branches hold disjoint ranges of seqs [id, tip]: a node in [id, seq] is the branch's.
        while True:
            found = highest(seq)
            if found is not None and found >= branch:
                return found
            info = by_id.get(branch)
            if info is None or info.parent is None:
                return 0  # genesis
            seq, branch = info.origin_seq, info.parent

    added = []
    now, was = Lanes(), Lanes()
    for seq in reversed(top):
        row, branch = nodes[seq]
        row["parent"] = at_or_below(seq - 1, branch)
        row["col"], row["here"] = now.place(seq, row["parent"]), seq == head
        added.append(row)
    if dropped:
        was.place(old[0]["seq"], old[0]["parent"])

    # The old rows placed again while the lanes differ from the old layout's.
    cols: dict[int, int] = {}  # index in `kept` -> its new column, where it moved
    differ = _differing(now, was)
    touched: tuple[list[int], list[int]] = ([], [])  # the lanes each `place` set, in each
    now.touched, was.touched = touched
    k = 0
    while differ and k < len(kept):
        end = _shifted_until(now, was, kept, k)
        if end > k:
            # Lane 0 waits for a node further down and the others are the old lanes one
            # to the right (after a checkout far back, all of them to its fork point):
            # each node above that one is placed one column right of where it was
            # (`_shifted_until`), with no placing; the old lanes there are read off the
            # old rows, and the two layouts run side by side again from there.
            cols.update(zip(range(k, end), [c + 1 for c in map(_col, kept[k:end])], strict=True))
            was = Lanes.of(waiting_before(old, dropped + end))
            now = Lanes.of([now.lanes[0], *was.lanes])
            differ = _differing(now, was)
            now.touched, was.touched = touched
            k = end
            continue
        row = kept[k]
        col = now.place(row["seq"], row["parent"])
        was.place(row["seq"], row["parent"])
        if col != row["col"]:
            cols[k] = col
        for i in (*touched[0], *touched[1]):
            if _at(now, i) != _at(was, i):
                differ.add(i)
            else:
                differ.discard(i)
        touched[0].clear()
        touched[1].clear()
        k += 1

    # The active flags, where the lineages differ (genesis is on both).
    flags: dict[int, bool] = {}  # index in `kept` -> its new active flag, where it changed
    for lo, hi, active in lineage_changes(lineage_intervals(old_head, old_branches), new_lineage):
        a = bisect.bisect_left(kept, -hi, key=_descending)
        z = bisect.bisect_right(kept, -lo, key=_descending)
        for k in range(a, z):
            if kept[k]["active"] != active:
                flags[k] = active

    # Each changed row copied once (the old layout's rows are left as they were).
    rows = added + kept
    n = len(added)
    for k, col in cols.items():
        row = rows[n + k] = kept[k].copy()
        row["col"] = col
        if k in flags:
            row["active"] = flags.pop(k)
    for k, active in flags.items():  # those left, whose column is the same
        rows[n + k] = dict(kept[k], active=active)
    # Rows of `kept` to replace (the flags popped above are at rows in `cols`).
    last = 1 + max(max(cols, default=-1), max(flags, default=-1))
    if kept and kept[0]["here"]:
        rows[len(added)] = dict(rows[len(added)], here=False)
        last = max(last, 1)
    layout = {
        "head": head,
        "branches": len(branches),
        "truncated": truncated,
        "total": len(rows),
        "lanes": 1 + max(map(_col, rows), default=0),
        "rows": rows,
    }
    return Relaid(layout, dropped + last, len(added) + last)


_col = operator.itemgetter("col")


def _descending(row: Mapping[str, Any]) -> int:
    return -int(row["seq"])


def _differing(now: Lanes, was: Lanes) -> set[int]:
    """The lanes that wait for different seqs in the two."""
    return {i for i in range(max(len(now.lanes), len(was.lanes))) if _at(now, i) != _at(was, i)}


def _shifted_until(now: Lanes, was: Lanes, kept: Sequence[Mapping[str, Any]], k: int) -> int:
    """Where `now` is `was` with a lane waiting for X put in front, the index of the first
    row from `k` on at or below X (else `k`): up to it, each node is placed one column
    right of where `was` places it, and the lanes stay so.

    A node other than X is waited for by the same lanes, one right; the leftmost free
    lane, or a new one, is one right as lane 0 is taken; so it is placed one right and
    sets the lane one right to its parent, as `was` sets the other.
    """
    lanes = now.lanes
    if len(lanes) != len(was.lanes) + 1 or lanes[0] is None or lanes[1:] != was.lanes:
        return k
    return bisect.bisect_left(kept, -lanes[0], lo=k, key=_descending)


def _at(lanes: Lanes, i: int) -> int | None:
    return lanes.lanes[i] if i < len(lanes.lanes) else None

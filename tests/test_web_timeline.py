"""The branch tree's parents and lanes (reynctl.tui.graph, reynctl.web.timeline), issue 26.

`build_nodes` finds each node's parent per branch (fast enough for 10^4
nodes and 10^3 branches); here it is held to the definition, walked out
seq by seq over lineage(s), on logs of random rewinds and checkouts built
as the daemon builds them (docs/design.md, The log and the lineage).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reynctl.tui.graph import build_nodes
from reynctl.web.timeline import lanes
from reynd.protocol import methods as m


def simulate(
    moves: list[tuple[int, int]], every: int
) -> tuple[list[m.Generation], list[m.BranchInfo], int, dict[int, int], set[int]]:
    """A log: runs of records, each followed by a reset to a random earlier seq.

    `moves`: (records to append, which earlier seq to reset to, as an index).
    Returns generations (every `every`-th record), branches, the head, parent(s)
    and the active seqs (lineage(head)).
    """
    parent: dict[int, int] = {}
    branch_of: dict[int, int] = {0: 0}
    infos: dict[int, dict[str, int | None]] = {0: {"origin": 0, "parent": None, "tip": 0}}
    head, current = 0, 0
    for count, pick in moves:
        for _ in range(count):
            head += 1
            parent[head] = head - 1 if head - 1 in branch_of else 0
            branch_of[head] = current
            infos[current]["tip"] = head
        target = pick % (head + 1)
        head += 1
        parent[head], branch_of[head] = target, head
        infos[head] = {"origin": target, "parent": branch_of[target], "tip": head}
        current = head
    for _ in range(2):  # a tail after the last reset
        head += 1
        parent[head], branch_of[head] = head - 1, current
        infos[current]["tip"] = head
    active: set[int] = set()
    at = head
    while at:
        active.add(at)
        at = parent[at]
    branches = [
        m.BranchInfo(
            id=b,
            origin_seq=int(i["origin"] or 0),
            parent=i["parent"],
            tip=int(i["tip"] or 0),
            active=b in {branch_of[s] for s in active} or b == 0,
        )
        for b, i in infos.items()
    ]
    gens = [
        m.Generation(
            seq=s, kind="turn", agent="a", active=s in active, branch=branch_of[s], created_at=0
        )
        for s in range(1, head + 1)
        if s % every == 0 and branch_of[s] != s
    ]
    return gens, branches, head, parent, active


@given(
    moves=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**6)), max_size=12),
    every=st.integers(1, 3),
)
def test_each_parent_is_the_nearest_node_below_on_its_lineage(
    moves: list[tuple[int, int]], every: int
) -> None:
    gens, branches, head, parent, active = simulate(moves, every)
    nodes = build_nodes(gens, branches, head)
    seqs = {n.seq for n in nodes}
    for node in nodes:
        want: int | None = None
        if node.seq:
            at = parent[node.seq]
            while at not in seqs:
                at = parent[at]
            want = at
        assert node.parent == want, (node, moves)
        assert node.active == (node.seq in active or node.seq == 0), (node, moves)
    # The lanes the page draws: one per node, the tip at the top of column 0.
    rows = lanes(gens, branches, head)
    assert [r["seq"] for r in rows] == sorted(seqs, reverse=True)
    assert rows[0]["here"] and rows[0]["col"] == 0

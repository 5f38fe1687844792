"""The branch tree's parents and lanes (reynctl.tui.graph, reynctl.web.timeline), issue 26.

`build_nodes` finds each node's parent per branch (fast enough for 10^4
nodes and 10^3 branches); here it is held to the definition, walked out
seq by seq over lineage(s), on logs of random rewinds and checkouts built
as the daemon builds them (docs/design.md, The log and the lineage).
"""

from __future__ import annotations

import random
from typing import Any

import anyio
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.batch import turn_events
from reynctl import aio
from reynctl.tui.graph import build_nodes, lineage_intervals
from reynctl.tui.graph import layout as tui_layout
from reynctl.web.lanes import Lanes, lanes, waiting_before
from reynctl.web.relayout import lineage_changes, relaid
from reynctl.web.timeline import Lists, Timeline, layout, reflagged
from reynd.protocol import methods as m
from tests.harness import Daemon


class Log:
    """A log built as the daemon builds it, record by record: runs of records, resets."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.branch_of: dict[int, int] = {0: 0}
        self.infos: dict[int, dict[str, int | None]] = {0: {"origin": 0, "parent": None, "tip": 0}}
        self.head = self.current = 0

    def append(self, count: int) -> None:
        for _ in range(count):
            self.head += 1
            self.parent[self.head] = self.head - 1 if self.head - 1 in self.branch_of else 0
            self.branch_of[self.head] = self.current
            self.infos[self.current]["tip"] = self.head

    def reset(self, target: int) -> None:
        """A reset record to `target`: a checkout (a rewind when it is on the lineage)."""
        self.head += 1
        self.parent[self.head], self.branch_of[self.head] = target, self.head
        self.infos[self.head] = {
            "origin": target,
            "parent": self.branch_of[target],
            "tip": self.head,
        }
        self.current = self.head

    def active(self) -> set[int]:
        """lineage(head) but genesis."""
        out: set[int] = set()
        at = self.head
        while at:
            out.add(at)
            at = self.parent[at]
        return out

    def lists(self, every: int) -> tuple[list[m.Generation], list[m.BranchInfo], int]:
        """Generations (every `every`-th record but resets, newest first), branches, head."""
        active = self.active()
        branches = [
            m.BranchInfo(
                id=b,
                origin_seq=int(i["origin"] or 0),
                parent=i["parent"],
                tip=int(i["tip"] or 0),
                active=b in {self.branch_of[s] for s in active} or b == 0,
            )
            for b, i in self.infos.items()
        ]
        gens = [
            m.Generation(
                seq=s,
                kind="turn",
                agent="a",
                active=s in active,
                branch=self.branch_of[s],
                created_at=0,
            )
            for s in range(self.head, 0, -1)
            if s % every == 0 and self.branch_of[s] != s
        ]
        return gens, branches, self.head


def simulate(
    moves: list[tuple[int, int]], every: int
) -> tuple[list[m.Generation], list[m.BranchInfo], int, dict[int, int], set[int]]:
    """A log: runs of records, each followed by a reset to a random earlier seq.

    `moves`: (records to append, which earlier seq to reset to, as an index).
    Returns generations (every `every`-th record), branches, the head, parent(s)
    and the active seqs (lineage(head)).
    """
    log = Log()
    for count, pick in moves:
        log.append(count)
        log.reset(pick % (log.head + 1))
    log.append(2)  # a tail after the last reset
    gens, branches, head = log.lists(every)
    return gens, branches, head, log.parent, log.active()


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


def _reference_lanes(
    gens: list[m.Generation], branches: list[m.BranchInfo], head: int
) -> list[tuple[int, int, int | None]]:
    """(seq, column, parent) per node as the TUI draws them: its glyph's column."""
    out = []
    for row in tui_layout(build_nodes(gens, branches, head)):
        if row.node is not None:
            col = next(i for i, c in enumerate(row.graph) if c in "◉●○") // 2
            out.append((row.node.seq, col, row.node.parent))
    return out


@settings(max_examples=300)
@given(
    moves=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**6)), max_size=16),
    every=st.integers(1, 3),
)
def test_the_pages_columns_are_the_tuis(moves: list[tuple[int, int]], every: int) -> None:
    """reynctl.web.lanes places each node where the TUI's layout draws it, without its text."""
    gens, branches, head, _, _ = simulate(moves, every)
    rows = lanes(gens, branches, head)
    assert [(r["seq"], r["col"], r["parent"]) for r in rows] == _reference_lanes(
        gens, branches, head
    )


def _full(gens: list[m.Generation], branches: list[m.BranchInfo], head: int) -> dict[str, Any]:
    return layout(Lists(head, 0, branches, [], gens, 0, False, {}))


@settings(max_examples=300)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 6), st.booleans(), st.integers(0, 10**6)), min_size=1, max_size=20
    ),
    every=st.integers(1, 3),
)
def test_a_relaid_layout_equals_a_fresh_one(steps: list[tuple[int, bool, int]], every: int) -> None:
    """After any sequence of appends and resets (rewinds, checkouts), the layout placed
    again from the last one (reynctl.web.relayout) is the layout of the same lists; the
    change it names turns the last one into it; and the older generations' active flags,
    redone where the lineage moved, are the new lists'."""
    log = Log()
    log.append(1)
    gens, branches, head = log.lists(every)
    kept = _full(gens, branches, head)
    for count, reset, pick in steps:
        log.append(count)
        if reset:
            log.reset(pick % (log.head + 1))
            log.append(pick % 3)
        if log.head == head:
            continue  # nothing new: the layout is kept as it is
        now_gens, now_branches, now_head = log.lists(every)
        fresh = _full(now_gens, now_branches, now_head)
        newer = [g for g in now_gens if g.seq > head]
        again = relaid(
            kept,
            old_branches=branches,
            head=now_head,
            branches=now_branches,
            newer=newer,
            moves={},
            truncated=False,
        )
        assert again.layout == fresh, (steps, every)
        change = again.layout["rows"][: again.count] + kept["rows"][again.replace :]
        assert change == fresh["rows"], (steps, every)
        moved = lineage_changes(
            lineage_intervals(head, branches), lineage_intervals(now_head, now_branches)
        )
        assert newer + reflagged(gens, moved) == now_gens, (steps, every)
        kept, gens, branches, head = again.layout, now_gens, now_branches, now_head


@settings(max_examples=200)
@given(
    moves=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**6)), max_size=16),
    every=st.integers(1, 3),
)
def test_the_lanes_read_off_the_rows_are_the_lanes_placed(
    moves: list[tuple[int, int]], every: int
) -> None:
    """`waiting_before` (the lanes before a row, read off the rows above it) is the state
    placing the rows down to it leaves, at every row and after the last."""
    gens, branches, head, _, _ = simulate(moves, every)
    rows = lanes(gens, branches, head)
    state = Lanes()
    for k in range(len(rows) + 1):
        assert Lanes.of(waiting_before(rows, k)).lanes == state.lanes, (k, moves)
        if k < len(rows):
            state.place(rows[k]["seq"], rows[k]["parent"])


@settings(max_examples=60)
@given(
    branches=st.integers(1, 40),
    targets=st.lists(st.floats(0, 1), min_size=1, max_size=4),
    tail=st.integers(0, 3),
    every=st.integers(1, 3),
)
def test_a_layout_after_a_checkout_far_back_equals_a_fresh_one(
    branches: int, targets: list[float], tail: int, every: int
) -> None:
    """A history as the bench's (runs of turns, each followed by a rewind a few back), then
    checkouts anywhere in it, down to genesis (the whole tree moves one lane right, down to
    the fork point: `relaid` places no node above it): the layout equals a fresh one."""
    log = Log()
    log.append(1)
    for _ in range(branches):
        log.append(12)
        log.reset(log.head - 5)
    log.append(3)
    gens, infos, head = log.lists(every)
    kept = _full(gens, infos, head)
    for where in targets:
        log.reset(int(where * log.head))
        log.append(tail)
        now_gens, now_infos, now_head = log.lists(every)
        again = relaid(
            kept,
            old_branches=infos,
            head=now_head,
            branches=now_infos,
            newer=[g for g in now_gens if g.seq > head],
            moves={},
            truncated=False,
        )
        fresh = _full(now_gens, now_infos, now_head)
        assert again.layout == fresh, (branches, targets, tail, every)
        assert again.layout["rows"][: again.count] + kept["rows"][again.replace :] == fresh["rows"]
        kept, infos, head = again.layout, now_infos, now_head


def test_a_grown_layout_equals_a_fresh_one(daemon: Daemon) -> None:
    """After every change made by random writes, rewinds, checkouts and tags, the layout the
    server keeps (grown on top after appends; after a reset laid out again from the lists
    it had, their active flags redone, and the records above its head) is the one a server
    starting now would lay out; with a small cutoff, so that it moves."""
    rng = random.Random(26)
    daemon.call("wal.append", {"agent": "ada", "kind": "agent.created", "data": {}})
    most, block, chunk = 12, 8, 3  # chunk: rows per chunk of the body, several

    async def body() -> None:
        client = await aio.open_client(daemon.socket)
        kept = Timeline(most=most, block=block, chunk=chunk)
        grew = relaid = 0
        try:
            for step in range(120):
                head = daemon.call("daemon.status")["head"]
                op = rng.choice(["turns", "turns", "turns", "message", "rewind", "checkout", "tag"])
                if op == "turns":
                    events = [
                        e for t in range(rng.randint(1, 3)) for e in turn_events(step * 10 + t, "")
                    ]
                    daemon.call("wal.append_batch", {"agent": "ada", "events": events})
                elif op == "message":  # a record that is no checkpoint: the tip's own row
                    daemon.call(
                        "wal.append",
                        {
                            "agent": "ada",
                            "kind": "message.received",
                            "data": {"message_id": f"x{step}", "text": "hi"},
                        },
                    )
                elif op == "tag":
                    daemon.call(
                        "tags.set",
                        {
                            "name": f"t{rng.randint(0, 3)}",
                            "seq": rng.randint(0, head),
                            "force": True,
                        },
                    )
                elif head > 2:
                    target = rng.randint(0, head - 1)
                    try:
                        daemon.call(op, {"seq": target})
                    except Exception:  # not active (rewind), below the floor: no move
                        continue
                before = kept._lists
                body_kept = msgspec.json.decode(await kept.get(client))
                if before is not None and kept._lists is not None:
                    same = before.same_tree(kept._lists) and before.cutoff == kept._lists.cutoff
                    grew, relaid = grew + same, relaid + (not same)
                body_fresh = msgspec.json.decode(
                    await Timeline(most=most, block=block, chunk=chunk).get(client)
                )
                assert body_kept == body_fresh, (step, op)
        finally:
            await client.aclose()
        assert grew > 30 and relaid > 10, (grew, relaid)  # both ways were taken, often

    anyio.run(body)

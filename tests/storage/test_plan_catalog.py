"""Pure, fast tests: reconstruct.plan_reconstruct and catalog.Catalog."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import LogModel, count_calls
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.catalog import Catalog, Entry
from reynd.core.lineage import Lineage
from reynd.core.reconstruct import ReplayPlan, plan_reconstruct
from reynd.protocol import errors

# -- plan_reconstruct -----------------------------------------------------------------------


def _example() -> Lineage:
    """docs/design.md: 1..10, rewind(5) -> 11, 12..15, checkout(8) -> 16, then 17..20."""
    lin = Lineage()
    for s in range(1, 11):
        lin.observe(s)
    lin.observe(11, target=5)
    for s in range(12, 16):
        lin.observe(s)
    lin.observe(16, target=8)
    for s in range(17, 21):
        lin.observe(s)
    return lin


@pytest.mark.parametrize(
    ("target", "snapshots", "snapshot", "ranges"),
    [
        (20, [], 0, ((1, 8), (16, 20))),
        (20, [3, 9, 14], 3, ((4, 8), (16, 20))),  # 9 and 14 are not on lineage(20)
        (20, [3, 8], 8, ((16, 20),)),
        (20, [3, 8, 16], 16, ((17, 20),)),
        (20, [20], 20, ()),
        (20, [3, 8, 16, 19, 21], 19, ((20, 20),)),  # 21 is above the target
        (15, [7, 9, 12], 12, ((13, 15),)),  # abandoned target, its own lineage
        (15, [7, 9], 0, ((1, 5), (11, 15))),  # 7, 9 off lineage(15)
        (13, [4, 14], 4, ((5, 5), (11, 13))),
        (10, [8], 8, ((9, 10),)),  # the root branch's abandoned tail
        (16, [], 0, ((1, 8), (16, 16))),
        (0, [5], 0, ()),
    ],
)
def test_plan_picks_nearest_snapshot_on_the_targets_lineage(
    target: int, snapshots: list[int], snapshot: int, ranges: tuple[tuple[int, int], ...]
) -> None:
    plan = plan_reconstruct(_example(), target, snapshots)
    assert plan == ReplayPlan(target, snapshot, ranges)
    assert plan.replay_count == sum(hi - lo + 1 for lo, hi in ranges)


def test_plan_refuses_targets_outside_the_log() -> None:
    with pytest.raises(errors.SeqOutOfRange):
        plan_reconstruct(_example(), 21, [])
    with pytest.raises(errors.SeqOutOfRange):
        plan_reconstruct(_example(), -1, [])


@pytest.mark.parametrize(
    ("target", "snapshots", "floor", "below"),
    [
        (20, [], 2, True),  # replay would need seq 1
        (20, [3], 4, False),  # 3 serves, replay starts at 4
        (20, [3], 5, True),  # replay starts at 4 < 5
        (20, [16], 17, False),
        (20, [16], 18, True),
        (15, [12], 13, False),
        (15, [12], 14, True),
        (20, [20], 100, False),  # nothing to replay
        (0, [], 100, False),  # genesis needs nothing
    ],
)
def test_plan_below_the_floor(target: int, snapshots: list[int], floor: int, below: bool) -> None:
    if below:
        with pytest.raises(errors.BelowFloor) as info:
            plan_reconstruct(_example(), target, snapshots, floor)
        assert info.value.data == {"seq": target, "floor": floor}
        assert f"floor is {floor}" in info.value.message
    else:
        plan = plan_reconstruct(_example(), target, snapshots, floor)
        assert all(lo >= floor for lo, _ in plan.ranges)


scripts = st.lists(st.one_of(st.none(), st.integers(0, 10_000)), max_size=50)


@settings(max_examples=300, deadline=None)
@given(scripts, st.sets(st.integers(1, 60)), st.integers(1, 20), st.data())
def test_plan_matches_brute_force(
    script: list[int | None], snaps: set[int], floor: int, data: st.DataObject
) -> None:
    lin, model = Lineage(), LogModel()
    for item in script:
        if item is None:
            model.add(("create", "x"))
            lin.observe(model.head)
        else:
            t = item % (model.head + 1)
            model.add_reset(t)
            lin.observe(model.head, target=t)
    target = data.draw(st.integers(0, model.head))
    snapshots = sorted(snaps)
    path = model.lineage(target)
    want_snap = max((s for s in path if s in snaps), default=0)
    want_replay = sorted(s for s in path if s > want_snap)
    if want_replay and want_replay[0] < floor:
        with pytest.raises(errors.BelowFloor):
            plan_reconstruct(lin, target, snapshots, floor)
        return
    plan = plan_reconstruct(lin, target, snapshots, floor)
    assert plan.snapshot == want_snap
    assert [s for lo, hi in plan.ranges for s in range(lo, hi + 1)] == want_replay


def _scaled(scale: int) -> tuple[Lineage, list[int], int]:
    """Four resets on the tip's path; history and snapshot spacing `scale` times longer."""
    lin = Lineage()
    seq = 0
    snaps = []
    for block in range(5):
        for _ in range(100 * scale):
            seq += 1
            lin.observe(seq)
            if seq % (40 * scale) == 0:
                snaps.append(seq)
        if block < 4:
            seq += 1
            lin.observe(seq, target=seq - 1 - 30 * scale)
    return lin, snaps, seq


def test_plan_cost_depends_on_resets_on_the_path_not_history_length() -> None:
    small, big = _scaled(1), _scaled(1_000)
    assert big[2] > 500 * small[2]
    for (lin, snaps, head), (lin2, snaps2, head2) in [(small, big)]:
        # No snapshot anywhere: the walk visits every interval of the path.
        assert count_calls(plan_reconstruct, lin, head, []) == count_calls(
            plan_reconstruct, lin2, head2, []
        )
        # With snapshots: the walk stops at the nearest one.
        assert count_calls(plan_reconstruct, lin, head, snaps) == count_calls(
            plan_reconstruct, lin2, head2, snaps2
        )
        p1, p2 = plan_reconstruct(lin, head, snaps), plan_reconstruct(lin2, head2, snaps2)
        assert len(p1.ranges) == len(p2.ranges)


# -- Catalog -------------------------------------------------------------------------------


def _catalog() -> Catalog:
    cat = Catalog()
    cat.add(3, "turn", "a", 1.0, "t1")
    cat.add(5, "plan_step", "b", 2.0, "p")
    cat.add(9, "phase", "a", 3.0, "ph")
    cat.add(12, "turn", "b", 4.0, "t2")
    cat.add(20, "turn", "a", 5.0, "t3")
    return cat


def test_catalog_newest_first_with_filters_and_cursor() -> None:
    cat = _catalog()
    assert len(cat) == 5
    assert [e.seq for e in cat.newest_first()] == [20, 12, 9, 5, 3]
    assert [e.seq for e in cat.newest_first(below=12)] == [9, 5, 3]
    assert [e.seq for e in cat.newest_first(below=13)] == [12, 9, 5, 3]
    assert [e.seq for e in cat.newest_first(below=3)] == []
    assert [e.seq for e in cat.newest_first(agent="a")] == [20, 9, 3]
    assert [e.seq for e in cat.newest_first(kind="turn")] == [20, 12, 3]
    assert [e.seq for e in cat.newest_first(agent="b", kind="turn")] == [12]
    assert [e.seq for e in cat.newest_first(agent="nobody")] == []
    assert cat.entry(0) == Entry(3, "turn", "a", 1.0, "t1")


def test_catalog_at_and_ordering() -> None:
    cat = _catalog()
    assert cat.at(9) == Entry(9, "phase", "a", 3.0, "ph")
    assert cat.at(10) is None
    assert cat.at(100) is None
    with pytest.raises(ValueError, match="not above"):
        cat.add(20, "turn", "a", 6.0, "dup")
    with pytest.raises(ValueError, match="not above"):
        cat.add(4, "turn", "a", 6.0, "late")
    assert cat.knows_agent("b")
    assert not cat.knows_agent("c")


def test_catalog_drop_below() -> None:
    cat = _catalog()
    cat.drop_below(9)
    assert len(cat) == 3
    assert [e.seq for e in cat.newest_first()] == [20, 12, 9]
    assert cat.at(5) is None
    assert cat.at(9) is not None
    cat.drop_below(4)  # never moves the floor down
    assert len(cat) == 3
    cat.drop_below(1000)
    assert len(cat) == 0
    assert list(cat.newest_first()) == []
    cat.add(30, "turn", "z", 7.0, "after")
    assert [e.seq for e in cat.newest_first()] == [30]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 5),
            st.sampled_from(["turn", "plan_step", "phase"]),
            st.sampled_from(["a", "b", "c"]),
        ),
        max_size=40,
    ),
    st.one_of(st.none(), st.integers(0, 200)),
    st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"])),
    st.one_of(st.none(), st.sampled_from(["turn", "plan_step", "phase"])),
    st.integers(0, 200),
)
def test_catalog_matches_a_list(
    steps: list[tuple[int, Any, str]], below: int | None, agent: str | None, kind: Any, drop: int
) -> None:
    cat, ref = Catalog(), []
    seq = 0
    for gap, k, a in steps:
        seq += gap
        cat.add(seq, k, a, float(seq), f"l{seq}")
        ref.append(Entry(seq, k, a, float(seq), f"l{seq}"))
    cat.drop_below(drop)
    ref = [e for e in ref if e.seq >= drop]
    want = [
        e
        for e in reversed(ref)
        if (below is None or e.seq < below)
        and (agent is None or e.agent == agent)
        and (kind is None or e.kind == kind)
    ]
    assert list(cat.newest_first(below=below, agent=agent, kind=kind)) == want
    assert len(cat) == len(ref)
    for e in ref:
        assert cat.at(e.seq) == e

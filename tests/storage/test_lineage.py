"""Lineage: docs/design.md's worked example, literally, and a brute-force comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import LogModel, count_calls, opts, summarize
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.lineage import Abandoned, Branch, Lineage
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.storage.store import Store

# -- the worked example: 1..10, rewind(5) -> R=11, 12..15, checkout(8) -> R=16 -----------------

EXPECTED_ACTIVE = [*range(0, 9), 16]
EXPECTED_ABANDONED = list(range(9, 16))
EXPECTED_BRANCH = {s: 0 for s in range(0, 11)} | {s: 11 for s in range(11, 16)} | {16: 16}
EXPECTED_TREE = [
    Branch(id=0, origin_seq=0, parent=None, tip=10, active=False),
    Branch(id=11, origin_seq=5, parent=0, tip=15, active=False),
    Branch(id=16, origin_seq=8, parent=0, tip=16, active=True),
]


def _worked_example_lineage() -> Lineage:
    lin = Lineage()
    for s in range(1, 11):
        lin.observe(s)
    lin.observe(11, target=5)
    for s in range(12, 16):
        lin.observe(s)
    lin.observe(16, target=8)
    return lin


def _check_worked_example(lin: Lineage) -> None:
    assert lin.head == 16
    assert [s for s in range(17) if lin.is_active(s)] == EXPECTED_ACTIVE
    assert [s for s in range(17) if not lin.is_active(s)] == EXPECTED_ABANDONED
    assert lin.active_intervals() == [(1, 8), (16, 16)]
    assert {s: lin.branch_of(s) for s in range(17)} == EXPECTED_BRANCH
    assert lin.branches() == EXPECTED_TREE
    assert lin.resets == [(11, 5), (16, 8)]
    assert lin.parent(11) == 5
    assert lin.parent(16) == 8
    assert lin.parent(12) == 11
    assert lin.intervals(16) == [(16, 16), (1, 8)]
    assert lin.intervals(15) == [(11, 15), (1, 5)]
    assert lin.intervals(10) == [(1, 10)]
    # rewind(5) abandoned 6..10; checkout(8) abandoned branch 11's 11..15.
    assert lin.abandoned(11) == Abandoned(reset=11, target=5, seqs=((6, 10),))
    assert lin.abandoned(16) == Abandoned(reset=16, target=8, seqs=((11, 15),))
    assert lin.on_lineage(8, of=16)
    assert not lin.on_lineage(9, of=16)
    assert lin.on_lineage(5, of=15)
    assert not lin.on_lineage(6, of=15)
    assert not lin.on_lineage(8, of=15)


def test_worked_example_on_pure_lineage() -> None:
    _check_worked_example(_worked_example_lineage())


def _entry(i: int) -> ev.Event:
    if i == 1:
        return ev.AgentCreated(agent="a")
    return ev.MessageReceived(agent="a", message_id=f"m{i}", text=f"entry {i}")


def test_worked_example_through_store_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    with Store.open(root, opts()) as store:
        for i in range(1, 11):
            (e,) = store.append([_entry(i)])
            assert e.seq == i
        r1 = store.rewind(5)
        assert (r1.seq, r1.target_n, r1.supersedes, r1.mode) == (11, 5, 10, "rewind")
        for i in range(12, 16):
            (e,) = store.append([_entry(i)])
            assert e.seq == i
        with pytest.raises(errors.NotActive, match="checkout 8"):
            store.rewind(8)  # 8 was abandoned by rewind(5)
        assert store.head == 15  # the refusal wrote nothing
        mode, r2 = store.checkout(8)
        assert mode == "fork_switch"
        assert (r2.seq, r2.target_n, r2.supersedes, r2.mode) == (16, 8, 15, "checkout")
        _check_worked_example(store.lineage)
        expected_tip = [(f"m{i}", f"entry {i}") for i in range(2, 9)]
        assert [(m.message_id, m.text) for m in store.state.agents["a"].inbox] == expected_tip
        assert store.state.seq == 16
        # As-of reads of the abandoned branch do not move the tip.
        as_of_15 = store.state_as_of(15)
        assert [m.message_id for m in as_of_15.agents["a"].inbox] == [
            "m2",
            "m3",
            "m4",
            "m5",
            "m12",
            "m13",
            "m14",
            "m15",
        ]
        assert store.head == 16
    # The same picture after a restart, rebuilt from the files alone.
    with Store.open(root, opts()) as store:
        _check_worked_example(store.lineage)
        assert [(m.message_id, m.text) for m in store.state.agents["a"].inbox] == expected_tip
        assert summarize(store.state_as_of(16)) == summarize(store.state_as_of(8))
        assert summarize(store.state) == summarize(store.state_as_of(8))


# -- Lineage against a brute-force model ------------------------------------------------------

# A script: None = plain record, k = reset to (k mod (head + 1)), i.e. any seq 0..head.
scripts = st.lists(st.one_of(st.none(), st.integers(0, 10_000)), min_size=0, max_size=60)


def _build(script: list[int | None]) -> tuple[Lineage, LogModel]:
    lin, model = Lineage(), LogModel()
    for item in script:
        if item is None:
            model.add(("create", f"x{model.head}"))
            lin.observe(model.head)
        else:
            target = item % (model.head + 1)
            model.add_reset(target)
            lin.observe(model.head, target=target)
    return lin, model


def _expand(intervals: list[tuple[int, int]]) -> list[int]:
    return [s for lo, hi in intervals for s in range(lo, hi + 1)]


@settings(max_examples=300, deadline=None)
@given(scripts)
def test_lineage_matches_brute_force_model(script: list[int | None]) -> None:
    lin, model = _build(script)
    head = model.head
    active = model.active_set()
    assert lin.head == head
    for s in range(head + 1):
        assert lin.is_active(s) == (s in active), s
        assert lin.branch_of(s) == model.branch_of(s), s
        if s > 0:
            assert lin.parent(s) == model.parent(s)
            assert lin.is_reset(s) == model.is_reset(s)
        # intervals: top down, disjoint, exactly lineage(s) minus genesis.
        ivs = lin.intervals(s)
        assert all(lo <= hi for lo, hi in ivs)
        assert all(ivs[k][0] > ivs[k + 1][1] for k in range(len(ivs) - 1))
        assert sorted(_expand(ivs)) == sorted(x for x in model.lineage(s) if x > 0)
        resets_on_path = sum(1 for x in model.lineage(s) if x > 0 and model.is_reset(x))
        assert len(ivs) <= resets_on_path + 1
        for t in range(head + 1):
            assert lin.on_lineage(t, of=s) == (t in model.lineage(s)), (t, s)
    assert lin.is_active(head + 1) is False
    assert sorted(_expand(lin.active_intervals())) == sorted(x for x in active if x > 0)

    # Branch tree.
    reset_seqs = [s for s in range(1, head + 1) if model.is_reset(s)]
    assert [r for r, _ in lin.resets] == reset_seqs
    expected_tree = []
    for bid in [0, *reset_seqs]:
        members = [s for s in range(head + 1) if model.branch_of(s) == bid]
        origin = 0 if bid == 0 else model.parent(bid)
        expected_tree.append(
            Branch(
                id=bid,
                origin_seq=origin,
                parent=None if bid == 0 else model.branch_of(origin),
                tip=max([bid, *members]),
                active=model.branch_of(head) == bid,
            )
        )
    assert lin.branches() == expected_tree

    # Abandoned: lineage(R - 1) above the target, for every reset R.
    for r in reset_seqs:
        ab = lin.abandoned(r)
        assert ab.target == model.parent(r)
        expected = sorted(x for x in model.lineage(r - 1) if x > ab.target)
        assert sorted(_expand(list(ab.seqs))) == expected
    # Every seq that is not active was abandoned by some reset.
    left_behind = {x for r in reset_seqs for x in _expand(list(lin.abandoned(r).seqs))}
    assert set(range(head + 1)) - active <= left_behind


def test_lineage_refuses_out_of_order_and_bad_targets() -> None:
    lin = Lineage()
    lin.observe(1)
    with pytest.raises(ValueError, match="does not follow"):
        lin.observe(3)
    with pytest.raises(ValueError, match="does not precede"):
        lin.observe(2, target=2)
    with pytest.raises(ValueError, match="outside"):
        lin.branch_of(5)
    with pytest.raises(KeyError):
        lin.abandoned(1)


# -- cost: is_active does not walk the log ------------------------------------------------


def _long_lineage(scale: int) -> Lineage:
    """Same shape of resets, history `scale` times longer."""
    lin = Lineage()
    seq = 0
    for block in range(4):
        for _ in range(25 * scale):
            seq += 1
            lin.observe(seq)
        seq += 1
        lin.observe(seq, target=seq - 1 - 10 * scale * (block % 2 + 1))
    for _ in range(25 * scale):
        seq += 1
        lin.observe(seq)
    return lin


def test_is_active_cost_does_not_grow_with_history() -> None:
    small, big = _long_lineage(1), _long_lineage(2_000)
    assert big.head > 1000 * small.head / 10
    for frac in (0.1, 0.5, 0.9):
        s_small, s_big = int(small.head * frac), int(big.head * frac)
        assert count_calls(small.is_active, s_small) == count_calls(big.is_active, s_big)
        assert count_calls(small.branch_of, s_small) == count_calls(big.branch_of, s_big)

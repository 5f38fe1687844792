"""The reflog's pure logic (reynd/core/reflog.py, Lineage.newest_resets): property tests.

Random histories of moves: paging newest first visits every reset record
once, in order; `undo --steps N` targets the seq just before the Nth newest
reset record; the mode of each move says whether its target was on the
lineage of the tip it left.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reynd.core.lineage import Lineage
from reynd.core.reflog import mode_of, undo_target
from reynd.core.tags import Tags
from reynd.protocol import errors

# A history: each step appends `plain` records, then (maybe) a reset to a fraction of the head.
_STEPS = st.lists(st.tuples(st.integers(1, 5), st.floats(0, 1) | st.none()), max_size=30)


def _build(steps: list[tuple[int, float | None]]) -> tuple[Lineage, list[int]]:
    lineage = Lineage()
    resets = []
    for plain, where in steps:
        lineage.observe_plain_through(lineage.head + plain)
        if where is not None:
            target = int(where * lineage.head)
            lineage.observe(lineage.head + 1, target)
            resets.append(lineage.head)
    return lineage, resets


@given(_STEPS, st.integers(1, 7))
def test_paging_newest_first_visits_every_reset_once(
    steps: list[tuple[int, float | None]], limit: int
) -> None:
    lineage, resets = _build(steps)
    seen: list[int] = []
    cursor: int | None = None
    while True:
        page = lineage.newest_resets(cursor, limit + 1)
        more = len(page) > limit
        seen += [seq for seq, _ in page[:limit]]
        if not more:
            break
        cursor = page[limit - 1][0]
    assert seen == resets[::-1]


@given(_STEPS, st.integers(1, 40))
def test_undo_targets_the_seq_before_the_nth_newest_move(
    steps: list[tuple[int, float | None]], n: int
) -> None:
    lineage, resets = _build(steps)
    if n > len(resets):
        with pytest.raises(errors.NothingToDo, match=f"moved {len(resets)} times"):
            undo_target(lineage, n)
        return
    reset, target = undo_target(lineage, n)
    assert reset == resets[-n] and target == reset - 1


@given(_STEPS)
def test_a_move_is_an_undo_exactly_when_its_target_was_on_the_tip_it_left(
    steps: list[tuple[int, float | None]],
) -> None:
    lineage, resets = _build(steps)
    for seq in resets:
        target = lineage.target_of(seq)
        # Walk the lineage of the tip the move left, by parents: the definition.
        cur, on = seq - 1, target == 0
        while cur > 0 and not on:
            on = cur == target
            cur = lineage.parent(cur)
        assert mode_of(lineage, seq, target, "checkout") == ("undo" if on else "fork_switch")
        assert mode_of(lineage, seq, target, "act_turn") == "act_turn"


_TAG_OPS = st.lists(
    st.tuples(st.sampled_from(["good", "bad", "v1"]), st.integers(-1, 50)), max_size=40
)


@given(_TAG_OPS, st.integers(0, 45))
def test_tags_as_of_a_floor_then_the_rest_make_the_same_table(
    ops: list[tuple[str, int]], floor: int
) -> None:
    """What `state/retained` keeps (the table below the floor) plus the records above it
    rebuild exactly the table of every record: what a start after GC relies on."""
    records = [(seq, name, target) for seq, (name, target) in enumerate(ops, start=1)]
    whole = Tags()
    whole.extend(records)
    base = whole.as_of(floor)
    again = Tags(base)
    again.extend([r for r in records if r[0] >= floor])
    assert again.all() == whole.all()
    assert whole.between(floor, 10**9) == [r for r in records if r[0] >= floor]
    for tag in whole.all():
        assert tag.name in whole.naming(tag.target)

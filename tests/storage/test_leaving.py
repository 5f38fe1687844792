"""Lineage.leaving and arriving (issue 25: reapply, preview): what a move of the tip
abandons and lands on, against a model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_lineage import _build, _expand, scripts


@settings(max_examples=300, deadline=None)
@given(scripts, st.integers(0, 10_000))
def test_leaving_is_lineage_of_head_off_lineage_of_target(
    script: list[int | None], pick: int
) -> None:
    lin, model = _build(script)
    target = pick % (model.head + 1)
    kept = set(model.lineage(target))
    expected = sorted(x for x in model.lineage(model.head) if x not in kept)
    ivs = lin.leaving(target)
    assert _expand(ivs) == expected  # ascending, disjoint, exact
    assert all(lo <= hi for lo, hi in ivs)


@settings(max_examples=300, deadline=None)
@given(scripts, st.integers(0, 10_000))
def test_arriving_is_lineage_of_target_off_lineage_of_head(
    script: list[int | None], pick: int
) -> None:
    """Lineage.arriving (issue 25, preview): what a move of the tip lands on."""
    lin, model = _build(script)
    target = pick % (model.head + 1)
    kept = set(model.lineage(model.head))
    expected = sorted(x for x in model.lineage(target) if x not in kept)
    ivs = lin.arriving(target)
    assert _expand(ivs) == expected  # ascending, disjoint, exact
    assert all(lo <= hi for lo, hi in ivs)

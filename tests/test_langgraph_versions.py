"""ReyndSaver's channel versions (pure): they sort as strings in the order they were made,
after an older saver's too, and a fork makes new ones."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from hypothesis import given
from hypothesis import strategies as st

from reynctl.langgraph.versions import next_version


def older(n: int) -> str:
    """A version as the saver before this one made it (12-digit count, 8 hex digits)."""
    return f"{n:012}.{n * 2654435761 % 2**32:08x}"


@given(st.integers(0, 10**9 - 52), st.integers(1, 50))  # 9 digits: up to 10^9
def test_versions_sort_in_the_order_they_were_made(start: int, steps: int) -> None:
    made = [older(start)]  # a thread an older saver wrote, going on with this one
    for _ in range(steps):
        made.append(next_version(made[-1]))
    assert sorted(made) == made and len(set(made)) == len(made)
    assert max(made) == made[-1]  # what LangGraph takes as the channel's latest
    assert all(len(v) == 16 for v in made[1:])


@given(st.none() | st.integers(0, 10**6))
def test_a_first_version_or_one_after_a_plain_count_sorts_after_it(current: int | None) -> None:
    v = next_version(current)
    assert int(v.split(".")[0]) == (current or 0) + 1
    if current is not None:
        assert v > older(current) and v > f"{current:09}.zzzzzz"


def test_a_fork_makes_versions_no_branch_holds() -> None:
    base = next_version(None)
    forks = {next_version(base) for _ in range(1000)}
    assert len(forks) == 1000  # 32 random bits each

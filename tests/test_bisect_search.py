"""The pure search of `reynctl bisect` (reynctl/bisect/search.py), exhaustively.

For any number of candidates, any first bad one, any set of checkpoints whose test
cannot tell (exit 125): the search ends, names the first bad checkpoint exactly when
no skipped one hides it (else a set holding it), never tests a seq twice, and takes at
most ceil(log2(candidates)) steps plus one per skip it met.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reynctl.bisect.search import Inconsistent, Verdict, next_probe, outcome


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[int], int, set[int]]:
    """(candidates: seqs ascending, index of the first bad, seqs whose test skips)."""
    n = draw(st.integers(1, 300))
    gaps = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    seqs = [sum(gaps[: i + 1]) for i in range(n)]
    first_bad = draw(st.integers(0, n - 1))
    skips = draw(st.sets(st.sampled_from(seqs[:-1]), max_size=n // 3)) if n > 1 else set()
    return seqs, first_bad, skips


@given(histories())
def test_the_search_finds_the_first_bad_within_the_bound(
    case: tuple[list[int], int, set[int]],
) -> None:
    seqs, k, skips = case
    verdicts: dict[int, Verdict] = {}
    steps = 0
    while (probe := next_probe(seqs, verdicts)) is not None:
        assert probe not in verdicts and probe != seqs[-1]
        steps += 1
        i = seqs.index(probe)
        verdicts[probe] = "skip" if probe in skips else "bad" if i >= k else "good"
    met = sum(v == "skip" for v in verdicts.values())
    assert steps <= math.ceil(math.log2(len(seqs))) + met
    found = outcome(seqs, verdicts)
    if found.first_bad is not None:
        assert found.first_bad == seqs[k]
        assert found.possible == (seqs[k],)
        assert found.last_good == (seqs[k - 1] if k else None)
    else:
        assert seqs[k] in found.possible
        assert all(s in skips for s in found.possible[:-1])


def test_without_untested_candidates_the_bad_seq_is_the_answer() -> None:
    assert next_probe([7], {}) is None
    assert outcome([7], {}).first_bad == 7
    assert outcome([3, 7], {3: "good"}).last_good == 3


def test_a_bad_below_a_good_is_refused_with_what_to_do() -> None:
    with pytest.raises(Inconsistent, match="bisect reset"):
        next_probe([1, 2, 3, 4], {2: "bad", 3: "good"})
    with pytest.raises(Inconsistent, match="seq 4 is bad"):
        outcome([1, 2, 3, 4], {4: "good"})

"""The binary search of `reynctl bisect`, pure: verdicts in, the next seq to test out.

The candidates are the checkpoints on lineage(bad) above the good seq, oldest first,
ending with the bad one itself. Badness is monotone along a lineage, so the first bad
checkpoint is the one just above the newest good and at or below the oldest bad. Each
step tests the median of the candidates in that window that have no verdict yet: the
possible answers halve, so it takes at most ceil(log2(len(candidates))) steps, plus
one per skipped checkpoint it happened to test. A window whose untested candidates were
all skipped ends the search with the answer narrowed to them and the first bad.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Inconsistent", "Outcome", "Verdict", "next_probe", "outcome", "untested"]

Verdict = Literal["good", "bad", "skip"]


class Inconsistent(ValueError):
    """A checkpoint marked bad lies below one marked good on the same lineage."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """`first_bad`: found; else None and `possible` lists where it may be (skipped ones and
    the oldest bad). `last_good`: the newest good candidate (None: the good seq itself)."""

    first_bad: int | None
    possible: tuple[int, ...]
    last_good: int | None


def _window(candidates: Sequence[int], verdicts: Mapping[int, Verdict]) -> tuple[int, int]:
    """(lo, hi): indexes of the newest good (-1: none) and the oldest bad above it."""
    lo = max((i for i, s in enumerate(candidates) if verdicts.get(s) == "good"), default=-1)
    # The last candidate is the bad seq the search started from, whatever was said of it.
    last = len(candidates) - 1
    hi = min((i for i, s in enumerate(candidates) if verdicts.get(s) == "bad"), default=last)
    if lo >= min(hi, last):
        raise Inconsistent(
            f"seq {candidates[min(hi, last)]} is bad but the later seq {candidates[lo]} was "
            "marked good: the search assumes once bad, bad from there on (see `reynctl "
            "bisect log`, then `reynctl bisect reset` and start again)"
        )
    return lo, hi


def untested(candidates: Sequence[int], verdicts: Mapping[int, Verdict]) -> list[int]:
    """The candidates that may still be the first bad one and have no verdict."""
    lo, hi = _window(candidates, verdicts)
    return [s for s in candidates[lo + 1 : hi] if s not in verdicts]


def next_probe(candidates: Sequence[int], verdicts: Mapping[int, Verdict]) -> int | None:
    """The seq to test next, or None when the search is over."""
    left = untested(candidates, verdicts)
    if not left:
        return None
    # Of u untested, the one at index u // 2 leaves at most u // 2 of them either way.
    return left[len(left) // 2]


def outcome(candidates: Sequence[int], verdicts: Mapping[int, Verdict]) -> Outcome:
    """What the verdicts so far establish (final once `next_probe` is None)."""
    lo, hi = _window(candidates, verdicts)
    skipped = tuple(s for s in candidates[lo + 1 : hi] if verdicts.get(s) == "skip")
    last_good = candidates[lo] if lo >= 0 else None
    if skipped:
        return Outcome(None, (*skipped, candidates[hi]), last_good)
    return Outcome(candidates[hi], (candidates[hi],), last_good)

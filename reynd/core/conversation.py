"""Two message histories compared as conversations (pure): a shared start, then each side's own.

A history only grows at its end on one lineage, so two states of one agent share a
prefix (everything up to their fork) and differ after it: the messages only the older
side has were removed, those only the newer side has were added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["shared_prefix", "split_histories"]

T = TypeVar("T")


def split_histories(before: Sequence[T], after: Sequence[T]) -> tuple[int, list[T], list[T]]:
    """(common, removed, added): the length of the shared prefix, then what follows it in
    `before` and in `after`."""
    common = shared_prefix(before, after)
    return common, list(before[common:]), list(after[common:])


def shared_prefix(before: Sequence[T], after: Sequence[T]) -> int:
    """How many leading elements two sequences share (by `==`), compared in C.

    Equal prefixes nest, so the longest is found by halving, each step comparing
    only the slice it adds: at most about twice the elements, each pair compared
    by the list's own `==` (which takes an object shared by both sides as equal at
    once, as two states forked from one share their messages). A Python loop over
    10^4 messages took tens of milliseconds.
    """
    if type(before) is not type(after):  # a list never equals a tuple
        before, after = list(before), list(after)
    n = min(len(before), len(after))
    if before[:n] == after[:n]:
        return n
    lo, hi = 0, n  # before[:lo] == after[:lo]; before[:hi] != after[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if before[lo:mid] == after[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo

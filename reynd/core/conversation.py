"""Two message histories compared as conversations (pure): a shared start, then each side's own.

A history only grows at its end on one lineage, so two states of one agent share a
prefix (everything up to their fork) and differ after it: the messages only the older
side has were removed, those only the newer side has were added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["split_histories"]

T = TypeVar("T")


def split_histories(before: Sequence[T], after: Sequence[T]) -> tuple[int, list[T], list[T]]:
    """(common, removed, added): the length of the shared prefix, then what follows it in
    `before` and in `after`."""
    common = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        common += 1
    return common, list(before[common:]), list(after[common:])

"""Channel versions: a count, then a random part (pure).

LangGraph compares versions with `>` and `max`, so they must sort as strings
in the order they were made: the count is zero-padded. The random part makes
a fork from a past checkpoint give new versions, never one already stored
(values are kept by version). Every checkpoint record repeats the versions of
the channels it changed several times over (the values, their bases, the
version maps and what each node has seen), so they are short: 16 characters.
"""

from __future__ import annotations

import random
from typing import Any, Final

__all__ = ["next_version"]

_WIDTH: Final = 9  # digits of the count: sorts right up to 10^9 versions of a thread
_ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_RANDOM_CHARS: Final = 6  # 62^6 > 2^32: 32 random bits


def next_version(current: Any) -> str:
    """The version after `current` (None, an int, or a string this saver or an older one made).

    An older saver's versions have a 12-digit count: a 9-digit one with a
    higher count still sorts after them (it has fewer leading zeros).
    """
    n = int(current.split(".")[0]) if isinstance(current, str) else int(current or 0)
    bits = random.getrandbits(32)
    tail = []
    for _ in range(_RANDOM_CHARS):
        bits, digit = divmod(bits, len(_ALPHABET))
        tail.append(_ALPHABET[digit])
    return f"{n + 1:0{_WIDTH}}.{''.join(tail)}"

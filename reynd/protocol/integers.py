"""JSON numbers where an integer is expected: 5.0 is the integer 5, as JSON Schema says.

The OpenRPC document types counts and seqs as `"type": "integer"`, and JSON
Schema counts a number with a zero fraction (5.0) as an integer: a client
validating against the document may send one. msgspec refuses a float for
an int; `convert` retries each such refusal with that one value made an int
(when it is integral and within 64 bits), so the daemon accepts what its
document describes, and nothing else changes (a float field, or free-form
data, keeps its 5.0).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

__all__ = ["FLOAT_FOR_INT", "convert"]

# "Expected `int`, got `float`", "Expected `int | null`, got `float`"...
FLOAT_FOR_INT: Final = re.compile(r"Expected `[^`]*\bint\b[^`]*`, got `float`")
_SEGMENT: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")
_INT64: Final = 2**63


def convert(value: Any, type_: Any) -> Any:
    """msgspec.convert(value, type_), taking an integral float where an int is expected.

    `value` is the caller's own decoded JSON: it may be changed in place.
    """
    while True:
        try:
            return msgspec.convert(value, type_)
        except msgspec.ValidationError as exc:
            if not _make_int(value, str(exc)):
                raise


def _make_int(root: Any, message: str) -> bool:
    """Turn the float the message points at into an int; False if it cannot be one."""
    reason, sep, path = message.partition(" - at `$")
    if not sep or FLOAT_FOR_INT.fullmatch(reason) is None:
        return False
    keys: list[str | int] = []
    rest = path.rstrip("`")
    pos = 0
    while pos < len(rest):
        m = _SEGMENT.match(rest, pos)
        if m is None:
            return False  # a key msgspec quotes: leave the refusal as it is
        keys.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not keys:
        return False
    parent = root
    try:
        for key in keys[:-1]:
            parent = parent[key]
        number = parent[keys[-1]]
    except (KeyError, IndexError, TypeError):
        return False
    if not isinstance(number, float) or not number.is_integer() or abs(number) >= _INT64:
        return False
    parent[keys[-1]] = int(number)
    return True

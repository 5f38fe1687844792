"""msgspec's validation messages, said plainly: what a value must be, not which C type failed.

msgspec reports "Expected `int` >= 0" or "Object contains unknown field `x`";
people (and the scripts that show them the message) read "must be 0 or more"
and "unknown field `x`" better. Only the wording changes: the field path is
found separately (`validation_details`), and a message this
module does not know is kept as msgspec wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

import msgspec

from reynd.protocol.names import PATTERN_RULES

__all__ = ["plain_reason", "validation_details"]

_TYPES: Final = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
    "bytes": "base64 bytes",
}


def _kind(spec: str) -> str:
    """`int | null` -> "an integer or null"."""
    return " or ".join(_TYPES.get(part.strip(), f"`{part.strip()}`") for part in spec.split("|"))


def _bound(op: str, value: str) -> str:
    value = value.removesuffix(".0")
    return {
        ">=": f"{value} or more",
        ">": f"more than {value}",
        "<=": f"{value} or less",
        "<": f"less than {value}",
    }[op]


def _pattern(quoted: str) -> str:
    """A failed pattern: the rule it stands for when names.py words it, else the pattern."""
    rule = PATTERN_RULES.get(quoted[1:-1].replace("\\\\", "\\"))
    if rule is not None:
        return f"must be {rule}"
    return f"holds a character or form not allowed here (it must match {quoted})"


def _length(kind: str, op: str, value: str) -> str:
    unit = {"str": "characters", "bytes": "bytes"}.get(kind, "items")
    return f"must have {_bound(op, value)} {unit}"


_RULES: Final[tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...]] = (
    (
        re.compile(r"Expected `([^`]+)`, got `([^`]+)`"),
        lambda m: f"must be {_kind(m[1])}, not {_kind(m[2])}",
    ),
    (
        re.compile(r"Expected `([^`]+)` of length (>=|>|<=|<) (\d+)"),
        lambda m: _length(m[1], m[2], m[3]),
    ),
    (
        re.compile(r"Expected `([^`]+)` (>=|>|<=|<) (-?[\d.e+-]+)"),
        lambda m: f"must be {_bound(m[2], m[3])}",
    ),
    (re.compile(r"Expected `str` matching regex (.+)"), lambda m: _pattern(m[1])),
    (re.compile(r"Object missing required field `([^`]+)`"), lambda m: f"`{m[1]}` is required"),
    (re.compile(r"Object contains unknown field `([^`]+)`"), lambda m: f"unknown field `{m[1]}`"),
    (re.compile(r"Invalid enum value (.+)"), lambda m: f"{m[1]} is not one of the allowed values"),
    (re.compile(r"Integer value out of range"), lambda m: "the integer is out of range"),
    (
        re.compile(r"Number out of range"),
        lambda m: "the number is out of range (no double holds it)",
    ),
)


def plain_reason(reason: str) -> str:
    """msgspec's `reason` (without its ` - at $.path` suffix) in plain words."""
    for pattern, say in _RULES:
        m = pattern.fullmatch(reason)
        if m is not None:
            return say(m)
    return reason


def validation_details(exc: msgspec.ValidationError) -> tuple[str, str]:
    """(field, reason) from msgspec's message, e.g. ("seq", "must be an integer, not a string").

    msgspec says `... - at `$.a.b`` for nested values and names the field
    inside the reason for missing or unknown ones; the field is the dotted
    path from the params (or file) root, "" when the message names none.
    """
    text = str(exc)
    reason, sep, path = text.partition(" - at `")
    field = path.rstrip("`").removeprefix("$").removeprefix(".") if sep else ""
    # "Object missing required field `seq`" / "Object contains unknown field `foo`"
    _, tick, rest = reason.partition("field `")
    if tick:
        name = rest.split("`", 1)[0]
        field = f"{field}.{name}" if field else name
    return field, plain_reason(reason)

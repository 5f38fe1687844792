"""Bases of every method's params and result Structs, and the method definition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from reynd.protocol import errors

__all__ = ["SEQ_RANGE_ERRORS", "MethodDef", "Params", "Result"]


class Params(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Base of method params: unknown fields are refused with -32602.

    A client sends only the fields it sets (`omit_defaults`): a param added
    later, left at its default, reaches an older daemon as it always did, not
    as an unknown field it refuses.
    """


class Result(msgspec.Struct, kw_only=True):
    """Base of method results: clients ignore fields they do not know."""


@dataclass(frozen=True)
class MethodDef:
    """One method: its types, what it does, and the errors it may return."""

    name: str
    params: type[Params]
    result: Any
    summary: str
    errors: tuple[type[errors.ReyndError], ...] = field(default=())
    mutating: bool = False


# Any method that takes a seq may say it does not exist or was collected.
SEQ_RANGE_ERRORS = (errors.SeqOutOfRange, errors.BelowFloor)

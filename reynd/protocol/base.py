"""Bases of every method's params and result Structs."""

from __future__ import annotations

import msgspec

__all__ = ["Params", "Result"]


class Params(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of method params: unknown fields are refused with -32602."""


class Result(msgspec.Struct, kw_only=True):
    """Base of method results: clients ignore fields they do not know."""

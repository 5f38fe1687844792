"""The messages of the workload's turns, shared by reynd's side and the peer's."""

from __future__ import annotations


def user_text(i: int) -> str:
    return f"Please fix the failing check in module {i % 37}, request {i}"


def assistant_text(i: int) -> str:
    return f"Done: updated the config and ran the tests for request {i}; all green."

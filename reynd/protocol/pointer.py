"""The order of JSON pointers in `state.diff` results, shared by the daemon and its clients."""

from __future__ import annotations

__all__ = ["path_order"]


def path_order(path: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key of a JSON pointer: segment by segment, indices as numbers (/4 before /10)."""
    return tuple((0, int(s)) if s.isascii() and s.isdigit() else (1, s) for s in path.split("/"))

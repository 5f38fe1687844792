"""Checkpoints (without their values) stored as what changed since their parent.

Consecutive checkpoints of a thread share almost everything: the versions of
every channel (`channel_versions`) and what each node has seen
(`versions_seen`) change in a few entries per super-step. A checkpoint whose
parent this saver holds decoded is stored as a diff against it, in plain
JSON; every `MAX_DEPTH` diffs (or when a changed value is not plain JSON),
it is stored whole through the serializer, so a read applies at most that
many diffs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_DEPTH", "Decoded", "apply_diff", "diff", "plain"]

MAX_DEPTH: Final = 16
_NESTED: Final = ("channel_versions", "versions_seen")


@dataclass(slots=True)
class Decoded:
    """A checkpoint dict as LangGraph gave it, and how many diffs lead to it."""

    id: str
    value: dict[str, Any]
    depth: int


def plain(value: Any) -> bool:
    """True when JSON gives `value` back with the same types (no tuples, bytes, objects)."""
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    return False


def _changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    missing = object()
    changed = {k: v for k, v in new.items() if old.get(k, missing) != v}
    return changed, [k for k in old if k not in new]


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """What turns `old` into `new`, or None when a changed value is not plain JSON."""
    top_old = {k: v for k, v in old.items() if k not in _NESTED}
    top_new = {k: v for k, v in new.items() if k not in _NESTED}
    out: dict[str, Any] = {}
    changed, removed = _changes(top_old, top_new)
    if changed:
        out["set"] = changed
    if removed:
        out["del"] = removed
    for key in _NESTED:
        if key not in new or not isinstance(old.get(key), dict):
            if key in new:
                out.setdefault("set", {})[key] = new[key]
            continue
        changed, removed = _changes(old[key], new[key])
        if changed:
            out[key] = changed
        if removed:
            out[f"{key}.del"] = removed
    return out if plain(out) else None


def apply_diff(old: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """`old` with the diff `d` applied (a new dict; `old` is left as it is)."""
    new = {**old, **d.get("set", {})}
    for key in d.get("del", ()):
        new.pop(key, None)
    for key in _NESTED:
        if key in d or f"{key}.del" in d:
            nested = {**old.get(key, {}), **d.get(key, {})}
            for k in d.get(f"{key}.del", ()):
                nested.pop(k, None)
            new[key] = nested
    return new

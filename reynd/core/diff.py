"""Differences between two states, as JSON-pointer paths (pure)."""

from __future__ import annotations

from typing import Any

from reynd.protocol.pointer import path_order

__all__ = ["diff_values", "escape", "json_patch", "path_order"]


def json_patch(changes: list[tuple[str, str, Any, Any]]) -> list[dict[str, Any]]:
    """`diff_values`' changes as an RFC 6902 patch that turns `before` into `after`.

    A list only grows or shrinks at its end here, so the removals go first, from the
    highest index down (each leaves the indices below it in place), then the
    replacements, then the additions from the lowest index up.
    """
    ordered = sorted(changes, key=lambda c: path_order(c[0]))
    removes = [{"op": "remove", "path": p} for p, op, _, _ in reversed(ordered) if op == "remove"]
    replaces = [
        {"op": "replace", "path": p, "value": a} for p, op, _, a in ordered if op == "change"
    ]
    adds = [{"op": "add", "path": p, "value": a} for p, op, _, a in ordered if op == "add"]
    return removes + replaces + adds


def escape(key: str) -> str:
    """A key as one JSON-pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def diff_values(before: Any, after: Any, path: str = "") -> list[tuple[str, str, Any, Any]]:
    """(path, op, before, after) for every difference between two builtin values.

    Dicts compare by key; lists by index (history grows at its end, so an
    append shows as `add` at the new indices); anything else by equality.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[tuple[str, str, Any, Any]] = []
        for key in before.keys() | after.keys():
            sub = f"{path}/{escape(str(key))}"
            if key not in after:
                out.append((sub, "remove", before[key], None))
            elif key not in before:
                out.append((sub, "add", None, after[key]))
            else:
                out.extend(diff_values(before[key], after[key], sub))
        return sorted(out, key=lambda c: path_order(c[0]))
    if isinstance(before, list) and isinstance(after, list):
        out = []
        for i in range(max(len(before), len(after))):
            sub = f"{path}/{i}"
            if i >= len(after):
                out.append((sub, "remove", before[i], None))
            elif i >= len(before):
                out.append((sub, "add", None, after[i]))
            else:
                out.extend(diff_values(before[i], after[i], sub))
        return out
    if before == after and type(before) is type(after):
        return []
    return [(path, "change", before, after)]

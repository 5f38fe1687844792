"""Differences between two states, as JSON-pointer paths (pure)."""

from __future__ import annotations

from typing import Any

import msgspec

from reynd.core.conversation import shared_prefix
from reynd.protocol.pointer import path_order
from reynd.protocol.state import AgentState

__all__ = ["agent_changes", "diff_values", "escape", "json_patch", "path_order"]


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


Change = tuple[str, str, Any, Any]  # (path, op, before, after)


def agent_changes(before: AgentState, after: AgentState) -> list[Change]:
    """`diff_values` of the two agents as builtins, without converting their shared history.

    Two states of an agent share most of their history (it grows at its end): its
    shared start is found on the structs (`shared_prefix`, in C; a message holds
    strings only, so equal structs are equal JSON), and only the rest is converted
    and compared, its paths then counted from the cut. Equal to
    `diff_values(to_builtins(before), to_builtins(after))` (tests/test_state_diff.py).
    """
    cut = shared_prefix(before.history, after.history)
    if cut == 0:
        return diff_values(msgspec.to_builtins(before), msgspec.to_builtins(after))
    replace = msgspec.structs.replace
    changes = diff_values(
        msgspec.to_builtins(replace(before, history=before.history[cut:])),
        msgspec.to_builtins(replace(after, history=after.history[cut:])),
    )
    # Shifting every history index by `cut` keeps their order and path_order's.
    return [(_shifted(path, cut), op, b, a) for path, op, b, a in changes]


def _shifted(path: str, by: int) -> str:
    if not path.startswith("/history/"):
        return path
    index, _, rest = path[len("/history/") :].partition("/")
    return f"/history/{int(index) + by}" + (f"/{rest}" if rest else "")


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
        for i in range(_same_prefix(before, after), max(len(before), len(after))):
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


# Lists shorter than this are compared element by element only.
_PREFIX_MIN = 32  # not Final: a test raises it to get the element-wise comparison alone
_encode = msgspec.json.encode


def _same_prefix(before: list[Any], after: list[Any]) -> int:
    """How many leading elements the lists share as JSON values, found at C speed.

    A history grows at its end: two states of an agent share most of it. Equal
    JSON encodings mean no difference at all (unlike `==`, they tell 1, 1.0 and
    true apart); the longest equal prefix is found by halving, about four
    encodes of the list in all. Elements whose encodings differ but whose
    values do not (dict keys in another order) are left to the element-wise
    comparison, which then finds nothing for them.
    """
    n = min(len(before), len(after))
    if n < _PREFIX_MIN:
        return 0
    lo, hi = 0, n  # before[:lo] == after[:lo] as JSON; no prefix longer than hi is
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _encode(before[lo:mid]) == _encode(after[lo:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo

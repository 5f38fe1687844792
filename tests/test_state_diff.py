"""state.diff: what changed between two seqs, as JSON-pointer operations.

Pure: applying the operations diff_values reports to `before` gives
`after` (hypothesis), and so does their RFC 6902 form applied by jsonpatch.
Real daemon: an agent that appears or disappears is one `add` or `remove`
at `/`, and paths come in document order (/4 before /10).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given
from hypothesis import strategies as st

from reynd.core.diff import diff_values, json_patch
from tests.harness import Daemon

leaves = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=30,
)


def _unescape(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


def _apply(doc: Any, changes: list[tuple[str, str, Any, Any]]) -> Any:
    """A JSON-pointer patch applier, written apart from reynd/core/diff.py."""
    if changes and changes[0][0] == "":
        return changes[0][3]
    doc = copy.deepcopy(doc)
    # A list shrinks from its end: remove the highest index first.
    removes = [c for c in changes if c[1] == "remove"]
    ordered = [c for c in changes if c[1] != "remove"] + removes[::-1]
    for path, op, _before, after in ordered:
        *parents, last = [_unescape(s) for s in path.split("/")[1:]]
        target = doc
        for seg in parents:
            target = target[int(seg)] if isinstance(target, list) else target[seg]
        if isinstance(target, list):
            i = int(last)
            if op == "remove":
                del target[i]
            elif op == "add":
                target.insert(i, after)
            else:
                target[i] = after
        elif op == "remove":
            del target[last]
        else:
            target[last] = after
    return doc


@given(values, values)
def test_applying_the_diff_gives_the_after_value(before: Any, after: Any) -> None:
    changes = diff_values(before, after)
    assert _apply(before, changes) == after
    assert (changes == []) == (before == after and type(before) is type(after))


@given(st.dictionaries(st.text(max_size=3), values), st.dictionaries(st.text(max_size=3), values))
def test_the_json_patch_applies_by_rfc_6902(before: Any, after: Any) -> None:
    """json_patch, applied by an RFC 6902 implementation not ours (jsonpatch), turns
    before into after: removals from the highest index down, then replacements, then adds
    (state.diff's `patch`, over documents keyed by agent name as there)."""
    patch = json_patch(diff_values(before, after))
    assert jsonpatch.apply_patch(before, patch) == after


def test_paths_come_in_document_order() -> None:
    before = {"h": list(range(3))}
    after = {"h": list(range(12))}
    paths = [c[0] for c in diff_values(before, after)]
    assert paths == [f"/h/{i}" for i in range(3, 12)]


def test_an_agent_born_or_gone_is_one_add_or_remove(daemon: Daemon) -> None:
    daemon.call("wal.append", {"agent": "ada", "kind": "agent.created"})
    for i in range(11):
        daemon.call(
            "wal.append",
            {
                "agent": "ada",
                "kind": "message.received",
                "data": {"message_id": f"m{i}", "text": "x"},
            },
        )
    tip = daemon.call("daemon.status")["head"]
    born = daemon.call("state.diff", {"from_seq": 0, "to_seq": tip})["agents"]["ada"]
    assert [(c["path"], c["op"]) for c in born] == [("/", "add")]
    assert born[0]["before"] is None and born[0]["after"]["name"] == "ada"
    gone = daemon.call("state.diff", {"from_seq": tip, "to_seq": 0})["agents"]["ada"]
    assert [(c["path"], c["op"]) for c in gone] == [("/", "remove")]
    assert gone[0]["after"] is None and gone[0]["before"]["name"] == "ada"
    grown = daemon.call("state.diff", {"from_seq": 2, "to_seq": tip})["agents"]["ada"]
    paths = [c["path"] for c in grown if c["op"] == "add"]
    indices = [int(p.rsplit("/", 1)[1]) for p in paths if p.rsplit("/", 1)[1].isdigit()]
    assert indices == sorted(indices) and len(indices) >= 10, paths

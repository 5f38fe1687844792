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
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.conversation import shared_prefix
from reynd.core.diff import agent_changes, diff_values, json_patch
from reynd.protocol import events as ev
from reynd.protocol.state import AgentState
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


# Values Python's == takes as equal though JSON does not (1, 1.0, true): the fast prefix must
# still report them changed, as the element-wise comparison does.
_TWINS = st.sampled_from(
    [(1, True), (0, False), (1, 1.0), (2, 2.0), ({"a": 1, "b": 2}, {"b": 2, "a": 1})]
)
_small = leaves | st.dictionaries(st.text(max_size=2), leaves, max_size=3)
_long = st.lists(_small, min_size=32, max_size=48)


@settings(max_examples=60)
@given(_long, st.lists(_small, max_size=5), st.lists(_small, max_size=5), st.data())
def test_a_long_shared_history_diffs_as_element_by_element(
    shared: list[Any], tail_a: list[Any], tail_b: list[Any], data: st.DataObject
) -> None:
    import reynd.core.diff as d

    before, after = [*shared, *tail_a], [*copy.deepcopy(shared), *tail_b]
    if data.draw(st.booleans()):  # one element of the shared part a twin on one side
        i = data.draw(st.integers(0, len(shared) - 1))
        one, other = data.draw(_TWINS)
        before[i], after[i] = {"v": one}, {"v": other}
    fast = diff_values(before, after)
    saved = d._PREFIX_MIN
    d._PREFIX_MIN = 10**9  # the element-wise comparison alone: the reference
    try:
        slow = diff_values(before, after)
    finally:
        d._PREFIX_MIN = saved
    assert fast == slow
    assert _apply(before, fast) == after


def test_state_get_keeps_the_last_messages_of_each_history(daemon: Daemon) -> None:
    """`history_last` (a page that shows the end of a long conversation): a cut copy, the
    state itself untouched."""
    from tests.runtime_helpers import create_builtin, send

    create_builtin(daemon, "ada")
    first = send(daemon, "ada", "one")["boundary_seq"]
    for text in ("two", "three"):
        send(daemon, "ada", text)
    whole = daemon.call("state.get")["agents"]["ada"]["history"]
    n = len(whole)
    assert n >= 6  # three turns, each a question and what answered it
    last = daemon.call("state.get", {"history_last": 2})
    assert last["agents"]["ada"]["history"] == whole[-2:]
    assert last["history_from"] == {"ada": n - 2}
    assert daemon.call("state.get")["agents"]["ada"]["history"] == whole  # not cut in place
    assert daemon.call("state.get", {"history_last": n})["history_from"] == {}
    none = daemon.call("state.get", {"history_last": 0, "agent": "ada"})
    assert none["agents"]["ada"]["history"] == [] and none["history_from"] == {"ada": n}
    then = daemon.call("state.get", {"seq": first})["agents"]["ada"]["history"]
    past = daemon.call("state.get", {"seq": first, "history_last": 1})
    assert past["agents"]["ada"]["history"] == then[-1:]
    assert past["history_from"] == {"ada": len(then) - 1}
    with daemon.connect() as c:
        bad = c.request("state.get", {"history_last": -1})
    assert bad["error"]["code"] == -32602 and "history_last" in bad["error"]["message"]


messages = st.builds(
    ev.Message,
    role=st.sampled_from(["user", "assistant"]),
    content=st.sampled_from(["", "a", "b"]),
    tool_calls=st.lists(st.builds(ev.ToolCall, id=st.just("c"), name=st.just("t")), max_size=1).map(
        tuple
    ),
)


def _agent(history: list[ev.Message], turns: int) -> AgentState:
    return AgentState(
        name="a",
        session="s",
        executor="e",
        options={},
        created_seq=1,
        applied_seq=turns,
        history=history,
        turns_completed=turns,
    )


@settings(max_examples=300)
@given(
    st.lists(messages, max_size=40),
    st.lists(messages, max_size=8),
    st.lists(messages, max_size=8),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.booleans(),
)
def test_agent_changes_equal_the_diff_of_the_whole_agents(
    shared: list[ev.Message],
    mine: list[ev.Message],
    theirs: list[ev.Message],
    turns: tuple[int, int],
    copied: bool,
) -> None:
    """The shared history is found on the structs and left unconverted: the changes are
    those of diff_values over both agents whole (shared or equal message objects)."""
    other = [msgspec.structs.replace(m) for m in shared] if copied else list(shared)
    before, after = _agent(shared + mine, turns[0]), _agent(other + theirs, turns[1])
    whole = diff_values(msgspec.to_builtins(before), msgspec.to_builtins(after))
    assert agent_changes(before, after) == whole
    cut = shared_prefix(before.history, after.history)
    naive = next(
        (i for i, (x, y) in enumerate(zip(before.history, after.history, strict=False)) if x != y),
        min(len(before.history), len(after.history)),
    )
    assert cut == naive

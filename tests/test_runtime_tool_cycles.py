"""Never half a tool cycle in the history an executor sees (pure function and real daemon)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reynd.protocol.events import Message, ToolCall
from reynd.runtime.history import SanitizedHistory, complete_tool_cycles
from tests.harness import Daemon
from tests.runtime_helpers import (
    create_program,
    kill_stray,
    pid_gone,
    read_pid,
    records,
    send,
    wait_open_step,
    wait_turn_end,
)
from tests.runtime_program import half_cycle

IDS = ["c0", "c1", "c2"]  # few ids: reuse across cycles is part of the search

Kind = tuple[str, tuple[str, ...]]  # ("user" | "text" | "calls" | "result", ids)

kinds = st.one_of(
    st.just(("user", ())),
    st.just(("text", ())),
    st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True).map(
        lambda ids: ("calls", tuple(ids))
    ),
    st.sampled_from(IDS).map(lambda i: ("result", (i,))),
)


def build(spec: list[Kind]) -> list[Message]:
    """Messages with unique contents `#i`, so each output message names its input index."""
    out = []
    for i, (kind, ids) in enumerate(spec):
        if kind == "user":
            out.append(Message(role="user", content=f"#{i}"))
        elif kind == "text":
            out.append(Message(role="assistant", content=f"#{i}"))
        elif kind == "calls":
            calls = tuple(ToolCall(id=c, name="lookup") for c in ids)
            out.append(Message(role="assistant", content=f"#{i}", tool_calls=calls))
        else:
            out.append(Message(role="tool", content=f"#{i}", tool_call_id=ids[0]))
    return out


def index(m: Message) -> int:
    return int(m.content[1:])


def complete_cycles(history: list[Message]) -> dict[int, set[int]]:
    """Complete cycles of `history` (provider rules): call message index -> its result indexes.

    A cycle is complete when the tool messages right after the calling message
    answer every one of its calls.
    """
    out: dict[int, set[int]] = {}
    for i, m in enumerate(history):
        if m.role != "assistant" or not m.tool_calls:
            continue
        wanted = {c.id for c in m.tool_calls}
        results: dict[str, int] = {}
        j = i + 1
        while j < len(history) and history[j].role == "tool":
            tid = history[j].tool_call_id
            if tid in wanted and tid not in results:
                results[tid] = j
            j += 1
        if set(results) == wanted:
            out[i] = set(results.values())
    return out


def wire(history: list[Message]) -> list[dict[str, Any]]:
    return [
        {
            "role": m.role,
            "tool_call_id": m.tool_call_id,
            "tool_calls": [{"id": c.id} for c in m.tool_calls],
        }
        for m in history
    ]


def open_tail(history: list[Message]) -> set[int]:
    """Indexes of an incomplete cycle at the very end (call and the results it has)."""
    i = len(history)
    while i > 0 and history[i - 1].role == "tool":
        i -= 1
    if i == 0 or not history[i - 1].tool_calls or (i - 1) in complete_cycles(history):
        return set()
    ids = {c.id for c in history[i - 1].tool_calls}
    seen: set[str] = set()
    keep = {i - 1}
    for j in range(i, len(history)):
        tid = history[j].tool_call_id
        if tid in ids and tid not in seen:
            seen.add(tid)
            keep.add(j)
    return keep


@given(st.lists(kinds, max_size=14), st.booleans())
def test_complete_tool_cycles_never_leaves_half_a_cycle(spec: list[Kind], tail: bool) -> None:
    history = build(spec)
    out = complete_tool_cycles(history, keep_open_tail=tail)
    kept = [index(m) for m in out]
    tail_kept = open_tail(history) if tail else set()

    # Open calls at the end carry ids "c0".."c2": name them as the turn's own.
    cleaned = [m for m in out if index(m) not in tail_kept]
    assert half_cycle(wire(cleaned)) is None, (spec, kept)
    assert tail_kept <= set(kept), (spec, kept)
    assert kept == sorted(kept) and len(set(kept)) == len(kept)  # a subsequence, in order
    # Plain messages always stay; every complete cycle stays whole.
    plain = [i for i, m in enumerate(history) if m.role != "tool" and not m.tool_calls]
    assert set(plain) <= set(kept), (spec, kept)
    for call, results in complete_cycles(history).items():
        assert call in kept and results <= set(kept), (spec, kept, call)
    assert complete_tool_cycles(out, keep_open_tail=tail) == out  # idempotent


def test_complete_tool_cycles_examples() -> None:
    u, t = ("user", ()), ("text", ())
    call, res0 = ("calls", ("c0",)), ("result", ("c0",))

    def run(*spec: Kind) -> list[int]:
        return [index(m) for m in complete_tool_cycles(build(list(spec)))]

    assert run(u, call, res0, t) == [0, 1, 2, 3]
    assert run(u, call) == [0]  # cut after the call
    assert run(u, res0) == [0]  # a result without its call
    assert run(u, call, u, call, res0) == [0, 2, 3, 4]  # an id reused by a later cycle
    assert run(u, ("calls", ("c0", "c1")), res0, t) == [0, 3]  # half answered


def test_rewind_between_call_and_result_never_shows_half_a_cycle(
    daemon: Daemon, short_tmp: Path
) -> None:
    """The program fails its step (exit 3) if a history it is handed has half a cycle."""
    prog = short_tmp / "prog"
    create_program(daemon, "c", prog)
    done = send(daemon, "c", "call result msg")
    assert done["outcome"] == "completed", done
    turn = done["turn_id"]
    (call_memo,) = records(daemon, kind="step.committed", turn_id=turn, step=0)

    # A global rewind lands between the call (step 0) and its result (step 1).
    reset = daemon.call("rewind", {"seq": call_memo["seq"]})
    ended = wait_turn_end(daemon, turn, after=reset["reset_seq"])
    assert ended["outcome"] == "completed", ended

    # Cancel between call and result, then a new message: that turn sees no half cycle.
    sent = send(daemon, "c", "call sleep", wait=False)
    pid = read_pid(prog / f"{sent['turn_id']}.s1.pid")
    try:
        wait_open_step(daemon, "c", 1)
        daemon.call("agents.cancel", {"agent": "c"})
        assert wait_turn_end(daemon, sent["turn_id"])["outcome"] == "cancelled"
        assert pid_gone(pid)
    finally:
        kill_stray(pid)
    after = send(daemon, "c", "msg")
    assert after["outcome"] == "completed", after

    requests = [json.loads(line) for line in (prog / "requests.jsonl").read_text().splitlines()]
    # The first turn (4 steps), its re-run steps 1-3, the cancelled turn, the last turn.
    assert [(r["turn_id"], r["step"]) for r in requests] == [
        *[(turn, s) for s in (0, 1, 2, 3, 1, 2, 3)],
        (sent["turn_id"], 0),
        (sent["turn_id"], 1),
        (after["turn_id"], 0),
        (after["turn_id"], 1),
    ]
    for request in requests:
        assert half_cycle(request["history"], open_tail=request["turn_id"]) is None, request
    # The step re-run after the rewind sees its turn's own call, open, at the end.
    rerun = requests[4]["history"]
    assert rerun[-1]["tool_calls"][0]["id"] == f"{turn}.call"
    # The turn after the cancel sees the complete cycle only: the cut one is gone whole.
    last = requests[-1]["history"]
    calls = [m for m in last if m.get("tool_calls")]
    assert [c["tool_calls"][0]["id"] for c in calls] == [f"{turn}.call"]


@given(st.lists(kinds, max_size=20), st.lists(st.integers(0, 4), max_size=8), st.booleans())
def test_sanitized_history_matches_a_full_recompute_as_history_grows(
    spec: list[Kind], cuts: list[int], tail: bool
) -> None:
    """The runner's incremental view equals complete_tool_cycles of the whole history."""
    full = build(spec)
    grown: list[Message] = []
    view = SanitizedHistory()
    pos = 0
    for step in [*cuts, len(full)]:
        grown.extend(full[pos : pos + step])  # appended in place, like the reducer does
        pos = min(len(full), pos + step)
        assert view.of(grown, keep_open_tail=tail) == complete_tool_cycles(
            grown, keep_open_tail=tail
        ), (spec, cuts, pos)
    rebuilt = list(grown)  # a rewind hands the runner a new list: it must start over
    assert view.of(rebuilt[: len(rebuilt) // 2]) == complete_tool_cycles(
        rebuilt[: len(rebuilt) // 2]
    )

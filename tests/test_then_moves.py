"""`then` on act_turn.rewind and on undo (issue 25), against the real daemon.

As with rewind's `then`: the message lands right after the reset record, in
its atomic batch (a SIGKILL inside the batch leaves neither), its turn runs,
and a message to an agent missing as of the target is refused with nothing
written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reynd.protocol import errors
from reynd.storage.crashpoints import CRASH_ENV
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import (
    DEADLINE,
    create_builtin,
    error_of,
    head,
    kill_daemon,
    records,
    restart,
    send,
    wait_turn_end,
)
from tests.test_edit_retry import then, user_texts


def _planned_turn(d: Daemon) -> tuple[str, int, int]:
    """A finished turn with act-steps: its id, the seq of its step 2's memo, and a seq
    before it where the agent is idle (a move there starts nothing)."""
    create_builtin(d, "a")
    idle = head(d)
    done = send(d, "a", "/plan a; b; c")
    (step,) = records(d, kind="step.committed", turn_id=done["turn_id"], step=2)
    return done["turn_id"], int(step["seq"]), idle


def test_act_turn_rewind_then_delivers_after_the_resumed_turn(daemon: Daemon) -> None:
    turn, target, _ = _planned_turn(daemon)
    res = daemon.call(
        "act_turn.rewind", {"agent": "a", "seq": target, "then": then("a", "and then?")}
    )
    sent = res["sent"]
    assert sent["seq"] == res["reset_seq"] + 1 and sent["outcome"] is None
    (msg,) = records(daemon, kind="message.received", text="and then?")
    assert msg["seq"] == sent["seq"]
    # The resumed turn ends first, then the new message's turn runs.
    resumed = wait_turn_end(daemon, turn, after=res["reset_seq"])
    ended = wait_turn_end(daemon, sent["turn_id"], after=sent["seq"])
    assert resumed["outcome"] == ended["outcome"] == "completed"
    assert resumed["seq"] < ended["seq"]
    assert user_texts(daemon, "a")[-1] == "and then?"


def test_undo_then_waits_for_the_new_turn(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    send(daemon, "a", "one")
    two = send(daemon, "a", "two")
    moved = daemon.call("rewind", {"seq": two["seq"] - 1})
    res = daemon.call("undo", {"then": then("a", "three", wait=True)})
    assert res["target"] == moved["reset_seq"] - 1
    sent = res["sent"]
    assert sent["seq"] == res["reset_seq"] + 1
    assert sent["outcome"] == "completed" and sent["boundary_seq"] > sent["seq"]
    assert user_texts(daemon, "a") == ["one", "two", "three"]


@pytest.mark.parametrize("method", ["undo", "act_turn.rewind"])
def test_then_to_a_missing_agent_writes_nothing(daemon: Daemon, method: str) -> None:
    _, target, idle = _planned_turn(daemon)
    params: dict[str, Any] = {"then": then("nobody", "hi")}
    if method == "act_turn.rewind":
        params |= {"agent": "a", "seq": target}
    else:
        daemon.call("rewind", {"seq": idle})  # a move to undo
    moves = len(records(daemon, kind="rewind"))
    err = error_of(daemon, method, params)
    assert err["code"] == errors.UnknownAgent.code, err
    assert "nobody" in err["message"]
    assert len(records(daemon, kind="rewind")) == moves  # no reset record, no message
    assert not records(daemon, kind="message.received", text="hi")


@pytest.mark.parametrize("method", ["undo", "act_turn.rewind"])
def test_sigkill_inside_the_batch_leaves_neither(short_tmp: Path, method: str) -> None:
    d = start_daemon(short_tmp, env={CRASH_ENV: "wal.mid_batch:1"})
    try:
        _, target, idle = _planned_turn(d)
        if method == "undo":
            # A first move to undo; the crash point counts only atomic batches.
            d.call("rewind", {"seq": idle})
            params: dict[str, Any] = {"then": then("a", "after")}
        else:
            params = {"agent": "a", "seq": target, "then": then("a", "after")}
        tip = head(d)
        with d.connect() as c, pytest.raises(EOFError):
            c.request(method, params)
        d.wait()
        assert [r["kind"] for r in records(d, after=tip)] == ["rewind"]  # torn after it
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        assert head(d) == tip and not records(d, after=tip)
        assert "after" not in user_texts(d, "a")
        assert send(d, "a", "still serves", timeout=DEADLINE)["outcome"] == "completed"
    finally:
        d.stop()

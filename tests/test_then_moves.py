"""`then` on act_turn.rewind and on undo, and `replaces` (issue 25), against the real daemon.

As with rewind's `then`: the message lands right after the reset record, in
its atomic batch (a SIGKILL inside the batch leaves neither), its turn runs,
and a message to an agent missing as of the target is refused with nothing
written. An edit with `reapply` does not deliver the message it replaces
again (`replaces`, what `reynctl edit --reapply messages` sends).
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
from tests.test_edit_retry import create_external, inbox_texts, then, user_texts
from tests.test_reynctl_cli import ok, reynctl


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


def _three_messages(d: Daemon) -> list[dict[str, Any]]:
    """Three messages waiting in an external agent's inbox: their send results."""
    create_external(d, "x")
    return [send(d, "x", text, wait=False) for text in ("one", "two", "three")]


def test_an_edit_with_reapply_does_not_deliver_the_replaced_message_again(
    daemon: Daemon,
) -> None:
    _, two, three = _three_messages(daemon)
    params = {"seq": two["seq"] - 1, "then": then("x", "two, edited"), "reapply": "messages"}
    res = daemon.call("checkout", {**params, "replaces": two["seq"]})
    assert [(r["message_id"], r["from_seq"]) for r in res["reapplied"]] == [
        (three["message_id"], three["seq"])
    ]
    assert res["reapplied"][0]["seq"] == res["sent"]["seq"] + 1 == res["reset_seq"] + 2
    assert inbox_texts(daemon, "x") == ["one", "two, edited", "three"]
    # Without `replaces`, the old text comes back too: what `replaces` is for.
    daemon.call("undo", {})
    res = daemon.call("checkout", params)
    assert inbox_texts(daemon, "x") == ["one", "two, edited", "two", "three"]


def test_replaces_is_checked_before_anything_is_written(daemon: Daemon) -> None:
    one, two, _ = _three_messages(daemon)
    created = one["seq"] - 1  # agent.created: not a message
    for params, says in (
        ({"seq": created, "replaces": one["seq"]}, "`replaces` needs `then`"),
        (
            {"seq": created, "replaces": created, "then": then("x", "hi"), "reapply": "messages"},
            f"seq {created}, which is not a received message",
        ),
        ({"seq": created, "replaces": 10**6, "then": then("x", "hi")}, "not a received message"),
    ):
        err = error_of(daemon, "checkout", params)
        assert err["code"] == -32602 and says in err["message"], err
    assert not records(daemon, kind="rewind")
    assert inbox_texts(daemon, "x") == ["one", "two", "three"]
    assert two["seq"] == head(daemon) - 1


def test_reynctl_edit_reapply_skips_the_edited_message(daemon: Daemon) -> None:
    _, two, three = _three_messages(daemon)
    out = ok(
        reynctl(
            "edit",
            str(two["seq"]),
            "two, edited",
            "--reapply",
            "messages",
            "--yes",
            "--no-wait",
            sock=daemon.socket,
        )
    )
    assert f"message {three['message_id']} to x delivered again" in out
    assert two["message_id"] not in out
    assert inbox_texts(daemon, "x") == ["one", "two, edited", "three"]


def test_reynctl_undo_send_waits_for_the_new_turn(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    send(daemon, "a", "one")
    two = send(daemon, "a", "two")
    daemon.call("rewind", {"seq": two["seq"] - 1})
    out = ok(reynctl("undo", "--send", "a", "three", "--yes", sock=daemon.socket))
    (msg,) = records(daemon, kind="message.received", text="three")
    assert f"at seq {msg['seq']})" in out and "completed" in out
    assert records(daemon, kind="rewind", seq=msg["seq"] - 1)  # right after the undo's record
    assert user_texts(daemon, "a") == ["one", "two", "three"]
    bad = reynctl("undo", "--wait", "--yes", sock=daemon.socket)
    assert bad.returncode == 2 and "--wait/--no-wait need --send AGENT TEXT" in bad.stderr


def test_reynctl_act_turn_rewind_send(daemon: Daemon) -> None:
    turn, target, _ = _planned_turn(daemon)
    out = ok(
        reynctl(
            "act-turn-rewind",
            "a",
            str(target),
            "--send",
            "a",
            "and then?",
            "--yes",
            sock=daemon.socket,
        )
    )
    (msg,) = records(daemon, kind="message.received", text="and then?")
    assert records(daemon, kind="rewind", seq=msg["seq"] - 1)  # in the reset record's batch
    assert f"inside turn {turn}" in out
    assert f"at seq {msg['seq']})" in out and "completed" in out  # waited for its turn
    assert user_texts(daemon, "a")[-1] == "and then?"
    tip = head(daemon)
    bad = reynctl(
        "act-turn-rewind", "a", str(target), "--dry-run", "--send", "a", "x", sock=daemon.socket
    )
    assert bad.returncode == 2 and "--dry-run previews the move alone: drop --send" in bad.stderr
    assert head(daemon) == tip

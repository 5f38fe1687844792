"""Edit and retry (issue 25): `rewind {then}` / `checkout {then}` against the real daemon.

The reset record and the new message are one atomic batch: the message lands
right after the reset record, the turn runs at once, bad input is refused
before anything is written, and a SIGKILL inside the batch leaves neither.
"""

from __future__ import annotations

import json
import threading
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
    state,
    wait_turn_end,
    wait_until,
)
from tests.test_reynctl_cli import ok, reynctl
from tests.test_subscribe import next_notify


def then(agent: str, text: str, **more: Any) -> dict[str, Any]:
    return {"agent": agent, "text": text, **more}


def user_texts(d: Daemon, agent: str, seq: int | None = None) -> list[str]:
    return [m["content"] for m in state(d, agent, seq)["history"] if m["role"] == "user"]


def test_edit_abandons_the_old_message_and_runs_the_new_one(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    first = send(daemon, "a", "first")
    second = send(daemon, "a", "second")
    res = daemon.call(
        "rewind",
        {"seq": second["seq"] - 1, "then": then("a", "second, edited", wait=True)},
    )
    sent = res["sent"]
    assert sent["seq"] == res["reset_seq"] + 1
    assert sent["turn_id"] == f"t{sent['seq']}"
    assert sent["outcome"] == "completed" and sent["boundary_seq"] > sent["seq"]
    # The old message stays on the branch the reset left; the new one is on the new branch.
    (old,) = records(daemon, kind="message.received", text="second")
    (new,) = records(daemon, kind="message.received", text="second, edited")
    assert new["seq"] == sent["seq"] and old["seq"] == second["seq"]
    assert user_texts(daemon, "a") == ["first", "second, edited"]
    assert user_texts(daemon, "a", second["boundary_seq"]) == ["first", "second"]
    assert first["outcome"] == "completed"
    err = error_of(daemon, "rewind", {"seq": second["seq"]})
    assert err["code"] == errors.NotActive.code  # abandoned: only checkout reaches it
    # A checkout of the old message's turn end brings the old conversation back.
    daemon.call("checkout", {"seq": second["boundary_seq"]})
    assert user_texts(daemon, "a") == ["first", "second"]


def test_checkout_then_starts_the_turn_without_waiting(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    one = send(daemon, "a", "one")
    res = daemon.call("checkout", {"seq": one["seq"] - 1, "then": then("a", "uno")})
    sent = res["sent"]
    assert sent["seq"] == res["reset_seq"] + 1 and sent["outcome"] is None
    ended = wait_turn_end(daemon, sent["turn_id"], after=sent["seq"])
    assert ended["outcome"] == "completed"
    assert user_texts(daemon, "a") == ["uno"]


def test_a_tag_address_takes_then_too(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    one = send(daemon, "a", "one")
    daemon.call("tags.set", {"name": "good", "seq": one["boundary_seq"]})
    send(daemon, "a", "two")
    res = daemon.call("rewind", {"tag": "good", "then": then("a", "deux", wait=True)})
    assert res["resolved_from"] == "tag" and res["sent"]["outcome"] == "completed"
    assert user_texts(daemon, "a") == ["one", "deux"]


@pytest.mark.parametrize(
    ("params", "code", "says"),
    [
        ({"then": then("nobody", "hi")}, errors.UnknownAgent.code, "no agent 'nobody'"),
        ({"then": then("a", "")}, errors.InvalidParams.code, "text"),
        ({"then": {"agent": "a"}}, errors.InvalidParams.code, "text"),
        ({"then": then("late", "hi")}, errors.UnknownAgent.code, "as of the rewind's target"),
    ],
)
def test_bad_then_is_refused_before_anything_is_written(
    daemon: Daemon, params: dict[str, Any], code: int, says: str
) -> None:
    create_builtin(daemon, "a")
    sent = send(daemon, "a", "hello")
    target = head(daemon)
    create_builtin(daemon, "late")  # exists at the tip, not as of `target`
    tip = head(daemon)
    err = error_of(daemon, "rewind", {"seq": target, **params})
    assert err["code"] == code and says in err["message"], err
    assert head(daemon) == tip and not records(daemon, after=tip)
    assert sent["outcome"] == "completed"


def test_sigkill_inside_the_batch_leaves_neither(short_tmp: Path) -> None:
    """Killed while writing the message (the reset record is whole in the file): neither stays."""
    d = start_daemon(short_tmp, env={CRASH_ENV: "wal.mid_batch:1"})
    try:
        create_builtin(d, "a")
        one = send(d, "a", "one", timeout=DEADLINE)
        tip = head(d)
        with d.connect() as c, pytest.raises(EOFError):
            c.request("rewind", {"seq": one["seq"] - 1, "then": then("a", "uno")})
        d.wait()
        assert [r["kind"] for r in records(d, after=tip)] == ["rewind"]  # torn after it
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        assert head(d) == tip and not records(d, after=tip)
        assert user_texts(d, "a") == ["one"]
    finally:
        d.stop()


def test_sigkill_once_the_batch_is_durable_keeps_both_and_the_turn_runs(
    short_tmp: Path,
) -> None:
    d = start_daemon(short_tmp, env={CRASH_ENV: "reset.durable:1"})
    try:
        create_builtin(d, "a")
        one = send(d, "a", "one")
        tip = head(d)
        with d.connect() as c, pytest.raises(EOFError):
            c.request("rewind", {"seq": one["seq"] - 1, "then": then("a", "uno")})
        d.wait()
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        reset, message = records(d, after=tip)[:2]
        assert reset["kind"] == "rewind" and reset["seq"] == tip + 1
        assert message["kind"] == "message.received" and message["seq"] == tip + 2
        ended = wait_turn_end(d, f"t{tip + 2}", after=tip + 2)
        assert ended["outcome"] == "completed"
        assert user_texts(d, "a") == ["uno"]
    finally:
        d.stop()


# -- reynctl ------------------------------------------------------------------------


def test_reynctl_edit_replaces_the_message_and_waits_for_its_turn(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    send(daemon, "a", "first")
    second = send(daemon, "a", "second")
    out = ok(reynctl("edit", str(second["seq"]), "second, edited", "--yes", sock=daemon.socket))
    assert f"rewound to seq {second['seq'] - 1}" in out and "completed" in out
    assert user_texts(daemon, "a") == ["first", "second, edited"]
    (entry, *_) = daemon.call("reflog.list")["entries"]
    assert entry["reason"] == f"edit of message {second['seq']}"


def test_reynctl_edit_refuses_a_seq_that_is_not_a_message(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    sent = send(daemon, "a", "hello")
    tip = head(daemon)
    proc = reynctl("edit", str(sent["boundary_seq"]), "x", "--yes", sock=daemon.socket)
    assert proc.returncode == 2 and "is not a received message" in proc.stderr, proc.stderr
    assert head(daemon) == tip


def test_reynctl_rewind_send_json_carries_the_message(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    one = send(daemon, "a", "one")
    args = ["--json", "rewind", str(one["seq"] - 1), "--send", "a", "uno", "--no-wait", "-y"]
    res = json.loads(ok(reynctl(*args, sock=daemon.socket)))
    assert res["sent"]["seq"] == res["reset_seq"] + 1 and res["sent"]["outcome"] is None
    wait_turn_end(daemon, res["sent"]["turn_id"], after=res["sent"]["seq"])
    assert user_texts(daemon, "a") == ["uno"]
    proc = reynctl("rewind", "0", "--wait", "-y", sock=daemon.socket)
    assert proc.returncode == 2 and "--send AGENT TEXT" in proc.stderr


# -- reapply ------------------------------------------------------------------------


def create_external(d: Daemon, name: str) -> None:
    """An agent no runner drives: its messages wait in its inbox."""
    d.call("wal.append", {"agent": name, "kind": "agent.created", "data": {}})


def inbox_texts(d: Daemon, agent: str) -> list[str]:
    return [m["text"] for m in state(d, agent)["inbox"]]


def test_reapply_delivers_the_abandoned_messages_again_after_then(daemon: Daemon) -> None:
    create_external(daemon, "x")
    create_builtin(daemon, "a")
    target = head(daemon)
    one = send(daemon, "x", "one", wait=False)
    two = send(daemon, "a", "two")  # its turn ran on the branch the rewind abandons
    three = send(daemon, "x", "three", wait=False)
    res = daemon.call("rewind", {"seq": target, "then": then("x", "zero"), "reapply": "messages"})
    first = res["reset_seq"] + 1
    assert res["sent"]["seq"] == first
    assert [(r["agent"], r["from_seq"], r["seq"]) for r in res["reapplied"]] == [
        ("x", one["seq"], first + 1),
        ("a", two["seq"], first + 2),
        ("x", three["seq"], first + 3),
    ]
    assert [r["message_id"] for r in res["reapplied"]] == [
        one["message_id"],
        two["message_id"],
        three["message_id"],
    ]
    assert inbox_texts(daemon, "x") == ["zero", "one", "three"]
    wait_turn_end(daemon, f"t{first + 2}", after=first + 2)
    assert user_texts(daemon, "a") == ["two"]
    # Nothing more is abandoned by a checkout of the tip's own lineage: a rewind
    # without reapply leaves the inbox as of its target.
    res = daemon.call("rewind", {"seq": res["reset_seq"]})
    assert res["reapplied"] == [] and res["sent"] is None
    assert inbox_texts(daemon, "x") == []


def test_a_waiting_sender_is_told_its_message_was_delivered_again(daemon: Daemon) -> None:
    create_external(daemon, "x")
    target = head(daemon)
    got: list[dict[str, Any]] = []
    waiting = threading.Thread(target=lambda: got.append(send(daemon, "x", "hello")))
    waiting.start()
    (message,) = wait_until(lambda: records(daemon, kind="message.received"), "the message")
    res = daemon.call("rewind", {"seq": target, "reapply": "messages"})
    waiting.join(DEADLINE)
    (redelivered,) = res["reapplied"]
    assert redelivered["from_seq"] == message["seq"]
    (answer,) = got
    assert answer["outcome"] == "redelivered"
    assert answer["redelivered_seq"] == redelivered["seq"] == res["reset_seq"] + 1


def test_reapply_to_an_agent_missing_as_of_the_target_is_refused(daemon: Daemon) -> None:
    target = head(daemon)
    create_external(daemon, "x")
    send(daemon, "x", "hello", wait=False)
    tip = head(daemon)
    err = error_of(daemon, "rewind", {"seq": target, "reapply": "messages"})
    assert err["code"] == errors.UnknownAgent.code and "cannot be delivered again" in err["message"]
    assert head(daemon) == tip and not records(daemon, after=tip)
    err = error_of(daemon, "rewind", {"seq": target, "reapply": "all"})
    assert err["code"] == errors.InvalidParams.code


@pytest.mark.parametrize("nth", [1, 2])
def test_sigkill_inside_a_reapply_batch_leaves_none_of_it(short_tmp: Path, nth: int) -> None:
    d = start_daemon(short_tmp, env={CRASH_ENV: f"wal.mid_batch:{nth}"})
    try:
        create_external(d, "x")
        target = head(d)
        send(d, "x", "one", wait=False)
        send(d, "x", "two", wait=False)
        tip = head(d)
        with d.connect() as c, pytest.raises(EOFError):
            c.request("rewind", {"seq": target, "reapply": "messages"})
        d.wait()
        assert len(records(d, after=tip)) == nth  # torn inside the batch
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        assert head(d) == tip and not records(d, after=tip)
        assert inbox_texts(d, "x") == ["one", "two"]
    finally:
        d.stop()


def test_reynctl_rewind_reapply(daemon: Daemon) -> None:
    create_external(daemon, "x")
    target = head(daemon)
    one = send(daemon, "x", "one", wait=False)
    args = ["rewind", str(target), "--reapply", "messages", "--yes"]
    out = ok(reynctl(*args, sock=daemon.socket))
    assert f"to x delivered again: seq {one['seq']} -> " in out
    assert inbox_texts(daemon, "x") == ["one"]


def test_the_rewinds_notification_says_where_the_messages_went(daemon: Daemon) -> None:
    create_external(daemon, "x")
    target = head(daemon)
    one = send(daemon, "x", "one", wait=False)
    with daemon.connect() as sub:
        sub.call("subscribe", {"topics": ["rewinds"]})
        res = daemon.call(
            "rewind", {"seq": target, "then": then("x", "zero"), "reapply": "messages"}
        )
        note = next_notify(sub)
    assert note["seq"] == res["reset_seq"]
    assert note["data"]["sent"]["seq"] == res["sent"]["seq"] == res["reset_seq"] + 1
    assert note["data"]["reapplied"] == res["reapplied"]
    assert res["reapplied"][0]["from_seq"] == one["seq"]

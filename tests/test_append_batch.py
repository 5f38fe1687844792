"""wal.append_batch: several events for one agent, all or nothing (real daemon, real socket).

One validation pass before anything is written, one fence check, one fsync,
consecutive seqs never interleaved with another writer's, and after a
SIGKILL in the middle of writing the batch, none of it is in the log.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reynd.core.reduce import apply
from reynd.daemon.appends import check_batch
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol.limits import MAX_APPEND_EVENTS
from reynd.protocol.state import RuntimeState
from reynd.storage.crashpoints import CRASH_ENV
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import agents_at, error_of, head, kill_daemon, records, restart, state


def msg(i: int | str, text: str = "hi") -> dict[str, Any]:
    return {"kind": "message.received", "data": {"message_id": f"m{i}", "text": text}}


def batch(d: Daemon, events: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = d.call(
        "wal.append_batch", {"agent": "ext", "events": events, **params}
    )
    return result


def test_a_batch_creates_an_agent_and_uses_it_in_consecutive_seqs(daemon: Daemon) -> None:
    tip = head(daemon)
    events = [
        {"kind": "agent.created"},
        msg(1),
        {"kind": "turn.started", "data": {"turn_id": "t1", "message_id": "m1"}},
        {"kind": "step.started", "data": {"turn_id": "t1", "step": 0}},
    ]
    got = batch(daemon, events, based_on=tip)
    assert got["seqs"] == [tip + 1, tip + 2, tip + 3, tip + 4]
    assert got["branch"] == daemon.call("daemon.status")["branch"]
    assert head(daemon) == tip + 4
    (c,) = state(daemon, "ext")["pending_chains"]
    assert c["turn_id"] == "t1" and c["open_step"] == 0
    # Each record says how many of its batch follow it; the last says nothing.
    more = [r.get("more", 0) for r in records(daemon, after=tip)]
    assert more == [3, 2, 1, 0]


def test_one_bad_event_refuses_the_whole_batch_naming_it(daemon: Daemon) -> None:
    batch(daemon, [{"kind": "agent.created"}])
    tip, before = head(daemon), agents_at(daemon)
    cases: list[tuple[list[dict[str, Any]], int, str]] = [
        # Shape: a field of the wrong type in member 2.
        ([msg(1), msg(2), msg(3, text=5)], -32602, "events[2].data.text"),  # type: ignore[arg-type]
        ([msg(1), {"kind": "message.teleported"}], -32602, "events[1].kind"),
        (
            [msg(1), {"kind": "message.received", "data": {"more": 1}}],
            -32602,
            "events[1].data.more",
        ),
        # Applies: turn t9 takes a message that member 0 did not bring.
        (
            [msg(1), {"kind": "turn.started", "data": {"turn_id": "t9", "message_id": "m7"}}],
            -32012,
            "events[1].data.message_id",
        ),
    ]
    for events, code, field in cases:
        err = error_of(daemon, "wal.append_batch", {"agent": "ext", "events": events})
        assert err["code"] == code, (events, err)
        assert err["data"]["field"].startswith(field), (field, err)
        assert err["message"].startswith(field.split(".")[0]), err
    assert head(daemon) == tip and agents_at(daemon) == before
    assert not records(daemon, after=tip)
    # A member that depends on an earlier one of the same batch is checked against it.
    ok = [msg(7), {"kind": "turn.started", "data": {"turn_id": "t9", "message_id": "m7"}}]
    assert len(batch(daemon, ok)["seqs"]) == 2


def test_empty_and_oversized_batches_are_refused(daemon: Daemon) -> None:
    batch(daemon, [{"kind": "agent.created"}])
    tip = head(daemon)
    err = error_of(daemon, "wal.append_batch", {"agent": "ext", "events": []})
    assert err["code"] == -32602 and err["data"]["field"] == "events"
    too_many = [msg(i) for i in range(MAX_APPEND_EVENTS + 1)]
    err = error_of(daemon, "wal.append_batch", {"agent": "ext", "events": too_many})
    assert err["code"] == -32019
    assert err["data"]["limit_name"] == "max_append_events"
    assert err["data"]["limit"] == MAX_APPEND_EVENTS
    assert head(daemon) == tip
    assert len(batch(daemon, too_many[:MAX_APPEND_EVENTS])["seqs"]) == MAX_APPEND_EVENTS


def test_a_stale_based_on_refuses_the_batch(daemon: Daemon) -> None:
    first = batch(daemon, [{"kind": "agent.created"}, msg(1)])
    seen = batch(daemon, [msg(2)], based_on=first["seqs"][-1])
    daemon.call("rewind", {"seq": first["seqs"][-1]})
    tip = head(daemon)
    err = error_of(
        daemon,
        "wal.append_batch",
        {"agent": "ext", "events": [msg(3), msg(4)], "based_on": seen["seqs"][-1]},
    )
    assert err["code"] == -32005 and err["data"]["head"] == tip
    assert head(daemon) == tip and not records(daemon, after=tip)
    retried = batch(daemon, [msg(3), msg(4)], based_on=tip)
    assert retried["seqs"] == [tip + 1, tip + 2] and retried["branch"] == tip


def test_concurrent_writers_never_interleave_inside_a_batch(daemon: Daemon) -> None:
    names = [f"w{i}" for i in range(4)]
    for name in names:
        daemon.call("wal.append", {"agent": name, "kind": "agent.created"})
    tip = head(daemon)
    got: dict[str, list[list[int]]] = {name: [] for name in names}
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            with daemon.connect() as c:
                for i in range(15):
                    events = [msg(f"{name}-{i}-{k}") for k in range(1 + i % 4)]
                    if i % 3 == 2:  # single appends between the batches
                        r = c.call("wal.append", {"agent": name, **events[0]})
                        got[name].append([r["seq"]])
                    else:
                        r = c.call("wal.append_batch", {"agent": name, "events": events})
                        got[name].append(r["seqs"])
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    by_seq = {r["seq"]: r for r in records(daemon, after=tip)}
    for name, calls in got.items():
        for seqs in calls:
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
            assert {by_seq[s]["agent"] for s in seqs} == {name}
    assert sum(len(s) for c in got.values() for s in c) == head(daemon) - tip


@pytest.mark.parametrize("nth", [1, 3])
def test_sigkill_mid_batch_leaves_none_of_it(short_tmp: Path, nth: int) -> None:
    """Killed while writing member nth (its predecessors are whole in the file): nothing stays."""
    d = start_daemon(short_tmp, env={CRASH_ENV: f"wal.mid_batch:{nth}"})
    try:
        batch(d, [{"kind": "agent.created"}])  # a batch of one writes no glued record
        tip = head(d)
        with d.connect() as c, pytest.raises(EOFError):
            c.request("wal.append_batch", {"agent": "ext", "events": [msg(k) for k in range(4)]})
        d.wait()
        written = [r for r in _lines(d) if r["seq"] > tip]
        assert len(written) == nth  # the batch's first nth records are in the file
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        assert head(d) == tip
        assert state(d, "ext")["inbox"] == []
        assert not records(d, after=tip)
        assert batch(d, [msg(9)])["seqs"] == [tip + 1]
    finally:
        d.stop()


def _lines(d: Daemon) -> list[dict[str, Any]]:
    """Whole records in the WAL files right after the kill (before any recovery)."""
    return records(d)


def test_the_openrpc_document_has_the_method(daemon: Daemon) -> None:
    doc = daemon.call("rpc.discover")
    (method,) = [m for m in doc["methods"] if m["name"] == "wal.append_batch"]
    assert [p["name"] for p in method["params"]] == ["agent", "events", "based_on"]
    codes = {e["code"] for e in method["errors"]}
    assert {-32005, -32019, -32602} <= codes


def test_validating_a_batch_never_changes_the_tips_state() -> None:
    """check_batch applies the batch to a copy: every kind the reducer changes in place."""
    a = "ext"
    setup: list[ev.Event] = [
        ev.AgentCreated(agent=a, executor="external"),
        ev.MessageReceived(agent=a, message_id="m1", text="one"),
        ev.MessageReceived(agent=a, message_id="m2", text="two"),
        ev.TurnStarted(agent=a, turn_id="t1", message_id="m1"),
        ev.StepStarted(agent=a, turn_id="t1", step=0),
        ev.PlanCreated(agent=a, plan_id="p", steps=("a", "b")),
        ev.SkillStarted(agent=a, run_id="r", skill="s"),
        ev.InterventionAsked(agent=a, intervention_id="i1", question="?", turn_id="t1"),
    ]
    state = RuntimeState()
    for seq, e in enumerate(setup, start=1):
        apply(state, msgspec.structs.replace(e, seq=seq))
    before = msgspec.msgpack.encode(state)
    batch_ = [
        ev.StepCommitted(
            agent=a, turn_id="t1", step=0, messages=(ev.Message(role="assistant", content="x"),)
        ),
        ev.PlanStepDone(agent=a, plan_id="p", index=0, result="ok"),
        ev.SkillPhase(agent=a, run_id="r", phase="mid"),
        ev.InterventionAnswered(agent=a, intervention_id="i1", answer="yes"),
        ev.InterventionAnswered(agent=a, intervention_id="i9", answer="early"),  # buffered
        ev.TurnStarted(agent=a, turn_id="t2", message_id="m2"),  # takes m2 from the inbox
        ev.TurnEnded(agent=a, turn_id="t1"),
        ev.SkillEnded(agent=a, run_id="r"),
        ev.MessageReceived(agent=a, message_id="m3", text="three"),
    ]
    check_batch(state, batch_)
    assert msgspec.msgpack.encode(state) == before
    # And the copy did see each event: a batch that depends on its own first event passes,
    # one that repeats a consumed message does not.
    with pytest.raises(errors.ReyndError) as exc:
        check_batch(state, [*batch_[:6], ev.TurnStarted(agent=a, turn_id="t3", message_id="m2")])
    assert exc.value.data["field"].startswith("events[6]")
    assert msgspec.msgpack.encode(state) == before

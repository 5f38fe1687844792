"""External runtimes: typed appends through wal.append, fenced by based_on (real daemon)."""

from __future__ import annotations

from typing import Any

from tests.harness import Daemon
from tests.runtime_helpers import agent, agents_at, error_of, head, records, state


def append(d: Daemon, kind: str, based_on: int | None = None, **data: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"agent": "ext", "kind": kind, "data": data}
    if based_on is not None:
        params["based_on"] = based_on
    result: dict[str, Any] = d.call("wal.append", params)
    return result


def test_external_agent_is_never_run_by_reynd(daemon: Daemon) -> None:
    created = append(daemon, "agent.created")
    assert agent(daemon, "ext")["executor"] == "external"
    msg = append(daemon, "message.received", based_on=created["seq"], message_id="m1", text="hi")
    # An agent reynd runs would start a turn; this one's driver does it itself.
    assert head(daemon) == msg["seq"]
    assert agent(daemon, "ext")["status"] == "idle"
    append(daemon, "turn.started", based_on=msg["seq"], turn_id="x1", message_id="m1")
    started = append(daemon, "step.started", turn_id="x1", step=0)
    assert head(daemon) == started["seq"]
    (c,) = state(daemon, "ext")["pending_chains"]
    assert c["turn_id"] == "x1" and c["open_step"] == 0


def test_stale_writer_is_refused_after_another_clients_rewind(daemon: Daemon) -> None:
    created = append(daemon, "agent.created")
    first = append(daemon, "message.received", based_on=created["seq"], message_id="m1", text="a")
    seen = append(daemon, "message.received", based_on=first["seq"], message_id="m2", text="b")

    # Another client rewinds below what the external runtime last saw.
    rewound = daemon.call("rewind", {"seq": first["seq"]})
    before = agents_at(daemon)
    tip = head(daemon)

    err = error_of(
        daemon,
        "wal.append",
        {
            "agent": "ext",
            "kind": "message.received",
            "data": {"message_id": "m3", "text": "c"},
            "based_on": seen["seq"],
        },
    )
    assert err["code"] == -32005
    assert "abandoned" in err["message"] and "retry" in err["message"]
    assert err["data"]["based_on"] == seen["seq"] and err["data"]["head"] == tip
    # Nothing was applied, nothing written.
    assert head(daemon) == tip and agents_at(daemon) == before
    assert not records(daemon, kind="message.received", message_id="m3")

    # Re-read, retry on the new branch: accepted.
    retried = append(daemon, "message.received", based_on=tip, message_id="m3", text="c")
    assert retried["branch"] == rewound["reset_seq"]
    inbox = [m["message_id"] for m in state(daemon, "ext")["inbox"]]
    assert inbox == ["m1", "m3"]


def test_unknown_kind_and_bad_fields_are_invalid_params_naming_them(daemon: Daemon) -> None:
    append(daemon, "agent.created")
    tip = head(daemon)
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("message.teleported", {}, "message.teleported"),
        ("message.received", {"message_id": "m1", "text": 5}, "text"),
        ("message.received", {"message_id": "m1"}, "text"),
        ("message.received", {"message_id": "m1", "text": "x", "bogus": 1}, "bogus"),
        ("step.started", {"turn_id": "t", "step": "zero"}, "step"),
    ]
    for kind, data, named in cases:
        err = error_of(daemon, "wal.append", {"agent": "ext", "kind": kind, "data": data})
        assert err["code"] == -32602, (kind, data, err)
        assert named in err["message"], (kind, data, err)
    err = error_of(
        daemon, "wal.append", {"agent": "ext", "kind": "message.received", "data": {"seq": 3}}
    )
    assert err["code"] == -32602 and err["data"]["field"] == "data.seq"
    assert head(daemon) == tip

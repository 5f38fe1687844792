"""One rule for agent names and identifiers at every door (real daemon, tests/harness.py).

agents.create and wal.append of agent.created refuse the same names with
-32602 and `data.field`; wal.append validates the identifiers inside `data`
and names the param at fault; a WAL that already holds names the rules now
refuse still opens and serves, and those agents stay addressable by every
method (the rules hold where a name is born, never on lookup or read-back).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.protocol import appendable
from reynd.protocol import events as ev
from reynd.protocol.names import AGENT_NAME_PATTERN
from reynd.protocol.openrpc import openrpc_document
from reynd.storage.store import Store
from tests.harness import Client, Daemon, start_daemon
from tests.runtime_helpers import error_of, head, records, wait_until
from tests.test_reynctl_cli import ok, reynctl

# The rule, written independently of reynd/protocol/names.py (fullmatch, not `$`).
RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

# (name, valid): the names of the report first.
NAMES: list[tuple[str, bool]] = [
    ("", False),
    ("..", False),
    ("a/b", False),
    ("a\x00b", False),
    ("a\nb", False),
    ("x" * 100_000, False),
    ("a\n", False),  # Python's `$` matches before a final newline
    ("\na", False),
    (".hidden", False),
    ("-a", False),
    ("_a", False),
    ("a b", False),
    ("a\tb", False),
    ("a\x1b[2Jb", False),
    ("é", False),
    ("x" * 65, False),
    ("a", True),
    ("0", True),
    ("A-1", True),
    ("a.b_c-d", True),
    ("a..", True),
    ("x" * 64, True),
]


def _id(name: str) -> str:
    return repr(name[:12]) + (f"+{len(name)}" if len(name) > 12 else "")


@pytest.fixture(scope="module")
def client(shared_daemon: Daemon) -> Iterator[Client]:
    with shared_daemon.connect() as c:
        yield c


def _code(c: Client, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(0, result) on success, else (error code, error data)."""
    reply = c.request(method, params)
    if "error" in reply:
        return reply["error"]["code"], reply["error"].get("data", {})
    return 0, reply["result"]


def _create(c: Client, name: str) -> tuple[int, dict[str, Any]]:
    return _code(c, "agents.create", {"name": name})


def _append(c: Client, name: str) -> tuple[int, dict[str, Any]]:
    """The other door that creates: -32007 (exists) once agents.create accepted `name`."""
    return _code(c, "wal.append", {"agent": name, "kind": "agent.created"})


@pytest.mark.parametrize(("name", "valid"), NAMES, ids=[_id(n) for n, _ in NAMES])
def test_both_doors_apply_the_same_name_rule(client: Client, name: str, valid: bool) -> None:
    assert bool(RULE.fullmatch(name)) == valid  # the table itself is right
    created, data = _create(client, name)
    appended, append_data = _append(client, name)
    if valid:
        assert created == 0 and data["name"] == name, data
        assert appended == -32007, append_data
        return
    assert created == -32602, (created, data)
    assert data["field"] == "name" and data["reason"], data
    assert appended == -32602, (appended, append_data)
    assert append_data["field"] == "agent" and append_data["reason"], append_data


# Names that look valid, text that does not, and text near the edges of the rule.
_TEXT = st.one_of(
    st.text(max_size=80),
    st.text(alphabet="aZ09_.-/ \n\r\x00\x1bé\u202e", max_size=70),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,70}", fullmatch=True),
)


@settings(max_examples=150)
@given(name=_TEXT)
def test_both_doors_agree_on_arbitrary_text(client: Client, name: str) -> None:
    created, _ = _create(client, name)
    appended, _ = _append(client, name)
    valid = RULE.fullmatch(name) is not None
    # A valid name may already exist (-32007) from an earlier example: not a refusal.
    assert (created == -32602) == (appended == -32602) == (not valid), (created, appended)


@pytest.mark.parametrize(
    "method",
    [
        "agents.get",
        "agents.send",
        "agents.cancel",
        "agents.configure",
        "state.get",
        "generations.list",
        "interventions.list",
        "act_turn.rewind",
        "events.list",
    ],
)
def test_a_lookup_of_a_name_never_born_is_not_found(client: Client, method: str) -> None:
    """Lookups take any name (an older release may have created it): a missing one is -32006."""
    extras: dict[str, dict[str, Any]] = {
        "agents.send": {"text": "hi"},
        "act_turn.rewind": {"seq": 0},
    }
    extra = extras.get(method, {})
    code, data = _code(client, method, {"agent": "a\nb", **extra})
    if method == "events.list":  # a filter: nothing matches
        assert (code, data["events"]) == (0, []), data
        return
    assert code == -32006 and data["agent"] == "a\nb", (method, code, data)


# -- identifiers inside wal.append's data ---------------------------------------------


@pytest.fixture(scope="module")
def ext(client: Client) -> str:
    """An external agent with one message in its inbox."""
    name = "ext-ids"
    assert _code(client, "wal.append", {"agent": name, "kind": "agent.created"})[0] == 0
    params = {"message_id": "m1", "text": "hi"}
    msg = {"agent": name, "kind": "message.received", "data": params}
    assert _code(client, "wal.append", msg)[0] == 0
    return name


BAD_DATA: list[tuple[str, dict[str, Any], str]] = [
    ("message.received", {"message_id": "m\n2", "text": "x"}, "data.message_id"),
    ("message.received", {"message_id": "m" * 129, "text": "x"}, "data.message_id"),
    ("message.received", {"message_id": "", "text": "x"}, "data.message_id"),
    ("message.received", {"message_id": "m2", "text": "x", "sender": "\x1b[31m"}, "data.sender"),
    ("turn.started", {"turn_id": "t\r1", "message_id": "m1"}, "data.turn_id"),
    ("step.started", {"turn_id": "t1", "step": -1}, "data.step"),
    ("turn.ended", {"turn_id": "t1", "label": "done\nSEQ  KIND"}, "data.label"),
    ("plan.created", {"plan_id": "p1", "steps": ["ok", "b\x00"]}, "data.steps[1]"),
    ("skill.started", {"run_id": "r1", "skill": "s\u202e"}, "data.skill"),
    ("intervention.asked", {"intervention_id": "i\x85", "question": "?"}, "data.intervention_id"),
    (
        "step.committed",
        {"turn_id": "t1", "step": 0, "messages": [{"role": "tool", "tool_call_id": "c\n"}]},
        "data.messages[0].tool_call_id",
    ),
    ("agent.configured", {"executor": "x" * 200}, "data.executor"),
]


@pytest.mark.parametrize(("kind", "data", "field"), BAD_DATA, ids=[b[2] for b in BAD_DATA])
def test_identifiers_in_data_are_checked_and_named(
    shared_daemon: Daemon, ext: str, kind: str, data: dict[str, Any], field: str
) -> None:
    tip = head(shared_daemon)
    err = error_of(shared_daemon, "wal.append", {"agent": ext, "kind": kind, "data": data})
    assert err["code"] == -32602, err
    assert err["data"]["field"] == field and err["data"]["reason"], err
    assert f"`{field}`" in err["message"], err
    assert head(shared_daemon) == tip


def test_free_text_keeps_its_newlines(shared_daemon: Daemon, ext: str) -> None:
    data = {"message_id": "m-text", "text": "line 1\nline 2\ttab"}
    shared_daemon.call("wal.append", {"agent": ext, "kind": "message.received", "data": data})
    inbox = shared_daemon.call("state.get", {"agent": ext})["agents"][ext]["inbox"]
    assert inbox[-1]["text"] == "line 1\nline 2\ttab"


# -- event validation errors name the param ---------------------------------------------


def test_an_unknown_kind_lists_the_valid_ones(shared_daemon: Daemon, ext: str) -> None:
    for kind in ("message.teleported", "rewind", "lost"):
        err = error_of(shared_daemon, "wal.append", {"agent": ext, "kind": kind})
        assert err["code"] == -32602, err
        assert err["data"]["field"] == "kind" and kind in err["data"]["reason"], err
        assert err["data"]["valid"] == list(appendable.KINDS)
        assert "turn.started" in err["message"] and "message.received" in err["message"]
    err = error_of(shared_daemon, "wal.append", {"agent": ext, "kind": "rewind"})
    assert "`rewind` and `checkout`" in err["message"]


SHAPE_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("message.received", {"message_id": "m9", "text": 5}, "data.text"),
    ("message.received", {"message_id": "m9"}, "data.text"),
    ("message.received", {"message_id": "m9", "text": "x", "bogus": 1}, "data.bogus"),
    ("step.started", {"turn_id": "t", "step": "zero"}, "data.step"),
    ("step.committed", {"turn_id": "t", "step": 0, "messages": [{"role": "x"}]}, ""),
    ("message.received", {"seq": 3}, "data.seq"),
    ("message.received", {"agent": "other"}, "data.agent"),
]


@pytest.mark.parametrize(
    ("kind", "data", "field"), SHAPE_ERRORS, ids=[f"{s[0]}:{s[2]}" for s in SHAPE_ERRORS]
)
def test_shape_errors_carry_field_and_reason(
    shared_daemon: Daemon, ext: str, kind: str, data: dict[str, Any], field: str
) -> None:
    field = field or "data.messages[0].role"
    err = error_of(shared_daemon, "wal.append", {"agent": ext, "kind": kind, "data": data})
    assert err["code"] == -32602, err
    assert err["data"]["field"] == field and err["data"]["reason"], err


def test_state_errors_carry_field_and_reason(shared_daemon: Daemon, ext: str) -> None:
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"agent": "nobody-here", "kind": "message.received",
          "data": {"message_id": "m", "text": "x"}}, -32006, "agent"),
        ({"agent": ext, "kind": "agent.created"}, -32007, "agent"),
        ({"agent": ext, "kind": "turn.started", "data": {"turn_id": "t", "message_id": "nope"}},
         -32012, "data.message_id"),
        ({"agent": ext, "kind": "step.started", "data": {"turn_id": "nope", "step": 0}},
         -32012, "data.turn_id"),
        ({"agent": ext, "kind": "plan.step_done", "data": {"plan_id": "nope", "index": 0}},
         -32012, "data.plan_id"),
        ({"agent": ext, "kind": "skill.phase", "data": {"run_id": "nope", "phase": "p"}},
         -32012, "data.run_id"),
    ]  # fmt: skip
    for params, code, field in cases:
        err = error_of(shared_daemon, "wal.append", params)
        assert err["code"] == code, (params, err)
        assert err["data"]["field"] == field and err["data"]["reason"], (params, err)


def test_an_agent_reynd_would_run_needs_an_executor_it_can_build(
    shared_daemon: Daemon, ext: str
) -> None:
    """An unknown executor or bad options would fail every turn (and used to stop the daemon)."""
    idle = "ext-idle"  # no messages: switched to builtin, it has nothing to run
    shared_daemon.call("wal.append", {"agent": idle, "kind": "agent.created"})
    builtin, bad = {"executor": "builtin"}, {"options": {"delay": -1}}
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        (ext, "agent.configured", {"executor": "my-runtime"}, "data.executor"),
        ("ext-new", "agent.created", {"executor": "gpt"}, "data.executor"),
        ("ext-new", "agent.created", {**builtin, **bad}, "data.options.delay"),
        (idle, "agent.configured", {**builtin, **bad}, "data.options.delay"),
        (idle, "agent.configured", builtin, ""),  # accepted
        (idle, "agent.configured", bad, "data.options.delay"),
    ]
    for agent, kind, data, field in cases:
        params = {"agent": agent, "kind": kind, "data": data}
        if not field:
            shared_daemon.call("wal.append", params)
            continue
        err = error_of(shared_daemon, "wal.append", params)
        assert err["code"] == -32602, (data, err)
        assert err["data"]["field"] == field and err["data"]["reason"], (data, err)
        if field == "data.executor":
            assert err["data"]["valid"] == ["builtin", "command", "openai", "external"]


# -- a WAL written before the rules -----------------------------------------------------

OLD_NAMES = ("a/b", "..", "evil\nAGENT  x", "", "x" * 300)


def _write_old_wal(state_dir: Path) -> None:
    """Records with names the door now refuses, written as an older daemon did."""
    with Store.open(state_dir) as store:
        store.append([ev.AgentCreated(agent=n, executor="external") for n in OLD_NAMES])
        store.append(
            [
                ev.MessageReceived(agent="a/b", message_id="m\n1", text="hi", sender="\x1b[2J"),
                ev.TurnStarted(agent="a/b", turn_id="t\n1", message_id="m\n1"),
                ev.TurnEnded(agent="a/b", turn_id="t\n1", label="done\nSEQ  KIND  fake"),
            ]
        )


def _serves_old_names(d: Daemon) -> None:
    assert sorted(d.call("state.get")["agents"]) == sorted(OLD_NAMES)
    listed = [a["name"] for a in d.call("agents.list")["agents"]]
    assert sorted(listed) == sorted(OLD_NAMES)
    (gen,) = d.call("generations.list")["generations"]
    assert gen["agent"] == "a/b" and gen["label"] == "done\nSEQ  KIND  fake"
    # The human tables escape them; --json is the result, exactly.
    table = ok(reynctl("--color", "never", "agents", sock=d.socket))
    assert len(table.splitlines()) == 1 + len(OLD_NAMES), table
    assert "evil\\nAGENT  x" in table
    assert json.loads(ok(reynctl("--json", "agents", sock=d.socket))) == d.call("agents.list")
    gens = ok(reynctl("--color", "never", "generations", sock=d.socket))
    assert len(gens.splitlines()) == 2 and "done\\nSEQ  KIND  fake" in gens, gens
    # Every method reaches them; only a new name must follow today's rule.
    for name in OLD_NAMES:
        assert d.call("agents.get", {"agent": name})["name"] == name
        d.call("wal.append", {"agent": name, "kind": "agent.configured"})
        assert d.call("state.get", {"agent": name})["agents"].keys() == {name}
        assert d.call("agents.cancel", {"agent": name})["cancelled"] == []
    d.call(
        "wal.append",
        {"agent": "a/b", "kind": "message.received", "data": {"message_id": "m2", "text": "x"}},
    )
    err = error_of(d, "wal.append", {"agent": "c/d", "kind": "agent.created"})
    assert err["code"] == -32602 and err["data"]["field"] == "agent"


def test_a_wal_with_old_names_still_opens_and_serves(short_tmp: Path) -> None:
    state_dir = short_tmp / "state"
    _write_old_wal(state_dir)
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        _serves_old_names(d)
        tip = d.call("wal.append", {"agent": "fresh", "kind": "agent.created"})["seq"]
    finally:
        d.stop()
    # Reopened after a clean stop (shutdown snapshot, catalog, audit log): the same.
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        assert head(d) == tip
        d.call("agents.get", {"agent": "fresh"})
        d.call("wal.append", {"agent": "fresh", "kind": "agent.configured"})
        agents = d.call("state.get")["agents"]
        assert sorted(agents) == sorted((*OLD_NAMES, "fresh"))
    finally:
        d.stop()


def test_a_logged_executor_no_one_can_build_fails_the_turn_not_the_daemon(
    short_tmp: Path,
) -> None:
    """Before the door checked executors, wal.append could log one; the daemon must still run."""
    state_dir = short_tmp / "state"
    with Store.open(state_dir) as store:
        store.append(
            [
                ev.AgentCreated(agent="old", executor="my-runtime"),
                ev.MessageReceived(agent="old", message_id="m1", text="hi"),
            ]
        )
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        ended = wait_until(lambda: records(d, kind="turn.ended"), "the turn to end")
        assert ended[0]["outcome"] == "failed" and "my-runtime" in ended[0]["reply"]
        info = d.call("agents.get", {"agent": "old"})
        assert "unknown executor 'my-runtime'" in info["last_error"]
        d.call("daemon.status")
    finally:
        d.stop()  # exit 0 asserted: the daemon never stopped itself


def test_the_openrpc_document_shows_where_names_are_born_and_looked_up() -> None:
    doc = openrpc_document()
    lookups = 0
    for method in doc["methods"]:
        for param in method["params"]:
            if (method["name"], param["name"]) == ("agents.create", "name"):
                assert param["schema"]["pattern"] == AGENT_NAME_PATTERN
                assert param["schema"]["maxLength"] == 64
            elif param["name"] == "agent":
                schema = param["schema"]
                options = schema.get("anyOf", [schema])
                (string,) = [s for s in options if s.get("type") == "string"]
                assert "pattern" not in string, (method["name"], schema)
                assert "existing agent" in string["description"]
                lookups += 1
    assert lookups >= 16  # agents.*, interventions.*, state.*, events.list, replay.*, ...
    assert AGENT_NAME_PATTERN in (Path(__file__).parent.parent / "docs" / "methods.md").read_text()

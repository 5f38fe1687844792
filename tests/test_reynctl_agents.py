"""reynctl's agent-runtime commands end to end: the real `reynctl` against the real daemon.

agents (list/create/show/configure), send, cancel, resolve, interventions,
answer, act-turn-rewind, and `status` with an ambiguous step after a SIGKILL.
Each command is checked for its exit code, its --json output (exactly the
daemon's result) and the sanity of its human output.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from click.testing import CliRunner

from reynctl.cli import cli
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from tests.harness import Daemon, start_daemon
from tests.test_reynctl_cli import _complete, _env, ok, reynctl

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 15.0) -> T:
    """Poll `probe` until it returns something truthy (the daemon runs turns by itself)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def info(d: Daemon, agent: str) -> dict[str, Any]:
    result: dict[str, Any] = d.call("agents.get", {"agent": agent})
    return result


def idle(d: Daemon, agent: str) -> bool:
    i = info(d, agent)
    return i["status"] == "idle" and i["turn_id"] is None


def turn_ended_after(d: Daemon, seq: int) -> bool:
    """A turn generation above `seq` exists (a resumed turn has ended)."""
    gens = d.call("generations.list", {"kind": "turn", "limit": 1})["generations"]
    return bool(gens) and gens[0]["seq"] > seq


def step_open(d: Daemon, agent: str) -> bool:
    """The agent's turn has a step started (durably) and not committed."""
    state = d.call("state.get", {"agent": agent})["agents"][agent]
    return any(c.get("open_step") is not None for c in state["pending_chains"])


def refused(proc: subprocess.CompletedProcess[str], name: str, code: int) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert f"({name}, {code})" in proc.stderr, proc.stderr


def columns_aligned(text: str, header: str) -> None:
    """Every row of a table starts its columns where the header's do."""
    lines = text.splitlines()
    head = lines[0]
    assert head.startswith(header.split(maxsplit=1)[0])
    starts = [head.index(col) for col in header.split()[1:]]
    for line in lines[1:]:
        if not line.strip():
            break  # the notes under a table
        for start in starts:
            assert line[start - 2 : start] == "  " or line[start - 1] == " ", (line, start)


# -- parsing only ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["agents", "create", "ada", "--executor", "gpt"],
        ["agents", "create", "ada", "--option", "nokey"],
        ["agents", "create", "ada", "--option", "=1"],
        ["agents", "create", "ada", "--option", "a=1", "--options", "{}"],
        ["agents", "create", "ada", "--options", "[1]"],
        ["agents", "create", "ada", "--options", "{nope"],
        ["agents", "configure", "ada"],
        ["send", "ada"],
        ["send", "ada", "hi", "--timeout", "0"],
        ["resolve", "ada", "maybe"],
        ["act-turn-rewind", "ada", "x"],
        ["act-turn-rewind", "ada", "-1"],
        ["answer", "ada", "t1.s0"],
    ],
)
def test_usage_errors_exit_2(args: list[str], tmp_path: Path):
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "none.sock"), *args])
    assert result.exit_code == 2, result.output


def test_agent_commands_without_a_daemon_exit_3(tmp_path: Path):
    sock = tmp_path / "none.sock"
    for args in (["agents"], ["send", "ada", "hi"], ["interventions"], ["status"]):
        proc = reynctl(*args, sock=sock)
        assert proc.returncode == 3, args
        assert "no daemon" in proc.stderr


# -- agents ------------------------------------------------------------------------------------


def test_agents_create_list_show_configure(daemon: Daemon):
    sock = daemon.socket
    assert "no agents" in ok(reynctl("agents", sock=sock))
    assert json.loads(ok(reynctl("--json", "agents", sock=sock))) == {"agents": []}

    out = ok(reynctl("--color", "never", "agents", "create", "ada", sock=sock))
    assert "ada (session default)" in out and "builtin" in out and "idle" in out
    raw = ok(
        reynctl(
            "agents", "create", "bob", "-o", "delay=0.25", "--session", "work", "--json", sock=sock
        )
    )
    bob = msgspec.json.decode(raw, type=a.AgentInfo)
    assert (bob.name, bob.session, bob.executor, bob.options) == (
        "bob",
        "work",
        "builtin",
        {"delay": 0.25},
    )
    refused(reynctl("agents", "create", "ada", sock=sock), "agent_exists", -32007)
    # The daemon validates the name (its pattern), not reynctl.
    proc = reynctl("agents", "create", "no spaces", sock=sock)
    assert proc.returncode == 1 and "-32602" in proc.stderr

    table = ok(reynctl("--color", "never", "agents", sock=sock))
    header = "AGENT  SESSION  EXECUTOR  STATUS  TURN  STEP  INBOX  TURNS  CALLS"
    assert table.splitlines()[0].split() == header.split()
    assert [line.split()[0] for line in table.splitlines()[1:]] == ["ada", "bob"]
    columns_aligned(table, header)
    assert json.loads(ok(reynctl("--json", "agents", sock=sock))) == daemon.call("agents.list", {})
    only_work = json.loads(ok(reynctl("--json", "agents", "--session", "work", sock=sock)))
    assert [ag["name"] for ag in only_work["agents"]] == ["bob"]
    # `agents list` is the same as `agents`.
    assert ok(reynctl("--color", "never", "agents", "list", sock=sock)) == table

    shown = ok(reynctl("--color", "never", "agents", "show", "bob", sock=sock))
    for needle in ("agent           bob (session work)", '{"delay":0.25}', "executor calls  0"):
        assert needle in shown, needle
    raw = ok(reynctl("agents", "show", "bob", "--json", sock=sock))
    assert json.loads(raw) == daemon.call("agents.get", {"agent": "bob"})
    refused(reynctl("agents", "show", "nobody", sock=sock), "unknown_agent", -32006)

    raw = ok(
        reynctl("--json", "agents", "configure", "bob", "--options", '{"delay": 0}', sock=sock)
    )
    assert json.loads(raw)["options"] == {"delay": 0}
    raw = ok(reynctl("--json", "agents", "configure", "bob", "-o", "delay=0.5", sock=sock))
    assert json.loads(raw)["options"] == {"delay": 0.5}
    refused(
        reynctl("agents", "configure", "nobody", "-o", "delay=1", sock=sock),
        "unknown_agent",
        -32006,
    )


# -- send / cancel -----------------------------------------------------------------------------


def test_send_waits_for_the_reply_and_boundary(daemon: Daemon):
    sock = daemon.socket
    ok(reynctl("agents", "create", "ada", sock=sock))
    out = ok(reynctl("--color", "never", "send", "ada", "Plan a weekend in Kyoto.", sock=sock))
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert lines["outcome"] == "completed"
    assert "Plan a weekend in Kyoto." in lines["reply"]
    boundary = int(lines["boundary"].split()[1])
    gens = daemon.call("generations.list", {"kind": "turn"})["generations"]
    assert [g["seq"] for g in gens] == [boundary]

    raw = ok(reynctl("--json", "send", "ada", "/plan a; b", sock=sock))
    sent = msgspec.json.decode(raw, type=a.AgentsSendResult)
    assert sent.outcome == "completed" and sent.boundary_seq is not None
    assert sent.turn_id == f"t{sent.seq}"
    assert set(json.loads(raw)) == {
        "message_id",
        "seq",
        "turn_id",
        "boundary_seq",
        "outcome",
        "reply",
        "intervention_id",
        "question",
        "redelivered_seq",
    }

    # `-` reads the message from stdin.
    proc = subprocess.run(
        [sys.executable, "-m", "reynctl", "--socket", str(sock), "--json", "send", "ada", "-"],
        input="from stdin",
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert "from stdin" in json.loads(ok(proc))["reply"]
    refused(reynctl("send", "nobody", "hi", sock=sock), "unknown_agent", -32006)


def test_send_no_wait_and_a_wait_that_ends_first(daemon: Daemon):
    sock = daemon.socket
    ok(reynctl("agents", "create", "ada", sock=sock))
    out = ok(reynctl("--color", "never", "send", "ada", "hello", "--no-wait", sock=sock))
    assert "queued" in out and "turn      t" not in out
    raw = json.loads(ok(reynctl("--json", "send", "ada", "again", "--no-wait", sock=sock)))
    assert raw["boundary_seq"] is None and raw["turn_id"] == f"t{raw['seq']}"
    wait_for(
        "the queued turns",
        lambda: idle(daemon, "ada") and info(daemon, "ada")["turns_completed"] == 2,
    )

    # A wait that ends first: the turn keeps running.
    ok(reynctl("agents", "create", "slow", "-o", "delay=30", sock=sock))
    proc = reynctl("--color", "never", "send", "slow", "hi", "--timeout", "0.3", sock=sock)
    assert "still in flight after 0.3s" in ok(proc)
    assert "reynctl agents show slow" in proc.stderr
    ok(reynctl("cancel", "slow", sock=sock))


def test_send_progress_names_the_turn_at_once_then_its_steps(daemon: Daemon):
    sock = daemon.socket
    ok(reynctl("agents", "create", "ada", sock=sock))
    proc = reynctl("--json", "send", "ada", "/plan book; visit", "--progress", sock=sock)
    sent = json.loads(ok(proc))
    lines = proc.stderr.splitlines()
    assert lines[0] == f"turn {sent['turn_id']} queued (message at seq {sent['seq']})"
    assert "  started" in lines[1]
    assert any(line.startswith("  step 0 done (seq ") for line in lines)
    assert any(line.startswith("  step 1 done (seq ") for line in lines)
    # Not on a terminal, progress is off by default.
    proc = reynctl("send", "ada", "hi", sock=sock)
    assert ok(proc) and proc.stderr == ""


def test_send_returns_when_the_turn_asks_a_question(daemon: Daemon):
    """The wait ends at the question (not after --timeout), saying how to answer it."""
    sock = daemon.socket
    ok(reynctl("agents", "create", "bo", sock=sock))
    started = time.monotonic()
    proc = reynctl("--color", "never", "send", "bo", "/ask Which hotel?", sock=sock)
    assert time.monotonic() - started < 60  # the default wait is 300 s
    out = ok(proc)
    (question,) = daemon.call("interventions.list", {"agent": "bo"})["interventions"]
    assert "Which hotel?" in out and question["intervention_id"] in out
    assert f"reynctl answer bo {question['intervention_id']} " in proc.stderr

    # Answered, the turn ends; the next question ends the next wait, in --json too.
    ok(reynctl("answer", "bo", question["intervention_id"], "the Ritz", sock=sock))
    raw = json.loads(ok(reynctl("--json", "send", "bo", "/ask And the date?", sock=sock)))
    assert raw["boundary_seq"] is None and raw["outcome"] is None
    assert raw["question"] == "And the date?" and raw["intervention_id"].startswith(raw["turn_id"])


def test_cancel_a_turn_in_flight(daemon: Daemon):
    sock = daemon.socket
    ok(reynctl("agents", "create", "slow", "-o", "delay=30", sock=sock))
    sent = json.loads(ok(reynctl("--json", "send", "slow", "hi", "--no-wait", sock=sock)))
    wait_for("the turn to run", lambda: info(daemon, "slow")["status"] == "running")
    started = time.monotonic()
    out = ok(reynctl("--color", "never", "cancel", "slow", sock=sock))
    assert f"cancelled turn {sent['turn_id']} of slow" in out
    wait_for("the agent to be idle", lambda: idle(daemon, "slow"))
    assert time.monotonic() - started < 10  # hard cancel, not the 30 s step
    assert json.loads(ok(reynctl("--json", "cancel", "slow", sock=sock))) == {"cancelled": []}
    assert "nothing cancelled" in ok(reynctl("cancel", "slow", sock=sock))
    refused(reynctl("cancel", "nobody", sock=sock), "unknown_agent", -32006)


# -- interventions -----------------------------------------------------------------------------


def test_interventions_and_answer(daemon: Daemon):
    sock = daemon.socket
    assert "no open questions" in ok(reynctl("interventions", sock=sock))
    ok(reynctl("agents", "create", "ada", sock=sock))
    ok(reynctl("send", "ada", "/ask Which city?", "--no-wait", sock=sock))
    listed = wait_for(
        "the question", lambda: daemon.call("interventions.list", {})["interventions"]
    )
    iid = listed[0]["intervention_id"]

    proc = reynctl("--color", "never", "interventions", sock=sock)
    table = ok(proc)
    assert table.splitlines()[0].split() == ["AGENT", "ID", "TURN", "ASKED", "AT", "QUESTION"]
    assert iid in table and "Which city?" in table
    assert "reynctl answer AGENT ID TEXT" in proc.stderr
    raw = ok(reynctl("--json", "interventions", "--agent", "ada", sock=sock))
    assert json.loads(raw) == daemon.call("interventions.list", {"agent": "ada"})
    assert "waits for an answer to " + iid in ok(reynctl("--color", "never", "agents", sock=sock))

    raw = ok(reynctl("--json", "answer", "ada", iid, "Kyoto", sock=sock))
    assert json.loads(raw)["buffered"] is False
    wait_for("the turn to end", lambda: info(daemon, "ada")["turns_completed"] == 1)
    history = daemon.call("state.get", {"agent": "ada"})["agents"]["ada"]["history"]
    assert "Kyoto" in history[-1]["content"]

    # An answer to a question not asked (yet) is kept with --buffer, and reynctl says so.
    out = ok(reynctl("--color", "never", "answer", "ada", "t99.s0", "later", "--buffer", sock=sock))
    assert out.startswith("buffered: ada has no open question t99.s0 yet")
    refused(reynctl("answer", "nobody", "x", "y", sock=sock), "unknown_agent", -32006)


# -- act-turn rewind ---------------------------------------------------------------------------


def test_act_turn_rewind(daemon: Daemon):
    sock = daemon.socket
    ok(reynctl("agents", "create", "ada", sock=sock))
    first = json.loads(ok(reynctl("--json", "send", "ada", "hello", sock=sock)))
    ok(reynctl("send", "ada", "/plan a; b; c", sock=sock))
    steps = sorted(
        g["seq"] for g in daemon.call("generations.list", {"kind": "plan_step"})["generations"]
    )
    calls = info(daemon, "ada")["executor_calls"]

    # Off a terminal, like `rewind` and `checkout`: --yes (test_reynctl_usage.py has the rest).
    out = ok(
        reynctl("--color", "never", "act-turn-rewind", "ada", str(steps[1]), "--yes", sock=sock)
    )
    assert f"rewound ada to seq {steps[1]}, inside turn t" in out
    assert "ghost-replayed  3 steps" in out and "re-run          2 steps" in out
    reset = int(out.split("reset record ")[1].split(",")[0])
    wait_for("the re-run", lambda: turn_ended_after(daemon, reset))
    assert info(daemon, "ada")["executor_calls"] == calls + 2

    raw = ok(reynctl("--json", "act-turn-rewind", "ada", str(steps[0]), "-y", sock=sock))
    res = msgspec.json.decode(raw, type=a.ActTurnRewindResult)
    assert res.target == steps[0] and res.ghost_replayed == 2 and res.rerun == 3
    assert daemon.call("daemon.status")["branch"] == res.branch
    wait_for("the re-run", lambda: turn_ended_after(daemon, res.reset_seq))

    # Refusals: a boundary outside any turn, an abandoned seq, an unknown agent.
    refused(
        reynctl("act-turn-rewind", "ada", str(first["boundary_seq"]), "-y", sock=sock),
        "invalid_event",
        -32012,
    )
    refused(reynctl("act-turn-rewind", "ada", str(steps[2]), "-y", sock=sock), "not_active", -32001)
    refused(
        reynctl("act-turn-rewind", "nobody", str(steps[0]), "-y", sock=sock),
        "unknown_agent",
        -32006,
    )


# -- crash: ambiguous steps --------------------------------------------------------------------


def test_status_shows_an_ambiguous_step_and_resolve_settles_it(short_tmp: Path):
    d = start_daemon(short_tmp)
    try:
        ok(reynctl("agents", "create", "ada", "-o", "delay=30", sock=d.socket))
        ok(reynctl("send", "ada", "hello", "--no-wait", sock=d.socket))
        wait_for("the step to start", lambda: step_open(d, "ada"))
    finally:
        d.stop(signal.SIGKILL, expect=None)
    d = start_daemon(short_tmp, state_dir=d.state_dir, socket_path=d.socket)
    try:
        sock = d.socket
        out = ok(reynctl("--color", "never", "status", sock=sock))
        assert "! 1 ambiguous step: started before a crash" in out
        row = next(line for line in out.splitlines() if line.strip().startswith("ada "))
        assert "step 0" in row and row.endswith("reynctl resolve ada retry|skip|abort")
        st = msgspec.json.decode(ok(reynctl("--json", "status", sock=sock)), type=m.StatusResult)
        assert [(s.agent, s.step) for s in st.ambiguous] == [("ada", 0)]

        table = ok(reynctl("--color", "never", "agents", sock=sock))
        assert table.splitlines()[1].split()[3] == "ambiguous"
        assert "reynctl resolve ada retry|skip|abort" in table
        assert "ambiguous" in ok(reynctl("--color", "never", "agents", "show", "ada", sock=sock))

        ok(reynctl("agents", "configure", "ada", "-o", "delay=0", sock=sock))
        out = ok(reynctl("--color", "never", "resolve", "ada", "skip", sock=sock))
        assert out.startswith("skip: ada records it as skipped")
        wait_for("the turn to end", lambda: info(d, "ada")["turns_completed"] == 1)
        assert "ambiguous" not in ok(reynctl("--color", "never", "status", sock=sock))
        refused(reynctl("resolve", "ada", "retry", sock=sock), "nothing_to_do", -32004)
    finally:
        d.stop()


# -- completion --------------------------------------------------------------------------------


def test_agent_names_complete(daemon: Daemon):
    ok(reynctl("agents", "create", "ada", sock=daemon.socket))
    ok(reynctl("agents", "create", "bob", sock=daemon.socket))
    words = f"reynctl --socket {daemon.socket} send a"
    assert _complete(words) == ["ada"]

"""Hard cancel: a rewind or agents.cancel aborts a step mid-executor-call (real daemon)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import (
    agent,
    agents_at,
    create_builtin,
    create_program,
    error_of,
    head,
    kill_stray,
    pid_gone,
    read_pid,
    records,
    send,
    state,
    wait_open_step,
    wait_turn_end,
    wait_until,
)

PROMPT = 15.0  # seconds, for a loaded machine: the interrupted steps would take 30 to 60
STORAGE_CORRUPT = -32021


def test_rewind_cancels_a_builtin_step_mid_call(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    assert send(daemon, "a", "warm up")["outcome"] == "completed"
    daemon.call("agents.configure", {"agent": "a", "options": {"delay": 30}})
    n = head(daemon)
    before = agents_at(daemon, n)

    sent = send(daemon, "a", "/plan x; y", wait=False)
    wait_open_step(daemon, "a", 0)
    started = time.monotonic()
    result = daemon.call("rewind", {"seq": n})
    assert time.monotonic() - started < PROMPT
    assert result["cancelled"] == [{"agent": "a", "turn_id": sent["turn_id"]}]
    assert result["target"] == n and result["mode"] == "undo"

    # Exactly the state as of N, read at the new tip.
    assert agents_at(daemon) == before
    assert not records(daemon, kind="step.committed", turn_id=sent["turn_id"])
    wait_until(lambda: agent(daemon, "a")["status"] == "idle", "idle after the rewind")

    # The agent keeps serving.
    daemon.call("agents.configure", {"agent": "a", "options": {"delay": 0}})
    again = send(daemon, "a", "still there?")
    assert again["outcome"] == "completed" and "still there?" in again["reply"]


def test_rewind_kills_the_command_executors_subprocess(daemon: Daemon, short_tmp: Path) -> None:
    prog = short_tmp / "prog"
    create_program(daemon, "c", prog)
    assert send(daemon, "c", "msg")["outcome"] == "completed"
    n = head(daemon)
    before = agents_at(daemon, n)

    sent = send(daemon, "c", "msg sleep", wait=False)
    pid = read_pid(prog / f"{sent['turn_id']}.s1.pid")
    try:
        wait_open_step(daemon, "c", 1)
        assert not pid_gone(pid)
        started = time.monotonic()
        result = daemon.call("rewind", {"seq": n})
        assert time.monotonic() - started < PROMPT
        # Killed and reaped by the time the rewind answered: no process, no zombie.
        assert pid_gone(pid), Path(f"/proc/{pid}/status").read_text()
    finally:
        kill_stray(pid)
    assert result["cancelled"] == [{"agent": "c", "turn_id": sent["turn_id"]}]
    assert agents_at(daemon) == before

    again = send(daemon, "c", "msg msg")
    assert again["outcome"] == "completed" and again["reply"] == "program done after 2 steps"


def test_agents_cancel_mid_subprocess_commits_nothing_of_that_step(
    daemon: Daemon, short_tmp: Path
) -> None:
    prog = short_tmp / "prog"
    create_program(daemon, "c", prog)
    sent = send(daemon, "c", "msg msg sleep", wait=False)
    turn = sent["turn_id"]
    pid = read_pid(prog / f"{turn}.s2.pid")
    try:
        wait_open_step(daemon, "c", 2)
        started = time.monotonic()
        cancelled = daemon.call("agents.cancel", {"agent": "c"})["cancelled"]
        assert cancelled == [{"agent": "c", "turn_id": turn}]
        ended = wait_turn_end(daemon, turn)
        assert time.monotonic() - started < PROMPT
        assert pid_gone(pid)
    finally:
        kill_stray(pid)
    assert ended["outcome"] == "cancelled"
    committed = records(daemon, kind="step.committed", turn_id=turn)
    assert [r["step"] for r in committed] == [0, 1]
    assert records(daemon, kind="step.started", turn_id=turn, step=2)
    final = state(daemon, "c")
    assert final["pending_chains"] == [] and final["turns_completed"] == 0
    assert [m.get("content") for m in final["history"]] == ["msg msg sleep", "step 0", "step 1"]

    again = send(daemon, "c", "msg")
    assert again["outcome"] == "completed"


def test_agents_cancel_a_builtin_step_mid_delay(daemon: Daemon) -> None:
    create_builtin(daemon, "a", delay=30)
    sent = send(daemon, "a", "slow", wait=False)
    wait_open_step(daemon, "a", 0)
    started = time.monotonic()
    assert daemon.call("agents.cancel", {"agent": "a"})["cancelled"] == [
        {"agent": "a", "turn_id": sent["turn_id"]}
    ]
    ended = wait_turn_end(daemon, sent["turn_id"])
    assert time.monotonic() - started < PROMPT
    assert ended["outcome"] == "cancelled"
    assert not records(daemon, kind="step.committed", turn_id=sent["turn_id"])
    assert daemon.call("agents.cancel", {"agent": "a"})["cancelled"] == []


def test_a_rewind_that_meets_a_damaged_record_writes_nothing_and_stops(short_tmp: Path) -> None:
    """The rebuild of the target's state reads a damaged WAL record: no reset, exit 3.

    The rewind cancelled the runners before the rebuild; with no reset record
    written, the tip stands. Damage is docs/durability.md rule 7's corruption: the
    call is answered storage_corrupt and the daemon stops (it may not run on
    a log it cannot read back), leaving the damage mark for the next start.
    """
    daemon = start_daemon(short_tmp)
    daemon.call("wal.append", {"agent": "bystander", "kind": "agent.created", "data": {}})
    create_builtin(daemon, "a", delay=3)
    n = head(daemon)
    send(daemon, "a", "slow", wait=False)
    wait_open_step(daemon, "a", 0)

    # Damage record 1 in place (its checksum no longer matches): every rebuild
    # replays it; the tip's state is in memory and never reads it again.
    (segment,) = daemon.state_dir.rglob("wal/*.jsonl")
    data = segment.read_bytes()
    at = data.index(b'"agent":"bystander"') + len(b'"agent":"bystande')
    assert data.index(b'"seq":1,') < at < data.index(b"\n")  # in record 1's line
    with segment.open("r+b") as f:
        f.seek(at)
        f.write(b"R")

    error = error_of(daemon, "rewind", {"seq": n})
    assert error["code"] == STORAGE_CORRUPT, error
    assert error["data"]["seq"] == 1 and error["data"]["path"] == str(segment)
    assert records(daemon, kind="rewind") == []
    daemon.stop(expect=3)  # stopping by itself already: the SIGTERM changes nothing
    assert (daemon.state_dir / "state" / "damage").exists()

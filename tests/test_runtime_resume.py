"""Resume after a crash: SIGKILL mid-step, restart, the operator resolves the ambiguous step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import (
    agent,
    chain,
    create_builtin,
    kill_daemon,
    records,
    restart,
    send,
    state,
    wait_open_step,
    wait_turn_end,
    wait_until,
)

PLAN = "/plan a; b"  # steps: 0 the plan, 1 does a, 2 does b, 3 finishes


@pytest.fixture
def crashed(short_tmp: Path) -> Iterator[tuple[Daemon, str, int]]:
    """A daemon restarted after a SIGKILL while step 1 of a turn was in its executor call.

    Yields the new daemon, the turn id and the seq of the open step's step.started.
    """
    d = start_daemon(short_tmp)
    try:
        create_builtin(d, "a", delay=0.5)
        turn = send(d, "a", PLAN, wait=False)["turn_id"]
        wait_open_step(d, "a", 0)
        # Step 1 (and later) gets a slow executor: a wide window to crash in.
        d.call("agents.configure", {"agent": "a", "options": {"delay": 30}})
        open_chain = wait_open_step(d, "a", 1)
        assert [m["step"] for m in open_chain["steps"]] == [0]
    finally:
        kill_daemon(d)
    d2 = restart(d, short_tmp)
    try:
        yield d2, turn, open_chain["open_step_seq"]
    finally:
        d2.stop()


def test_restart_reports_the_ambiguous_step(crashed: tuple[Daemon, str, int]) -> None:
    d, turn, started_seq = crashed
    ambiguous = wait_until(lambda: d.call("daemon.status")["ambiguous"], "ambiguous step")
    assert ambiguous == [
        {
            "agent": "a",
            "turn_id": turn,
            "step": 1,
            "input": {"text": PLAN, "step": 1},
            "started_seq": started_seq,
        }
    ]
    info = agent(d, "a")
    assert info["status"] == "ambiguous" and info["ambiguous"] == ambiguous[0]
    assert info["executor_calls"] == 0  # nothing re-run without the operator
    # The open step's start is still the tip: nothing runs until the operator decides.
    assert d.call("daemon.status")["head"] == started_seq


@pytest.mark.parametrize("action", ["retry", "skip", "abort"])
def test_each_operator_choice(crashed: tuple[Daemon, str, int], action: str) -> None:
    d, turn, started_seq = crashed
    wait_until(lambda: d.call("daemon.status")["ambiguous"], "ambiguous step")
    d.call("agents.configure", {"agent": "a", "options": {"delay": 0}})
    d.call("agents.resolve", {"agent": "a", "action": action})
    ended = wait_turn_end(d, turn, after=started_seq)
    info = wait_until(lambda: (i := agent(d, "a"))["status"] == "idle" and i, "idle")
    assert d.call("daemon.status")["ambiguous"] == [] and info["ambiguous"] is None
    committed = {r["step"]: r for r in records(d, kind="step.committed", turn_id=turn)}
    final = state(d, "a")
    plan = final["plans"][f"{turn}.plan"]["steps"]

    # Step 0 was committed before the crash: never re-executed (executor_calls
    # counts from the restart), replayed from its memo when the turn goes on.
    assert committed[0]["seq"] < started_seq
    if action == "retry":
        assert info["ghost_replayed"] == 1
        assert ended["outcome"] == "completed"
        assert info["executor_calls"] == 3  # steps 1, 2, 3
        assert sorted(committed) == [0, 1, 2, 3]
        assert [s["status"] for s in plan] == ["done", "done"]
    elif action == "skip":
        assert info["ghost_replayed"] == 2  # step 0 and the skipped step's memo
        assert ended["outcome"] == "completed"
        assert info["executor_calls"] == 2  # steps 2, 3
        assert committed[1]["output"] == {"skipped": True}
        assert [s["status"] for s in plan] == ["pending", "done"]
    else:
        assert ended["outcome"] == "aborted"
        assert info["ghost_replayed"] == 0  # the turn does not go on
        assert info["executor_calls"] == 0
        assert sorted(committed) == [0]
        assert final["turns_completed"] == 0
    assert final["pending_chains"] == []
    # And the agent serves the next message.
    assert send(d, "a", "next")["outcome"] == "completed"


def test_a_rewind_that_keeps_the_ambiguous_step_does_not_resolve_it(
    crashed: tuple[Daemon, str, int],
) -> None:
    d, turn, started_seq = crashed
    wait_until(lambda: d.call("daemon.status")["ambiguous"], "ambiguous step")
    d.call("agents.configure", {"agent": "a", "options": {"delay": 0}})
    n = d.call("daemon.status")["head"]
    create_builtin(d, "b")
    reset = d.call("rewind", {"seq": n})  # above the open step: it stays open
    assert chain(d, "a", turn)["open_step_seq"] == started_seq  # type: ignore[index]
    (again,) = wait_until(lambda: d.call("daemon.status")["ambiguous"], "ambiguous again")
    assert again["turn_id"] == turn and again["started_seq"] == started_seq
    assert agent(d, "a")["executor_calls"] == 0
    assert records(d, after=reset["reset_seq"]) == []  # nothing ran on its own
    d.call("agents.resolve", {"agent": "a", "action": "retry"})
    assert wait_turn_end(d, turn, after=reset["reset_seq"])["outcome"] == "completed"


def test_resolve_without_an_ambiguous_step_is_refused(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    with daemon.connect() as c:
        reply = c.request("agents.resolve", {"agent": "a", "action": "retry"})
    assert reply["error"]["code"] == -32004


def test_crash_after_a_rewinds_reset_record_reruns_the_open_step(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, env={"REYN_CRASH_AT": "reset.durable"})
    try:
        create_builtin(d, "a")
        done = send(d, "a", PLAN)
        turn = done["turn_id"]
        (started2,) = records(d, kind="step.started", turn_id=turn, step=2)
        with d.connect() as c, pytest.raises((EOFError, ConnectionError)):
            c.request("rewind", {"seq": started2["seq"]})
    finally:
        kill_daemon(d)  # already dead by the crash point: reaps it
    (reset,) = records(d, kind="rewind")
    assert reset["target_n"] == started2["seq"]

    d2 = restart(d, short_tmp)
    try:
        # The daemon cut that step on purpose: re-run at once, never reported ambiguous.
        def ended() -> dict[str, object] | None:
            assert d2.call("daemon.status")["ambiguous"] == []
            found = records(d2, after=reset["seq"], kind="turn.ended", turn_id=turn)
            return found[0] if found else None

        assert wait_until(ended, "the re-run turn's end").get("outcome", "completed") == "completed"
        info = wait_until(lambda: (i := agent(d2, "a"))["status"] == "idle" and i, "idle")
        assert info["executor_calls"] == 2  # steps 2 and 3; 0 and 1 are ghost-replayed
        assert info["ghost_replayed"] == 2
        assert [r["step"] for r in records(d2, after=reset["seq"], kind="step.committed")] == [
            2,
            3,
        ]
        assert (
            state(d2, "a")["plans"][f"{turn}.plan"]["steps"]
            == state(d2, "a", done["boundary_seq"])["plans"][f"{turn}.plan"]["steps"]
        )
    finally:
        d2.stop()

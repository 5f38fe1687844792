"""Agent turns against the real daemon: memos per step, plan and skill boundaries, interventions."""

from __future__ import annotations

import time
from typing import Any

from reynd.runtime.resume import intervention_id
from tests.harness import Daemon
from tests.runtime_helpers import (
    agent,
    create_builtin,
    head,
    records,
    send,
    state,
    wait_until,
)


def test_turn_commits_each_step_as_a_memo_before_the_next(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    sent = send(daemon, "a", "hello there")
    assert sent["turn_id"] == f"t{sent['seq']}"
    assert sent["outcome"] == "completed"
    assert "builtin demo executor" in sent["reply"]
    end = sent["boundary_seq"]
    (ended,) = records(daemon, kind="turn.ended", turn_id=sent["turn_id"])
    assert ended["seq"] == end

    # The WAL between the message and the boundary: every step is started,
    # then committed, before the next one starts.
    recs = [r for r in records(daemon, after=sent["seq"]) if r["seq"] < end]
    kinds = [(r["kind"], r.get("step")) for r in recs]
    assert kinds == [
        ("turn.started", None),
        ("step.started", 0),
        ("step.committed", 0),
        ("step.started", 1),
        ("step.committed", 1),
        ("step.started", 2),
        ("step.committed", 2),
    ]
    # The same through as-of reads at every intermediate seq.
    for r in recs:
        at = state(daemon, "a", r["seq"])
        (c,) = at["pending_chains"]
        committed = [m["step"] for m in c["steps"]]
        if r["kind"] == "step.started":
            assert c["open_step"] == r["step"]
            assert committed == list(range(r["step"]))  # every earlier step has its memo
        elif r["kind"] == "step.committed":
            assert c["open_step"] is None and committed == list(range(r["step"] + 1))
            assert c["steps"][-1]["seq"] == r["seq"]
    final = state(daemon, "a")
    assert final["pending_chains"] == [] and final["turns_completed"] == 1
    roles = [m["role"] for m in final["history"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert final["history"][-1]["content"] == sent["reply"]

    info = agent(daemon, "a")
    assert info["status"] == "idle" and info["executor_calls"] == 3
    assert info["tokens_in"] == final["tokens_in"] > 0


def test_plan_and_skill_cut_generations_and_show_in_state(daemon: Daemon) -> None:
    create_builtin(daemon, "p")
    plan = send(daemon, "p", "/plan fetch; build")
    skill = send(daemon, "p", "/skill review")
    assert plan["outcome"] == skill["outcome"] == "completed"

    gens = daemon.call("generations.list", {"agent": "p"})["generations"]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for g in gens:
        by_kind.setdefault(g["kind"], []).append(g)
    assert sorted(g["label"] for g in by_kind["plan_step"]) == ["build", "fetch"]
    assert [g["label"] for g in by_kind["phase"]] == ["review", "act", "plan"]
    assert {g["seq"] for g in by_kind["turn"]} == {plan["boundary_seq"], skill["boundary_seq"]}
    assert all(plan["seq"] < g["seq"] < plan["boundary_seq"] for g in by_kind["plan_step"])

    # Plans and skill runs are state: visible as of any seq.
    first_done = min(g["seq"] for g in by_kind["plan_step"])
    plans = state(daemon, "p", first_done)["plans"]
    steps = plans[f"{plan['turn_id']}.plan"]["steps"]
    assert [(s["title"], s["status"]) for s in steps] == [("fetch", "done"), ("build", "pending")]
    steps = state(daemon, "p")["plans"][f"{plan['turn_id']}.plan"]["steps"]
    assert [s["status"] for s in steps] == ["done", "done"]

    act = next(g for g in by_kind["phase"] if g["label"] == "act")
    runs = state(daemon, "p", act["seq"])["skill_runs"]
    (run,) = runs.values()
    assert run["skill"] == "review" and run["phase"] == "act" and run["phase_seq"] == act["seq"]
    assert state(daemon, "p")["skill_runs"] == {}  # ended with the turn


def test_intervention_waits_for_the_answer(daemon: Daemon) -> None:
    create_builtin(daemon, "q")
    # The wait ends at the question, not at the end of the turn: it waits for the operator.
    asked = send(daemon, "q", "/ask deploy now?")
    assert asked["outcome"] is None and asked["boundary_seq"] is None
    assert asked["question"] == "deploy now?"
    (iid,) = daemon.call("interventions.list", {"agent": "q"})["interventions"]
    assert iid["intervention_id"] == asked["intervention_id"]
    assert iid["turn_id"] == asked["turn_id"]
    info = agent(daemon, "q")
    assert info["status"] == "waiting" and info["waiting_for"] == iid["intervention_id"]
    answered = daemon.call(
        "interventions.answer",
        {"agent": "q", "intervention_id": iid["intervention_id"], "answer": "yes, ship it"},
    )
    assert answered["buffered"] is False
    (ended,) = wait_until(
        lambda: records(daemon, kind="turn.ended", turn_id=asked["turn_id"]), "the turn's end"
    )
    assert ended.get("outcome", "completed") == "completed"  # a default is not written
    assert "yes, ship it" in ended["reply"]
    assert daemon.call("interventions.list", {})["interventions"] == []


def test_early_answer_is_buffered_and_the_turn_does_not_wait(daemon: Daemon) -> None:
    create_builtin(daemon, "q")
    # The answer takes the next seq, the message the one after: its turn id is known.
    turn_id = f"t{head(daemon) + 2}"
    answered = daemon.call(
        "interventions.answer",
        {"agent": "q", "intervention_id": intervention_id(turn_id, 0), "answer": "blue"},
    )
    assert answered["buffered"] is True
    assert state(daemon, "q")["buffered_answers"] == {intervention_id(turn_id, 0): "blue"}
    done = send(daemon, "q", "/ask which colour?")
    assert done["turn_id"] == turn_id
    assert done["outcome"] == "completed" and "blue" in done["reply"]
    final = state(daemon, "q")
    assert final["buffered_answers"] == {} and final["interventions"] == {}
    assert records(daemon, kind="intervention.asked", intervention_id=intervention_id(turn_id, 0))


def test_send_wait_returns_abandoned_when_a_rewind_drops_the_message(daemon: Daemon) -> None:
    """A `send --wait` caller is not left hanging when its message is rewound away."""
    daemon.call("agents.create", {"name": "slow", "options": {"delay": 30}})
    before = daemon.call("daemon.status")["head"]
    with daemon.connect() as waiting:
        waiting.send_json(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "agents.send",
                "params": {"agent": "slow", "text": "hi", "wait": True},
            }
        )
        deadline = time.monotonic() + 10
        while daemon.call("agents.get", {"agent": "slow"})["status"] != "running":
            assert time.monotonic() < deadline, "the turn never started"
        daemon.call("rewind", {"seq": before})
        reply = waiting.recv_json()
    assert reply["result"]["outcome"] == "abandoned"
    assert reply["result"]["boundary_seq"] is None

"""Act-turn rewind: ghost replay of committed steps costs zero executor calls (real daemon)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.harness import Daemon
from tests.runtime_helpers import (
    agent,
    create_builtin,
    error_of,
    head,
    records,
    send,
    state,
    wait_turn_end,
    wait_until,
)

Seqs = dict[str, dict[int, int]]

# For `/plan a; b; c` (steps 0..4; step i > 0 finishes plan step i - 1): the
# target, how many steps are ghost-replayed, and which plan steps are marked
# done again after the reset (a memo whose directive was cut re-derives it).
TARGETS: list[tuple[str, Callable[[Seqs], int], int, list[int]]] = [
    ("on step 1's memo, before its directive", lambda s: s["committed"][1], 2, [0, 1, 2]),
    ("on step 2's start (open step)", lambda s: s["started"][2], 2, [1, 2]),
    ("after step 3's directive", lambda s: s["committed"][3] + 1, 4, []),
    ("right after the turn started", lambda s: s["started"][0] - 1, 0, [0, 1, 2]),
]


def _step_seqs(d: Daemon, turn_id: str) -> Seqs:
    return {
        kind: {r["step"]: r["seq"] for r in records(d, kind=f"step.{kind}", turn_id=turn_id)}
        for kind in ("started", "committed")
    }


@pytest.mark.parametrize(
    ("target_of", "ghosts", "redone"), [t[1:] for t in TARGETS], ids=[t[0] for t in TARGETS]
)
def test_ghost_replayed_steps_cost_no_executor_call(
    daemon: Daemon, target_of: Callable[[Seqs], int], ghosts: int, redone: list[int]
) -> None:
    create_builtin(daemon, "a")
    done = send(daemon, "a", "/plan a; b; c")
    turn = done["turn_id"]
    seqs = _step_seqs(daemon, turn)
    assert sorted(seqs["committed"]) == [0, 1, 2, 3, 4]
    original = state(daemon, "a")
    calls = agent(daemon, "a")["executor_calls"]
    assert calls == 5

    target = target_of(seqs)
    result = daemon.call("act_turn.rewind", {"agent": "a", "seq": target})
    assert result["turn_id"] == turn and result["target"] == target
    assert result["ghost_replayed"] == ghosts
    assert result["rerun"] == 5 - ghosts
    assert result["cancelled"] == []  # the turn had completed

    ended = wait_turn_end(daemon, turn, after=result["reset_seq"])
    assert ended["outcome"] == "completed"
    info = wait_until(lambda: (i := agent(daemon, "a"))["status"] == "idle" and i, "idle")
    assert info["executor_calls"] - calls == 5 - ghosts  # 0 calls for the ghost-replayed steps
    assert info["ghost_replayed"] == ghosts
    rerun = records(daemon, after=result["reset_seq"], kind="step.committed", turn_id=turn)
    assert [r["step"] for r in rerun] == list(range(ghosts, 5))

    # The re-run turn reaches the same state (the builtin executor is deterministic).
    final = state(daemon, "a")
    assert final["history"] == original["history"]
    assert final["plans"] == original["plans"]
    assert final["turns_completed"] == original["turns_completed"] == 1
    plan_steps = records(daemon, after=result["reset_seq"], kind="plan.step_done")
    assert sorted(r["index"] for r in plan_steps) == redone


def test_act_turn_rewind_refuses_targets_outside_a_turn_and_abandoned_ones(
    daemon: Daemon,
) -> None:
    create_builtin(daemon, "a")
    first = send(daemon, "a", "/plan a; b; c")
    second = send(daemon, "a", "hello")
    seqs = _step_seqs(daemon, first["turn_id"])

    # A boundary between turns is not inside one: a plain rewind is the tool for it.
    err = error_of(daemon, "act_turn.rewind", {"agent": "a", "seq": first["boundary_seq"]})
    assert err["code"] == -32012 and "rewind" in err["message"]
    err = error_of(daemon, "act_turn.rewind", {"agent": "nobody", "seq": seqs["committed"][1]})
    assert err["code"] == -32006

    result = daemon.call("act_turn.rewind", {"agent": "a", "seq": seqs["committed"][1]})
    wait_turn_end(daemon, first["turn_id"], after=result["reset_seq"])
    # The old step 3 (and the second turn) were abandoned by that record.
    for seq in (seqs["committed"][3], second["boundary_seq"] - 1):
        err = error_of(daemon, "act_turn.rewind", {"agent": "a", "seq": seq})
        assert err["code"] == -32001 and "checkout" in err["message"]


def test_each_refusal_names_a_command_that_works(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    first = send(daemon, "a", "/plan a; b")
    second = send(daemon, "a", "hello")
    tip = head(daemon)

    # Beyond the tip: seq_out_of_range, stating the range (not "use checkout N").
    for seq in (tip + 1, tip + 1000):
        err = error_of(daemon, "act_turn.rewind", {"agent": "a", "seq": seq})
        assert err["code"] == -32002, err
        assert f"0..{tip - 1}" in err["message"] and "checkout" not in err["message"], err
        assert err["data"]["seq"] == seq and err["data"]["head"] == tip
    err = error_of(daemon, "act_turn.rewind", {"agent": "a", "seq": tip})
    assert err["code"] == -32004 and f"0..{tip - 1}" in err["message"], err

    # Between turns: `rewind N`, as the message says, and it works.
    boundary = first["boundary_seq"]
    err = error_of(daemon, "act_turn.rewind", {"agent": "a", "seq": boundary})
    assert err["code"] == -32012 and f"`rewind {boundary}`" in err["message"], err
    daemon.call("rewind", {"seq": boundary})

    # Inside the turn that rewind abandoned: `checkout N`, as the message says, and it works.
    inside = _step_seqs(daemon, second["turn_id"])["committed"][0]
    err = error_of(daemon, "act_turn.rewind", {"agent": "a", "seq": inside})
    assert err["code"] == -32001 and f"`checkout {inside}`" in err["message"], err
    assert daemon.call("checkout", {"seq": inside})["mode"] == "fork_switch"

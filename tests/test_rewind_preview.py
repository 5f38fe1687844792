"""Preview and effects of a move (issue 25), against the real daemon.

`rewind`/`checkout`/`act_turn.rewind {dry_run}` write nothing and cancel
nothing, and say what the move would change and what the abandoned future
did outside reynd: programs a `command` executor ran (argv, exit code, seq),
model calls and tokens, tool runs; a step with no record of it is unknown,
never none. The real move's result carries the same effects.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from reynctl import render
from reynctl.tui.app import ReyndTui
from reynctl.tui.confirm import ConfirmScreen
from reynd.daemon.preview import MOVE_READ_MAX
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.preview import CommandRun, Effects, MovePreview, TurnRef
from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import (
    create_builtin,
    error_of,
    head,
    records,
    send,
    wait_open_step,
)
from tests.test_executors import ChatServer, completion, server  # noqa: F401 (a fixture)
from tests.test_reynctl_cli import _on_a_terminal, ok, reynctl
from tests.test_reynctl_render import PLAIN
from tests.test_tui import call, connected, move_to, open_picker, run, shows, two_turns, until

# A command-executor program that answers one StepResult and ends the turn.
ANSWER = (
    "import json, sys; json.load(sys.stdin); "
    'print(json.dumps({"done": True, "reply": "ok", "tokens_in": 3, "tokens_out": 4}))'
)


def create_command(d: Daemon, name: str, argv: list[str]) -> None:
    d.call("agents.create", {"name": name, "executor": "command", "options": {"argv": argv}})


def wal_digest(d: Daemon) -> str:
    """Every byte of the WAL's segments: a dry run must leave them as they are."""
    h = hashlib.sha256()
    segments = sorted(d.state_dir.rglob("wal/*.jsonl"))
    assert segments  # where the WAL is: a digest of nothing would prove nothing
    for path in segments:
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def effects_run(d: Daemon, chat: ChatServer) -> dict[str, Any]:
    """Run a command step that answers, `true` and `false` (both fail the turn: no
    StepResult; status 1), an openai turn (a model call asking for a tool, the tool,
    a model call) and a builtin turn; return the seqs that ended each command step."""
    create_command(d, "cmd", [sys.executable, "-c", ANSWER])
    create_command(d, "yes", ["true"])
    create_command(d, "no", ["false"])
    call = {"id": "c1", "type": "function", "function": {"name": "time_now", "arguments": "{}"}}
    _, url = chat.scenario(
        "m", completion(calls=[call], prompt=10, out=2), completion("done", prompt=20, out=5)
    )
    d.call("agents.create", {"name": "m", "executor": "openai", "options": {"base_url": url}})
    create_builtin(d, "b")
    seqs = {}
    for name in ("cmd", "yes", "no", "m", "b"):
        reply = send(d, name, "go")
        assert reply["outcome"] == ("failed" if name in ("yes", "no") else "completed"), reply
        seqs[name] = reply["boundary_seq"]
    return seqs


def expected_effects() -> dict[str, Any]:
    """What effects_run did outside reynd (commands without their seqs, turn ids cut)."""
    program = [sys.executable, "-c", ANSWER]
    return {
        "steps": 1 + 1 + 1 + 3 + 3,  # every step that ended, the builtin's included
        "unknown_steps": 0,
        "commands": [
            {"agent": "cmd", "turn_id": "t", "step": 0, "argv": program, "exit_code": 0},
            {"agent": "yes", "turn_id": "t", "step": 0, "argv": ["true"], "exit_code": 0},
            {"agent": "no", "turn_id": "t", "step": 0, "argv": ["false"], "exit_code": 1},
        ],
        "command_count": 3,
        "model_calls": 2,
        "tokens_in": 3 + 10 + 20,
        "tokens_out": 4 + 2 + 5,
        "tools": {"time_now": 1},
        "files_outside": None,
    }


def comparable(effects: dict[str, Any]) -> dict[str, Any]:
    """`effects` with each command's turn id reduced to its prefix and its seq dropped."""
    out = dict(effects)
    out["commands"] = [
        {**{k: v for k, v in c.items() if k != "seq"}, "turn_id": c["turn_id"][:1]}
        for c in effects["commands"]
    ]
    return out


def test_dry_run_shows_the_effects_writes_nothing_and_the_rewind_reports_the_same(
    daemon: Daemon,
    server: ChatServer,  # noqa: F811 (the fixture imported above)
) -> None:
    create_builtin(daemon, "base")
    mark = head(daemon)
    seqs = effects_run(daemon, server)
    tip, digest = head(daemon), wal_digest(daemon)
    preview = daemon.call("rewind", {"seq": mark, "dry_run": True})
    assert head(daemon) == tip and wal_digest(daemon) == digest  # nothing written
    assert preview["dry_run"] is True and preview["reset_seq"] == tip + 1
    assert preview["target"] == mark and preview["cancelled"] == []
    effects = preview["effects"]
    assert comparable(effects) == expected_effects()
    # Each command's seq is the record that ended its step: the memo, or the failed turn's end.
    ended = {c["agent"]: c["seq"] for c in effects["commands"]}
    assert ended["yes"] == seqs["yes"] and ended["no"] == seqs["no"]
    (memo,) = records(daemon, kind="step.committed", agent="cmd")
    assert ended["cmd"] == memo["seq"] and memo["effect"]["exit_code"] == 0
    p = preview["preview"]
    assert p["abandoned_agents"] == ["cmd", "yes", "no", "m", "b"]
    assert [t["agent"] for t in p["abandoned_turns"]] == ["cmd", "yes", "no", "m", "b"]
    assert p["abandoned_turn_count"] == 5 and p["restored_turns"] == []
    assert p["files"] is None  # workspace rewind is off
    # The real rewind: the same effects, and the agents are gone.
    done = daemon.call("rewind", {"seq": mark})
    assert done["reset_seq"] == tip + 1 and done["dry_run"] is False
    assert done["effects"] == effects and done.get("preview") is None
    # Back onto the abandoned branch: it restores those turns, and abandons nothing of effect.
    back = daemon.call("checkout", {"seq": tip, "dry_run": True})
    assert back["preview"]["restored_agents"] == ["cmd", "yes", "no", "m", "b"]
    assert back["preview"]["restored_turn_count"] == 5
    assert back["effects"]["steps"] == 0 and back["effects"]["command_count"] == 0


def test_a_step_with_no_effect_record_is_unknown_not_none(daemon: Daemon) -> None:
    """An external runtime's step says nothing of what it did, and may not say it."""
    mark = head(daemon)
    with daemon.connect() as c:
        c.call(
            "wal.append", {"agent": "x", "kind": "agent.created", "data": {"executor": "external"}}
        )
        m = c.call(
            "wal.append",
            {"agent": "x", "kind": "message.received", "data": {"message_id": "m1", "text": "hi"}},
        )
        turn = f"t{m['seq']}"
        c.call(
            "wal.append",
            {"agent": "x", "kind": "turn.started", "data": {"turn_id": turn, "message_id": "m1"}},
        )
        c.call(
            "wal.append",
            {"agent": "x", "kind": "step.started", "data": {"turn_id": turn, "step": 0}},
        )
        forged = {"turn_id": turn, "step": 0, "effect": {"executor": "command", "argv": ["rm"]}}
        err = error_of(
            daemon, "wal.append", {"agent": "x", "kind": "step.committed", "data": forged}
        )
        assert err["code"] == errors.InvalidParams.code and "effect" in err["message"]
        c.call(
            "wal.append",
            {"agent": "x", "kind": "step.committed", "data": {"turn_id": turn, "step": 0}},
        )
    effects = daemon.call("rewind", {"seq": mark, "dry_run": True})["effects"]
    assert effects["unknown_steps"] == 1 and effects["steps"] == 0


def test_dry_run_cancels_nothing_and_names_the_turn_a_rewind_would_cancel(daemon: Daemon) -> None:
    create_builtin(daemon, "slow", delay=60)
    mark = head(daemon)
    sent = send(daemon, "slow", "take your time", wait=False)
    wait_open_step(daemon, "slow", 0)
    tip = head(daemon)
    preview = daemon.call("rewind", {"seq": mark, "dry_run": True})
    assert preview["cancelled"] == [{"agent": "slow", "turn_id": sent["turn_id"]}]
    assert head(daemon) == tip
    agent = daemon.call("agents.get", {"agent": "slow"})
    assert agent["status"] == "running" and agent["turn_id"] == sent["turn_id"]
    done = daemon.call("rewind", {"seq": mark})
    assert done["cancelled"] == preview["cancelled"]


def test_act_turn_dry_run_writes_nothing(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    reply = send(daemon, "a", "hello")
    (first,) = records(daemon, kind="step.committed", agent="a", step=0)
    tip = head(daemon)
    res = daemon.call("act_turn.rewind", {"agent": "a", "seq": first["seq"], "dry_run": True})
    assert res["dry_run"] is True and head(daemon) == tip
    assert res["turn_id"] == reply["turn_id"] and res["rerun"] == 2
    assert res["effects"]["steps"] == 2 and res["effects"]["unknown_steps"] == 0
    real = daemon.call("act_turn.rewind", {"agent": "a", "seq": first["seq"]})
    assert real["effects"] == res["effects"] and real["reset_seq"] == res["reset_seq"]


@pytest.mark.parametrize("follow", [{"then": {"agent": "a", "text": "x"}}, {"reapply": "messages"}])
def test_dry_run_with_then_or_reapply_is_refused_saying_why(
    daemon: Daemon, follow: dict[str, Any]
) -> None:
    create_builtin(daemon, "a")
    send(daemon, "a", "one")
    tip = head(daemon)
    for method in ("rewind", "checkout"):
        err = error_of(daemon, method, {"seq": 1, "dry_run": True, **follow})
        assert err["code"] == -32602
        assert "conflicts with `dry_run`" in err["message"] and "preview without" in err["message"]
    assert head(daemon) == tip


def test_dry_run_refuses_what_the_move_would(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    tip = head(daemon)
    assert (
        error_of(daemon, "rewind", {"seq": tip, "dry_run": True})["code"] == errors.NothingToDo.code
    )
    assert (
        error_of(daemon, "rewind", {"seq": tip + 5, "dry_run": True})["code"]
        == errors.SeqOutOfRange.code
    )
    assert head(daemon) == tip


DATA = Path(__file__).parent / "data"


def test_a_state_dir_written_before_counts_its_steps_unknown(short_tmp: Path) -> None:
    """tests/data/effects-v1.tar.gz (made by tests/data/make_effects_v1.py before issue 25):
    memos and failed turn ends with no effect, segment indexes of version 3. It opens;
    its steps are unknown, not none; a step run after the upgrade is known."""
    facts = json.loads((DATA / "effects-v1.json").read_text())
    with tarfile.open(DATA / "effects-v1.tar.gz") as tar:
        tar.extractall(short_tmp, filter="tar")
    state_dir = short_tmp / "project" / ".reyn"
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        assert head(d) == facts["head"]
        old = d.call("rewind", {"seq": facts["mark"], "dry_run": True})["effects"]
        assert old["unknown_steps"] == facts["unknown_steps"]
        assert old["steps"] == 0 and old["command_count"] == 0 and old["tokens_in"] == 0
        assert send(d, "yes", "again")["outcome"] == "failed"  # `true` prints no StepResult
        assert send(d, "b", "again")["outcome"] == "completed"
        d.stop()
        d = start_daemon(short_tmp, state_dir=state_dir)  # the new records, read back
        now = d.call("rewind", {"seq": facts["mark"], "dry_run": True})["effects"]
        assert now["unknown_steps"] == facts["unknown_steps"] and now["steps"] == 1 + 3
        assert [(c["argv"], c["exit_code"]) for c in now["commands"]] == [(["true"], 0)]
        assert d.call("rewind", {"seq": facts["mark"]})["effects"] == now
    finally:
        d.stop()


def commands_run(d: Daemon) -> int:
    """`false`, then `true`, each a failed turn of its own command agent; the seq before."""
    mark = head(d)
    create_command(d, "no", ["false"])
    create_command(d, "yes", ["true"])
    assert send(d, "no", "go")["outcome"] == send(d, "yes", "go")["outcome"] == "failed"
    return mark


def test_reynctl_dry_run_prints_the_preview_and_json(daemon: Daemon) -> None:
    mark = commands_run(daemon)
    tip = head(daemon)
    out = ok(reynctl("rewind", str(mark), "--dry-run", sock=daemon.socket))  # no --yes needed
    assert out.startswith(f"dry run: rewind to seq {mark} would append reset record {tip + 1}")
    assert "abandons 2 turn(s): no/t" in out and "agents gone: no, yes" in out
    assert "not undone: 2 commands ran" in out
    assert "ran false (exit 1) for no/t" in out and "ran true (exit 0) for yes/t" in out
    data = json.loads(ok(reynctl("checkout", str(mark), "--dry-run", "--json", sock=daemon.socket)))
    assert data["dry_run"] is True and data["effects"]["command_count"] == 2
    assert [c["argv"] for c in data["effects"]["commands"]] == [["false"], ["true"]]
    assert head(daemon) == tip  # nothing written
    bad = reynctl("rewind", str(mark), "--dry-run", "--send", "no", "x", sock=daemon.socket)
    assert bad.returncode == 2 and "--dry-run previews the move alone: drop --send" in bad.stderr
    # The move itself says what it did not undo.
    done = ok(reynctl("rewind", str(mark), "--yes", sock=daemon.socket))
    assert "not undone: 2 commands ran" in done


def test_the_question_says_what_the_move_cannot_undo(daemon: Daemon) -> None:
    mark = commands_run(daemon)
    tip = head(daemon)
    declined = _on_a_terminal(daemon.socket, b"n\n", "rewind", str(mark))
    assert declined.returncode == 1 and head(daemon) == tip
    question = declined.stderr
    assert "not undone: 2 commands ran" in question and "ran false (exit 1)" in question
    assert question.index("not undone") < question.index("Continue?")


def test_undo_previews_the_move_it_would_undo(daemon: Daemon) -> None:
    create_builtin(daemon, "a")
    send(daemon, "a", "one")
    before = head(daemon)
    daemon.call("rewind", {"seq": before - 1})
    commands_run(daemon)  # on the branch the undo would leave
    tip = head(daemon)
    res = daemon.call("undo", {"dry_run": True})
    assert res["dry_run"] is True and res["target"] == before and res["reset_seq"] == tip + 1
    assert res["effects"]["command_count"] == 2
    assert res["preview"]["abandoned_agents"] == ["no", "yes"]
    out = ok(reynctl("undo", "--dry-run", sock=daemon.socket))
    assert out.startswith(
        f"dry run: undo of the last move would append reset record {tip + 1}, to seq {before}"
    )
    assert "not undone: 2 commands ran" in out
    declined = _on_a_terminal(daemon.socket, b"n\n", "undo")
    assert declined.returncode == 1 and "not undone: 2 commands ran" in declined.stderr
    assert head(daemon) == tip  # nothing written
    err = error_of(daemon, "undo", {"dry_run": True, "then": {"agent": "a", "text": "x"}})
    assert err["code"] == -32602 and "conflicts with `dry_run`" in err["message"], err
    assert ", to seq" not in ok(reynctl("checkout", str(before), "--dry-run", sock=daemon.socket))


def test_the_tui_confirmation_says_what_the_move_cannot_undo(daemon: Daemon) -> None:
    """At 80x24: the dialog shows the dry run's line in full; `n` changes nothing."""
    g1, g2 = two_turns(daemon)
    create_command(daemon, "no", ["false"])
    assert send(daemon, "no", "go")["outcome"] == "failed"
    tip = head(daemon)

    async def scenario() -> None:
        app = ReyndTui(daemon.socket)
        async with app.run_test(size=(80, 24)) as pilot:
            await connected(pilot, g1, g2)
            await open_picker(pilot)
            await move_to(pilot, f"n{g1}")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            await until(pilot, lambda: shows(app, "not undone: 1 command ran"), "the effects")
            effects = app.screen.query_one("#confirm-effects", Static)
            assert effects.size.height >= len(str(effects.content).splitlines())
            assert shows(app, "Enter / y: confirm")
            await pilot.press("n")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")
            assert (await call(daemon, "daemon.status"))["head"] == tip

    run(scenario)


def test_with_workspace_rewind_the_dry_run_names_the_files_that_would_change(
    ws: Path, short_tmp: Path
) -> None:
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        (ws / "kept.txt").write_text("before")
        create_builtin(d, "a")
        assert send(d, "a", "first")["outcome"] == "completed"  # records kept.txt
        mark = head(d)
        write = (
            "import json, sys, pathlib; json.load(sys.stdin); "
            "pathlib.Path('made.txt').write_text('new'); pathlib.Path('kept.txt').unlink(); "
            'print(json.dumps({"done": True, "reply": "ok"}))'
        )
        options = {"argv": [sys.executable, "-c", write], "cwd": str(ws)}
        d.call("agents.create", {"name": "w", "executor": "command", "options": options})
        assert send(d, "w", "go")["outcome"] == "completed"
        tip = head(d)
        p = d.call("rewind", {"seq": mark, "dry_run": True})["preview"]
        assert p["files"] == ["kept.txt", "made.txt"] and p["file_count"] == 2
        assert p["unrecorded"] is None  # nothing changed outside reynd: the move goes through
        assert head(d) == tip and sorted(f.name for f in ws.iterdir()) == ["made.txt"]
        d.call("rewind", {"seq": mark})
        assert sorted(f.name for f in ws.iterdir()) == ["kept.txt"]
    finally:
        d.stop()


def test_the_preview_text_names_what_it_counts() -> None:
    """reynctl's rendering of a dry run: lists cut at ten entries, the rest counted."""
    effects = Effects(
        steps=14,
        unknown_steps=2,
        commands=[
            CommandRun(agent="a", turn_id=f"t{i}", step=0, seq=10 + i, argv=["rm", "-rf", "x y"])
            for i in range(12)
        ],
        command_count=13,
        tools={"echo": 2},
    )
    preview = MovePreview(
        abandoned_turns=[TurnRef(agent="a", turn_id=f"t{i}", seq=i) for i in range(12)],
        abandoned_turn_count=12,
        files=["a.txt"],
        file_count=1,
    )
    res = m.RewindResult(
        mode="undo",
        reset_seq=30,
        target=5,
        branch=30,
        dry_run=True,
        preview=preview,
        effects=effects,
    )
    text = render.preview_text("rewind to seq 5", res, PLAIN)
    lines = text.splitlines()
    assert lines[0] == "dry run: rewind to seq 5 would append reset record 30"
    assert lines[1].startswith("  abandons 12 turn(s): a/t0, a/t1") and "a/t10" not in lines[1]
    assert "    ... and 2 more" in lines
    assert "  workspace files that change: 1" in lines and "    a.txt" in lines
    undone = "  not undone: 13 commands ran, 2 tool calls, 2 steps with unknown effects"
    assert undone in lines
    assert "    ran rm -rf 'x y' (no exit status) for a/t0, seq 10" in lines
    assert "    ... and 3 more" in lines  # 13 runs, 10 named
    assert render.rewind_text(m.RewindResult(mode="undo", reset_seq=1, target=0, branch=1), PLAIN)
    quiet = m.RewindResult(mode="undo", reset_seq=1, target=0, branch=1, effects=Effects(steps=3))
    assert "not undone" not in render.rewind_text(quiet, PLAIN)  # nothing outside reynd


def test_a_move_leaving_a_long_branch_leaves_its_effects_to_the_dry_run(daemon: Daemon) -> None:
    """Past MOVE_READ_MAX bytes of the branch it leaves, a real move does not read it
    (its latency stays flat): `effects` is null there, never zero; the dry run has them."""
    mark = commands_run(daemon)
    text = "x" * 900_000  # under the 1 MiB line limit; ten of them pass 8 MiB
    with daemon.connect() as c:  # to an agent an outside runtime drives: no turn runs
        c.call(
            "wal.append", {"agent": "x", "kind": "agent.created", "data": {"executor": "external"}}
        )
        for i in range(MOVE_READ_MAX // len(text) + 1):
            data = {"message_id": f"big{i}", "text": text}
            c.call("wal.append", {"agent": "x", "kind": "message.received", "data": data})
    dry = daemon.call("rewind", {"seq": mark, "dry_run": True})["effects"]
    assert dry["command_count"] == 2
    done = daemon.call("rewind", {"seq": mark})
    assert done["effects"] is None

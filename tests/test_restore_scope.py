"""Restore scope (issue 25): `only` "runtime" or "workspace" on rewind and checkout.

Against the real daemon with workspace rewind on, real files: each scope
moves what it says and leaves the rest byte for byte; what it leaves is
recorded, so a later move of either kind restores exactly; a workspace-only
restore is a reset record to the tip itself followed by a `workspace.files`
record ("restore"): the reflog shows it and `undo` brings the files back; a
SIGKILL at its restore is finished at start, one inside its batch leaves
neither record and the files as they were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reynd.storage.crashpoints import CRASH_ENV
from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import head, kill_daemon, records, restart
from tests.test_reynctl_cli import _on_a_terminal, ok, reynctl
from tests.test_workspace import Agent, Tree, snapshot, write
from tests.test_workspace_crash import crashing, killed_by

INVALID_PARAMS = -32602


def move(d: Daemon, method: str, **params: Any) -> dict[str, Any]:
    with d.connect() as c:
        reply = c.request(method, params)
    assert "result" in reply, reply
    return dict(reply["result"])


def state(d: Daemon) -> Any:
    """The runtime state as of the tip, without what says where the tip is."""
    result = d.call("state.get", {})
    return result["agents"]


def three_turns(d: Daemon, ws: Path) -> tuple[Agent, list[int], list[Tree]]:
    """Three turns, each with other files: their boundary seqs and the files as of each."""
    agent = Agent(d)
    seqs, trees = [], []
    for i, extra in enumerate(["b.txt", "dir/c.txt", "d.txt"], 1):
        write(ws, "a.txt", f"a{i}" * i)
        write(ws, extra, f"{extra} {i}")
        seqs.append(agent.turn())
        trees.append(snapshot(ws))
    return agent, seqs, trees


def test_only_runtime_moves_the_conversation_and_keeps_the_files(wd: Daemon, ws: Path) -> None:
    agent, (g1, g2, g3), (s1, s2, s3) = three_turns(wd, ws)
    move(wd, "rewind", seq=g1)
    at_g1 = state(wd)
    assert snapshot(ws) == s1
    move(wd, "checkout", seq=g3)
    assert snapshot(ws) == s3

    result = move(wd, "rewind", seq=g1, only="runtime")
    assert result["only"] == "runtime"
    assert result["target"] == g1
    assert snapshot(ws) == s3  # the files stay, byte for byte
    assert state(wd) == at_g1  # the conversation and agents are as of g1
    reset = result["reset_seq"]

    # The files it kept are recorded as the reset's tree: a later move of either kind is exact.
    write(ws, "a.txt", "after")
    g4 = agent.turn()
    s4 = snapshot(ws)
    move(wd, "checkout", seq=reset)
    assert snapshot(ws) == s3
    assert state(wd) == at_g1
    move(wd, "checkout", seq=g4)
    assert snapshot(ws) == s4
    move(wd, "checkout", seq=reset, only="workspace")
    assert snapshot(ws) == s3
    move(wd, "checkout", seq=g2)
    assert snapshot(ws) == s2


def test_only_workspace_restores_the_files_and_keeps_the_runtime(wd: Daemon, ws: Path) -> None:
    agent, (g1, g2, g3), (s1, s2, s3) = three_turns(wd, ws)
    tip_state = state(wd)
    tip = head(wd)

    result = move(wd, "rewind", seq=g1, only="workspace")
    assert snapshot(ws) == s1  # the files as of g1
    assert state(wd) == tip_state  # the runtime stays at the tip
    reset = result["reset_seq"]
    assert result["only"] == "workspace"
    assert result["files_as_of"] == g1
    assert result["target"] == tip  # a reset record to the tip itself
    # The lineage: the reset record, then the files as of g1 at the tip, in one batch.
    (restore,) = records(wd, kind="workspace.files", cause="restore")
    assert restore["seq"] == reset + 1 == head(wd)

    (entry,) = wd.call("reflog.list", {"limit": 1})["entries"]
    assert entry["seq"] == reset
    assert entry["target"] == tip
    assert entry["reason"] == f"workspace files as of seq {g1}"

    # Exact afterwards: a turn on top records only what it changes.
    write(ws, "e.txt", "e")
    g4 = agent.turn()
    s4 = snapshot(ws)
    move(wd, "checkout", seq=g2)
    assert snapshot(ws) == s2
    move(wd, "checkout", seq=g4)
    assert snapshot(ws) == s4
    move(wd, "checkout", seq=reset + 1, only="workspace")
    assert snapshot(ws) == s1
    move(wd, "checkout", seq=g3)
    assert snapshot(ws) == s3
    assert state(wd) == tip_state


def test_undo_of_a_workspace_only_restore_brings_the_files_back(wd: Daemon, ws: Path) -> None:
    _, (g1, _, _), (s1, _, s3) = three_turns(wd, ws)
    tip_state = state(wd)
    write(ws, "unrecorded.txt", "mine")  # not recorded yet: kept before the reset record
    edited = snapshot(ws)

    with wd.connect() as c:
        dirty = c.request("rewind", {"seq": g1, "only": "workspace"})
    assert dirty["error"]["code"] == -32015, dirty  # workspace_dirty: as any restore
    # A rewind has no force: the way on it names is a checkout that has.
    says = dirty["error"]["message"]
    assert "unrecorded.txt" in says and "Nothing was changed" in says, says
    assert f"`reynctl checkout {g1} --force --only workspace`" in says, says
    assert "only=runtime" not in says  # the files are all this move is about
    move(wd, "checkout", seq=g1, only="workspace", force=True)
    assert snapshot(ws) == s1
    assert snapshot(ws) != s3

    result = move(wd, "undo")
    assert snapshot(ws) == edited  # the unrecorded file too
    assert state(wd) == tip_state
    entries = wd.call("reflog.list", {"limit": 2})["entries"]
    assert [e["seq"] for e in entries] == [result["reset_seq"], result["target"] + 1]


def test_only_workspace_needs_workspace_rewind(daemon: Daemon) -> None:
    agent = Agent(daemon)
    g1 = agent.turn()
    agent.turn()
    with daemon.connect() as c:
        reply = c.request("rewind", {"seq": g1, "only": "workspace"})
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert "workspace rewind is off" in reply["error"]["message"]
    assert records(daemon, kind="rewind") == []
    # only runtime is a plain rewind there
    assert move(daemon, "rewind", seq=g1, only="runtime")["target"] == g1


def test_only_workspace_refuses_then_and_reapply(wd: Daemon, ws: Path) -> None:
    _, (g1, _, _), _ = three_turns(wd, ws)
    for extra in ({"then": {"agent": "ada", "text": "hi"}}, {"reapply": "messages"}):
        with wd.connect() as c:
            reply = c.request("checkout", {"seq": g1, "only": "workspace", **extra})
        assert reply["error"]["code"] == INVALID_PARAMS, reply
        assert "only=workspace" in reply["error"]["message"]
    with wd.connect() as c:
        reply = c.request("rewind", {"seq": g1, "only": "files"})
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    # A dry run previews a whole move: it does not take a scope.
    for only in ("runtime", "workspace"):
        with wd.connect() as c:
            reply = c.request("rewind", {"seq": g1, "only": only, "dry_run": True})
        assert reply["error"]["code"] == INVALID_PARAMS, reply
        assert "conflicts with `dry_run`" in reply["error"]["message"]
    assert records(wd, kind="rewind") == []


def test_a_crash_in_a_workspace_only_restore_is_finished_at_start(
    short_tmp: Path, ws: Path
) -> None:
    d = crashing(short_tmp, ws, "workspace.before_restore")
    _, (g1, _, _), (s1, _, _) = three_turns(d, ws)
    tip_state = state(d)
    killed_by(d, "rewind", {"seq": g1, "only": "workspace"})
    d = restart(d, short_tmp)
    try:
        assert snapshot(ws) == s1
        assert state(d) == tip_state
        (restore,) = records(d, kind="workspace.files", cause="restore")
        assert restore["seq"] == head(d)
    finally:
        d.stop()


def test_reynctl_only(wd: Daemon, ws: Path) -> None:
    _, (g1, g2, _), (s1, _, s3) = three_turns(wd, ws)
    out = ok(reynctl("rewind", str(g1), "--only", "workspace", "--yes", sock=wd.socket))
    assert f"restored the workspace's files as of seq {g1}" in out
    assert snapshot(ws) == s1
    out = ok(reynctl("undo", "--yes", sock=wd.socket))
    assert snapshot(ws) == s3
    out = ok(reynctl("checkout", str(g2), "--only", "runtime", "--yes", sock=wd.socket))
    assert f"rewound to seq {g2} (the workspace's files stay as they were)" in out
    assert snapshot(ws) == s3
    bad = reynctl("rewind", str(g1), "--only", "files", "--yes", sock=wd.socket)
    assert bad.returncode == 2 and "'files' is not one of 'runtime', 'workspace'" in bad.stderr
    # The conversation stays at the tip: nothing for --send/--reapply to follow (no traceback).
    for extra in (("--send", "ada", "hi"), ("--reapply", "messages")):
        for move in ("rewind", "checkout"):
            bad = reynctl(move, str(g1), "--only", "workspace", *extra, "--yes", sock=wd.socket)
            assert bad.returncode == 2, bad.stderr
            assert "--only workspace leaves the conversation at the tip" in bad.stderr
            assert "Traceback" not in bad.stderr


def test_the_question_of_a_workspace_only_restore_says_what_it_does(wd: Daemon, ws: Path) -> None:
    _, (g1, _, _), _ = three_turns(wd, ws)
    tip = head(wd)
    declined = _on_a_terminal(wd.socket, b"n\n", "rewind", str(g1), "--only", "workspace")
    assert declined.returncode == 1 and head(wd) == tip
    question = declined.stderr
    assert "the workspace's files become those as of that seq" in question
    # It abandons nothing: no agent moves, and no effects to warn of.
    assert "every agent moves" not in question and "not undone" not in question


def test_a_sigkill_inside_a_workspace_only_batch_leaves_neither(short_tmp: Path, ws: Path) -> None:
    d = start_daemon(short_tmp, config=workspace_config(ws), env={CRASH_ENV: "wal.mid_batch:1"})
    try:
        _, (g1, _, _), (_, _, s3) = three_turns(d, ws)
        tip, tip_state = head(d), state(d)
        with d.connect() as c, pytest.raises(EOFError):
            c.request("checkout", {"seq": g1, "only": "workspace"})
        d.wait()
        assert [r["kind"] for r in records(d, after=tip)] == ["rewind"]  # torn after it
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        assert head(d) == tip and not records(d, after=tip)
        assert snapshot(ws) == s3  # the files are restored only once the batch is durable
        assert state(d) == tip_state
        assert not (d.state_dir / "state" / "workspace-restore.json").exists()
    finally:
        d.stop()

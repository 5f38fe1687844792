"""Workspace rewind tied to the runtime: the tree as of any seq, steps included (issue 11).

Agents run in the real daemon (builtin and `command` executors); the
`command` program (tests/runtime_program.py) writes and deletes files in
the workspace as its steps say. Each test runs with changes found by
inotify (the default) and by a full scan at every record (`watch = false`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import (
    PROGRAM,
    agent,
    create_builtin,
    log_lines,
    records,
    restart,
    send,
    wait_for_log,
    wait_turn_end,
)


@pytest.fixture(params=[True, False], ids=["inotify", "full-scan"])
def wd(request: pytest.FixtureRequest, ws: Path, short_tmp: Path) -> Iterator[Daemon]:
    """Workspace rewind on, changes found by inotify or by a full scan at every record."""
    extra = f"watch = {'true' if request.param else 'false'}\n"
    d = start_daemon(short_tmp, config=workspace_config(ws, extra))
    yield d
    d.stop()


def files(ws: Path) -> dict[str, str]:
    return {p.relative_to(ws).as_posix(): p.read_text() for p in ws.rglob("*") if p.is_file()}


def create_writer(d: Daemon, name: str, ws: Path, prog_dir: Path) -> None:
    """An agent whose command program writes in the workspace (its cwd)."""
    prog_dir.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {
        "argv": [sys.executable, "-S", PROGRAM],
        "env": {"PROG_DIR": str(prog_dir)},
        "cwd": str(ws),
        "timeout": 30,
    }
    d.call("agents.create", {"name": name, "executor": "command", "options": options})


def test_a_write_right_after_the_turn_is_not_in_its_checkpoint(wd: Daemon, ws: Path) -> None:
    """Issue 11, scenario 1: the tree of a checkpoint is the tree as of its seq."""
    create_builtin(wd, "ada")
    boundaries = []
    for i in range(4):
        (ws / "f.txt").write_text(f"v{i}")
        done = send(wd, "ada", f"turn {i}")
        assert done["outcome"] == "completed"
        boundaries.append(done["boundary_seq"])
        (ws / "f.txt").write_text(f"after {i}")  # at once: before any capture could run
    send(wd, "ada", "last")  # records the last write
    for i, seq in enumerate(boundaries):
        with wd.connect() as c:
            reply = c.request("checkout", {"seq": seq})
        assert "result" in reply, reply
        assert (ws / "f.txt").read_text() == f"v{i}", f"checkpoint {i} (seq {seq})"


def test_act_turn_rewind_keeps_the_files_of_ghost_replayed_steps(
    wd: Daemon, ws: Path, short_tmp: Path
) -> None:
    """Issue 11, scenario 2: steps 0 and 1 are replayed from memos, their files stay."""
    create_writer(wd, "w", ws, short_tmp / "prog")
    done = send(wd, "w", "write write write write")
    turn = done["turn_id"]
    everything = {f"step{k}.txt": f"{turn} step {k}\n" for k in range(4)}
    assert files(ws) == everything
    (commit1,) = records(wd, kind="step.committed", turn_id=turn, step=1)
    calls = agent(wd, "w")["executor_calls"]

    result = wd.call("act_turn.rewind", {"agent": "w", "seq": commit1["seq"]})
    assert result["ghost_replayed"] == 2
    wait_turn_end(wd, turn, after=result["reset_seq"])
    assert files(ws) == everything
    assert agent(wd, "w")["executor_calls"] == calls + 3  # steps 2, 3 and the reply

    # A plain rewind to the same seq: the same tree, and the turn goes on from there.
    with wd.connect() as c:
        reply = c.request("rewind", {"seq": commit1["seq"]})
    assert "result" in reply, reply
    wait_turn_end(wd, turn, after=reply["result"]["reset_seq"])
    assert files(ws) == everything


def external_turn(d: Daemon, ws: Path) -> list[tuple[int, dict[str, str]]]:
    """An external runtime's turn of three steps, each changing files: (seq, files as of it)
    for each step's commit and the turn's end."""

    def add(kind: str, **data: Any) -> int:
        r = d.call("wal.append", {"agent": "ext", "kind": kind, "data": data})
        return int(r["seq"])

    add("agent.created", executor="external")
    add("message.received", message_id="m1", text="go")
    add("turn.started", turn_id="t1", message_id="m1")
    steps: list[tuple[int, dict[str, str]]] = []

    def step(k: int) -> None:
        add("step.started", turn_id="t1", step=k)
        steps.append((add("step.committed", turn_id="t1", step=k), files(ws)))

    (ws / "a.txt").write_text("a0")
    (ws / "d").mkdir()
    (ws / "d" / "b.txt").write_text("b0")
    step(0)
    (ws / "a.txt").write_text("a1")
    (ws / "d" / "b.txt").unlink()
    (ws / "d" / "c.txt").write_text("c1")
    step(1)
    (ws / "d" / "c.txt").unlink()
    (ws / "d").rmdir()
    (ws / "d").write_text("d is a file now")
    step(2)
    end = add("turn.ended", turn_id="t1")
    steps.append((end, files(ws)))
    return steps


def check_out_each(d: Daemon, ws: Path, steps: list[tuple[int, dict[str, str]]]) -> None:
    """Check out each seq, newest first then oldest first: the files as they were then."""
    for seq, expected in [*steps[::-1], *steps]:
        with d.connect() as c:
            reply = c.request("checkout", {"seq": seq})
        assert "result" in reply or seq == d.call("daemon.status")["head"], reply
        assert files(ws) == expected, seq


def test_every_seq_of_a_turn_restores_exactly_the_files_of_its_steps(wd: Daemon, ws: Path) -> None:
    """An external runtime's steps: each step.committed records what the step changed."""
    steps = external_turn(wd, ws)
    # The audit log says what each file record holds.
    audited = wd.call("events.list", {"kind": ["workspace.files"]})["events"]
    assert [e["summary"] for e in audited] == [
        "workspace (step): 2 written, 0 deleted: a.txt, d/b.txt",
        "workspace (step): 2 written, 1 deleted: a.txt, d/b.txt, d/c.txt",
        "workspace (step): 1 written, 1 deleted: d, d/c.txt",
    ]
    check_out_each(wd, ws, steps)


def test_steps_files_after_a_restart_through_the_segment_index(ws: Path, short_tmp: Path) -> None:
    """The seqs of the file records come back from the segment index, not only from a scan:
    after a restart that took every record of the turn from the index, each step's seq
    restores that step's files."""
    storage = "[storage]\nsegment_bytes = 8192\nsnapshot_min_bytes = 4096\n"
    d = start_daemon(short_tmp, config=workspace_config(ws) + storage)
    try:
        steps = external_turn(d, ws)
        for i in range(40):  # 8 KB: the index is written once 4 KiB are not indexed
            data = {"message_id": f"x{i}", "text": "x" * 200}
            d.call("wal.append", {"agent": "ext", "kind": "message.received", "data": data})
        wait_for_log(d, "index.written")
    finally:
        d.stop()
    again = restart(d, short_tmp)
    try:
        (opened,) = log_lines(again, "storage.open")
        assert opened["indexed"] >= steps[-1][0], opened  # the whole turn, from the index
        check_out_each(again, ws, steps)
    finally:
        again.stop()


def test_a_batch_takes_the_files_as_they_are_when_it_is_appended(wd: Daemon, ws: Path) -> None:
    """wal.append_batch: a step's commit or a boundary in it records the files like a single
    append does, in the same atomic batch (one file record, just before its first event)."""
    wd.call(
        "wal.append", {"agent": "ext", "kind": "agent.created", "data": {"executor": "external"}}
    )

    def turn(n: int) -> list[int]:
        t, m = {"turn_id": f"t{n}"}, {"message_id": f"m{n}"}
        events = [
            {"kind": "message.received", "data": {**m, "text": "go"}},
            {"kind": "turn.started", "data": {**t, **m}},
            {"kind": "step.started", "data": {**t, "step": 0}},
            {"kind": "step.committed", "data": {**t, "step": 0}},
            {"kind": "turn.ended", "data": t},
        ]
        return list(wd.call("wal.append_batch", {"agent": "ext", "events": events})["seqs"])

    (ws / "a.txt").write_text("a0")
    first = turn(1)
    (ws / "a.txt").write_text("a1")
    (ws / "b.txt").write_text("b1")
    second = turn(2)
    recorded = wd.call("events.list", {"kind": ["workspace.files"]})["events"]
    assert [e["seq"] for e in recorded] == [first[0] - 1, second[0] - 1]
    one, two = {"a.txt": "a0"}, {"a.txt": "a1", "b.txt": "b1"}
    check_out_each(wd, ws, [(first[3], one), (first[4], one), (second[3], two), (second[4], two)])

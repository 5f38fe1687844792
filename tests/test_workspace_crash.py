"""SIGKILL at the crash points of workspace rewind tied to the WAL (issue 11).

- `workspace.recorded`: a step's changes are read and their blobs stored,
  nothing staged yet: after the restart nothing was recorded, and the next
  record (the runtime retries its commit) records the files.
- `workspace.before_pointer`: a boundary is durable, its `trees/<seq>` file
  not written: the tree as of it is rebuilt from an older tree and the file
  records, and restores exactly.
- `workspace.before_restore` after a forced checkout: the user's changes are
  recorded before the reset, the restore is finished at start, and
  `checkout R-1` brings the changes back.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import head, kill_daemon, records, restart


def files(ws: Path) -> dict[str, str]:
    return {p.relative_to(ws).as_posix(): p.read_text() for p in ws.rglob("*") if p.is_file()}


class Ext:
    """An external runtime's agent, appending over the socket."""

    def __init__(self, d: Daemon) -> None:
        self.d = d
        self.n = 0
        self.add("agent.created", executor="external")

    def add(self, kind: str, **data: Any) -> int:
        r = self.d.call("wal.append", {"agent": "x", "kind": kind, "data": data})
        return int(r["seq"])

    def begin(self) -> str:
        self.n += 1
        self.add("message.received", message_id=f"m{self.n}", text="go")
        self.add("turn.started", turn_id=f"t{self.n}", message_id=f"m{self.n}")
        return f"t{self.n}"


def checkout(d: Daemon, seq: int) -> None:
    with d.connect() as c:
        reply = c.request("checkout", {"seq": seq})
    assert "result" in reply, reply


def crashing(workdir: Path, ws: Path, point: str) -> Daemon:
    return start_daemon(workdir, config=workspace_config(ws), env={"REYN_CRASH_AT": point})


def killed_by(d: Daemon, method: str, params: dict[str, Any]) -> None:
    """Send a request the crash point kills the daemon in; reap it."""
    with d.connect() as c, contextlib.suppress(EOFError, ConnectionError):
        c.request(method, params)
    kill_daemon(d)


def test_a_crash_after_the_blobs_before_the_record(short_tmp: Path, ws: Path) -> None:
    d = crashing(short_tmp, ws, "workspace.recorded")
    ext = Ext(d)
    turn = ext.begin()
    started = ext.add("step.started", turn_id=turn, step=0)
    (ws / "a.txt").write_text("a0")
    killed_by(d, "wal.append", {"agent": "x", "kind": "step.committed", "data": {"turn_id": turn}})

    d = restart(d, short_tmp)
    try:
        ext.d = d
        assert head(d) == started  # the commit never became durable
        assert records(d, kind="workspace.files") == []
        assert files(ws) == {"a.txt": "a0"}
        # The runtime commits again: the change made before the crash is recorded now.
        commit = ext.add("step.committed", turn_id=turn, step=0)
        (rec,) = records(d, kind="workspace.files")
        assert rec["seq"] == commit - 1 and rec["ops"][0][:2] == ["a.txt", "f"]
        checkout(d, started)
        assert files(ws) == {}
        checkout(d, commit)
        assert files(ws) == {"a.txt": "a0"}
    finally:
        d.stop()


def test_a_crash_before_the_tree_file_of_a_boundary(short_tmp: Path, ws: Path) -> None:
    d = crashing(short_tmp, ws, "workspace.before_pointer")
    ext = Ext(d)
    turn = ext.begin()
    (ws / "a.txt").write_text("a1")
    (ws / "d").mkdir()
    (ws / "d" / "b.txt").write_text("b1")
    ext.add("step.started", turn_id=turn, step=0)
    ext.add("step.committed", turn_id=turn, step=0)
    killed_by(d, "wal.append", {"agent": "x", "kind": "turn.ended", "data": {"turn_id": turn}})

    d = restart(d, short_tmp)
    try:
        ext.d = d
        boundary = head(d)
        assert records(d, seq=boundary)[0]["kind"] == "turn.ended"
        assert not (d.state_dir / "state" / "trees" / f"{boundary:020d}").exists()
        s1 = files(ws)
        turn = ext.begin()
        (ws / "a.txt").write_text("a2")
        (ws / "d" / "b.txt").unlink()
        ext.add("turn.ended", turn_id=turn)
        checkout(d, boundary)
        assert files(ws) == s1
    finally:
        d.stop()


def test_a_crash_in_a_forced_checkout_keeps_the_user_changes(short_tmp: Path, ws: Path) -> None:
    d = crashing(short_tmp, ws, "workspace.before_restore")
    ext = Ext(d)
    turn = ext.begin()
    (ws / "a.txt").write_text("a1")
    g1 = ext.add("turn.ended", turn_id=turn)
    turn = ext.begin()
    (ws / "a.txt").write_text("a2")
    ext.add("turn.ended", turn_id=turn)
    (ws / "a.txt").write_text("mine")  # the user's
    (ws / "n.txt").write_text("new")
    edited = files(ws)
    killed_by(d, "checkout", {"seq": g1, "force": True})
    assert (d.state_dir / "state" / "workspace-restore.json").is_file()

    d = restart(d, short_tmp)
    try:
        assert files(ws) == {"a.txt": "a1"}  # the restore was finished at start
        reset = head(d)
        (kept,) = records(d, kind="workspace.files", cause="reset")
        assert kept["seq"] == reset - 1
        checkout(d, reset - 1)
        assert files(ws) == edited
    finally:
        d.stop()

"""Workspace rewind against the real daemon: real files, real checkouts, a real git repository.

Each generation is a `turn.ended` appended over the socket (an external
runtime's turn); the daemon records what changed in the workspace in the
same batch, before it answers, so the test may touch the files again as
soon as the append returned.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import kill_daemon, records, restart, wait_until
from tests.test_reynctl_cli import reynctl

Tree = dict[str, tuple[Any, ...]]


class Agent:
    """An external agent whose turns cut generations."""

    def __init__(self, d: Daemon, name: str = "ada") -> None:
        self.d = d
        self.name = name
        self.n = 0
        self.add("agent.created")

    def add(self, kind: str, **data: Any) -> int:
        result = self.d.call("wal.append", {"agent": self.name, "kind": kind, "data": data})
        return int(result["seq"])

    def turn(self) -> int:
        """One turn; returns its boundary seq (the workspace as of it is durable)."""
        self.n += 1
        n = self.n
        self.add("message.received", message_id=f"m{n}", text=f"q{n}")
        self.add("turn.started", turn_id=f"t{n}", message_id=f"m{n}")
        return self.add("turn.ended", turn_id=f"t{n}", reply=f"r{n}")


def wait_tree_file(d: Daemon, seq: int) -> None:
    """Until `state/trees/<seq>` is written (after the boundary, off the commit path)."""
    index = d.state_dir / "state" / "trees" / f"{seq:020d}"
    wait_until(index.is_file, f"the tree file of seq {seq}")


def snapshot(root: Path) -> Tree:
    """Every path under root except .git/: kind, bytes or link target, mode."""
    out: Tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir.parts[:1] == (".git",):
            continue
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            if rel == ".git":
                continue
            if p.is_symlink():
                out[rel] = ("l", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("d",)
            else:
                out[rel] = ("f", p.read_bytes(), p.stat().st_mode & 0o777)
    return out


def fingerprint(root: Path) -> str:
    """Names, bytes and modes of everything under root (a .git directory)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        st = p.lstat()
        h.update(str(st.st_mode).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def git(ws: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


def write(ws: Path, rel: str, text: str, mode: int | None = None) -> None:
    p = ws / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    if mode is not None:
        p.chmod(mode)


def checkout(d: Daemon, seq: int, force: bool = False) -> dict[str, Any]:
    with d.connect() as c:
        return c.request("checkout", {"seq": seq, "force": force})


def test_files_are_restored_exactly_on_checkout_and_fork_switch(wd: Daemon, ws: Path) -> None:
    git(ws, "init", "-q")
    write(ws, "README", "hello\n")
    git(ws, "add", "README")
    git(ws, "commit", "-qm", "init")
    write(ws, "notes.log", "ignored\n")
    agent = Agent(wd)

    write(ws, "a.txt", "a1")
    write(ws, "b.txt", "b1")
    write(ws, "dir/sub/c.txt", "c1")
    g1 = agent.turn()
    s1 = snapshot(ws)

    write(ws, "a.txt", "a2 longer")
    (ws / "b.txt").unlink()
    shutil.rmtree(ws / "dir")
    write(ws, "run.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("a.txt", ws / "link")
    os.symlink("../outside", ws / "dangling")
    g2 = agent.turn()
    s2 = snapshot(ws)

    write(ws, "a.txt", "a3")
    write(ws, "new/deep/e.txt", "e3")
    g3 = agent.turn()
    s3 = snapshot(ws)

    # The user's git work and ignored files: reynd never captures nor restores them.
    git(ws, "tag", "v1")
    write(ws, "notes.log", "changed by the user\n")
    write(ws, "build/out.o", "object")
    git_before = fingerprint(ws / ".git")

    def without_user_files(tree: Tree) -> Tree:
        return {k: v for k, v in tree.items() if not k.startswith(("notes.log", "build"))}

    assert checkout(wd, g1)["result"]["mode"] == "undo"
    assert without_user_files(snapshot(ws)) == without_user_files(s1)
    assert (ws / "notes.log").read_text() == "changed by the user\n"
    assert (ws / "build/out.o").read_text() == "object"

    # A new branch from g1.
    write(ws, "a.txt", "a4")
    write(ws, "f.txt", "f4")
    g4 = agent.turn()
    s4 = snapshot(ws)

    assert checkout(wd, g3)["result"]["mode"] == "fork_switch"
    assert without_user_files(snapshot(ws)) == without_user_files(s3)
    assert checkout(wd, g2)["result"]["mode"] == "undo"
    assert without_user_files(snapshot(ws)) == without_user_files(s2)
    assert checkout(wd, g4)["result"]["mode"] == "fork_switch"
    assert without_user_files(snapshot(ws)) == without_user_files(s4)
    assert fingerprint(ws / ".git") == git_before
    assert (ws / "notes.log").read_text() == "changed by the user\n"
    assert not list(ws.rglob(".reynd-tmp-*"))


def test_a_user_edit_refuses_checkout_and_force_keeps_it(wd: Daemon, ws: Path) -> None:
    agent = Agent(wd)
    write(ws, "a.txt", "a1")
    write(ws, "b.txt", "b1")
    g1 = agent.turn()
    s1 = snapshot(ws)
    write(ws, "a.txt", "a2")
    agent.turn()
    s2 = snapshot(ws)

    # Outside reynd: an edit, a delete, a create, and an ignored file.
    write(ws, "a.txt", "edited by hand")
    (ws / "b.txt").unlink()
    write(ws, "mine.txt", "new")
    write(ws, "trace.log", "ignored")
    edited = snapshot(ws)
    head = wd.call("daemon.status")["head"]

    # A dry run says the move would be refused, and why (it writes nothing either).
    dry = wd.call("checkout", {"seq": g1, "dry_run": True})["preview"]
    assert dry["unrecorded"] == ["a.txt", "b.txt", "mine.txt"] and dry["unrecorded_count"] == 3
    shown = reynctl("checkout", str(g1), "--dry-run", sock=wd.socket)
    assert "refused as it stands: 3 workspace change(s) reynd did not record" in shown.stdout
    assert "    mine.txt" in shown.stdout
    forced = reynctl("checkout", str(g1), "--dry-run", "--force", sock=wd.socket).stdout
    assert "3 workspace change(s) reynd did not record: --force records them first" in forced

    reply = checkout(wd, g1)
    err = reply["error"]
    assert err["code"] == -32015
    assert err["data"]["paths"] == ["a.txt", "b.txt", "mine.txt"]
    assert err["data"]["head"] == head
    assert "a.txt" in err["message"] and "checkout R-1" in err["message"]
    with wd.connect() as c:  # a rewind is refused the same way, pointed at what has force
        refused = c.request("rewind", {"seq": g1})["error"]
    assert refused["code"] == -32015
    assert f"`reynctl checkout {g1} --force`" in refused["message"], refused
    assert f"`reynctl checkout {g1} --only runtime`" in refused["message"], refused
    assert snapshot(ws) == edited
    assert wd.call("daemon.status")["head"] == head  # nothing was written

    forced = checkout(wd, g1, force=True)["result"]
    assert {k: v for k, v in snapshot(ws).items() if k != "trace.log"} == s1
    assert (ws / "trace.log").read_text() == "ignored"
    # The edits were recorded first, right after the old tip, on the branch left.
    kept = forced["reset_seq"] - 1
    assert kept == head + 1
    (rec,) = records(wd, kind="workspace.files", seq=kept)
    assert rec["cause"] == "reset"
    assert [op[:2] for op in rec["ops"]] == [["a.txt", "f"], ["b.txt", "-"], ["mine.txt", "f"]]
    (reset,) = records(wd, kind="rewind", seq=forced["reset_seq"])
    assert reset["supersedes"] == kept  # the reset record was staged complete, after it

    # Undo the forced restore: the record before it holds what the workspace held.
    assert checkout(wd, kept)["result"]["mode"] == "fork_switch"
    assert snapshot(ws) == edited
    # The old tip's own tree is unchanged: as recorded at the tip.
    write(ws, "trace.log", "ignored")
    assert checkout(wd, head)["result"]["mode"] == "undo"
    assert {k: v for k, v in snapshot(ws).items() if k != "trace.log"} == {
        k: v for k, v in s2.items() if k != "trace.log"
    }


def test_disabled_never_touches_the_workspace(short_tmp: Path, ws: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        agent = Agent(d)
        write(ws, "a.txt", "a1")
        g1 = agent.add("message.received", message_id="m1", text="q")
        agent.add("turn.started", turn_id="t1", message_id="m1")
        write(ws, "a.txt", "a2")
        write(ws, "b.txt", "b2")
        agent.add("turn.ended", turn_id="t1")
        before = snapshot(ws)
        assert "result" in checkout(d, g1)
        assert snapshot(ws) == before
        state = d.state_dir / "state"
        assert not (state / "blobs").exists() and not (state / "trees").exists()
    finally:
        d.stop()


def test_a_crash_mid_restore_is_completed_at_restart(short_tmp: Path, ws: Path) -> None:
    d = start_daemon(
        short_tmp, config=workspace_config(ws), env={"REYN_CRASH_AT": "workspace.restore.file:3"}
    )
    try:
        agent = Agent(d)
        for i in range(6):
            write(ws, f"f{i}.txt", f"one {i}")
        g1 = agent.turn()
        s1 = snapshot(ws)
        for i in range(6):
            write(ws, f"f{i}.txt", f"two {i}")
        write(ws, "extra.txt", "two")
        agent.turn()
        with d.connect() as c, pytest.raises((EOFError, ConnectionError)):
            c.request("checkout", {"seq": g1})
    finally:
        kill_daemon(d)  # already dead by the crash point: reaps it
    half = snapshot(ws)
    assert half != s1  # the crash hit mid-way: some files old, some new
    assert (d.state_dir / "state" / "workspace-restore.json").is_file()

    d2 = restart(d, short_tmp)
    try:
        assert snapshot(ws) == s1
        assert not (d2.state_dir / "state" / "workspace-restore.json").exists()
        # The restored tree is the record now: a further checkout is not refused.
        head = d2.call("daemon.status")["head"]
        assert "result" in checkout(d2, head - 1)
    finally:
        d2.stop()


def _store_bytes(state: Path) -> dict[str, int]:
    return {
        name: sum(p.stat().st_size for p in (state / name).rglob("*") if p.is_file())
        for name in ("blobs", "manifests", "trees")
    }


def test_storage_grows_with_changed_content_only(wd: Daemon, ws: Path) -> None:
    agent = Agent(wd)
    for i in range(200):
        write(ws, f"src/{i // 20}/file{i}.txt", f"{i:04d}" * 1024)  # 4 KiB each
    wait_tree_file(wd, agent.turn())
    state = wd.state_dir / "state"
    first = _store_bytes(state)
    assert first["blobs"] == 200 * 4096

    changed = "x" * 3000 + "y" * 1096
    write(ws, "src/0/file0.txt", changed)
    write(ws, "src/9/file199.txt", changed)  # same content twice: one blob
    wait_tree_file(wd, agent.turn())
    second = _store_bytes(state)
    assert second["blobs"] - first["blobs"] == 4096

    # Manifests: one per directory (git-like). The empty baseline at start, then root, src/
    # and src/0..9; then only root, src/, src/0 and src/9 again.
    manifests = state / "manifests"
    assert len([p for p in manifests.rglob("*") if p.is_file()]) == 1 + (1 + 1 + 10) + 4
    assert len(records(wd, kind="workspace.files")) == 2

    seq = agent.turn()  # nothing changed: no blob, no manifest, no tree file, no record
    assert wd.call("daemon.status")["head"] == seq
    third = _store_bytes(state)
    assert third == second
    assert len(records(wd, kind="workspace.files")) == 2


def gc_daemon(workdir: Path, ws: Path, retention: str = "") -> Daemon:
    """Small segments and a snapshot per record: a collection drops history soon."""
    storage = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 0\n"
    extra = f"{storage}[retention]\nsnapshot_keep = 1\n{retention}"
    return start_daemon(workdir, config=workspace_config(ws, extra))


def test_gc_collects_blobs_of_dropped_generations(short_tmp: Path, ws: Path) -> None:
    d = gc_daemon(short_tmp, ws)
    try:
        agent = Agent(d)
        seqs = []
        for n in range(30):
            write(ws, "big.txt", f"version {n}\n" * 100)
            seqs.append(agent.turn())
        blobs = d.state_dir / "state" / "blobs"
        before = len([p for p in blobs.rglob("*") if p.is_file()])
        assert before == 30
        gc = d.call("retention.gc")
        assert gc["floor"] > seqs[5], gc
        after = len([p for p in blobs.rglob("*") if p.is_file()])
        assert 0 < after < before
        # Every generation still in the window restores.
        kept = [s for s in seqs if s >= gc["floor"]]
        write(ws, "big.txt", f"version {29}\n" * 100)
        assert "result" in checkout(d, kept[0])
        assert (ws / "big.txt").read_text() == f"version {seqs.index(kept[0])}\n" * 100
    finally:
        d.stop()


def test_gc_keeps_what_the_trees_above_the_floor_need(short_tmp: Path, ws: Path) -> None:
    """Trees inside a turn whose file records fall below the new floor: pinned first."""
    d = gc_daemon(short_tmp, ws, "wal_keep_records = 50\n")
    try:
        agent = Agent(d)
        agent.add("message.received", message_id="m1", text="q")
        agent.add("turn.started", turn_id="t1", message_id="m1")
        commits: list[tuple[int, Tree]] = []
        for k in range(40):  # one file rewritten by every step: its blobs are in records only
            write(ws, "one.txt", f"step {k}\n" * 20)
            write(ws, f"many/{k}.txt", f"{k}")
            agent.add("step.started", turn_id="t1", step=k)
            commits.append((agent.add("step.committed", turn_id="t1", step=k), snapshot(ws)))
        agent.add("turn.ended", turn_id="t1")
        gc = d.call("retention.gc")  # keeps the last 50 records: the floor lands in the turn
        floor = gc["floor"]
        kept = [(seq, tree) for seq, tree in commits if seq >= floor]
        assert commits[0][0] < floor and kept, (floor, commits[0][0], commits[-1][0])
        for seq, tree in [kept[0], kept[-1], kept[len(kept) // 2]]:
            assert "result" in checkout(d, seq), seq
            assert snapshot(ws) == tree, seq
    finally:
        d.stop()

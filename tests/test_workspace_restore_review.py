"""Adversarial review of the workspace restore (issue 22 items 1, 2): against real daemons.

- A damaged or hostile manifest in the state dir names a blob by a `ref`
  that is not a digest: the restore must never read a file outside the blob
  store (and write it into the workspace) because of it.
- A mode-only checkout on a nearly full disk: each file is replaced one at a
  time, so it fits; the preflight must not refuse it.
- The workspace root swapped, made anew or reached through a new symlink;
  a restore that fails, and what the next steps record meanwhile; a tree
  deeper than the descriptors the daemon may hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reynd.workspace.blobs import ObjectStore
from reynd.workspace.dirs import OPEN_LEVELS, Dirs, Unsafe
from reynd.workspace.model import Item
from reynd.workspace.preflight import preflight
from reynd.workspace.restore import restore_tree
from reynd.workspace.tree import Ignore, scan
from tests.conftest import workspace_config
from tests.harness import Daemon, small_tmpfs, start_daemon
from tests.runtime_helpers import records, restart
from tests.test_workspace import Agent, gc_daemon, wait_tree_file, write
from tests.test_workspace_restore import UNRESTORABLE, checkout, snapshot


def file_ops(d: Daemon, after: int = 0) -> list[tuple[str, str]]:
    """(path, kind) of each file op in the workspace.files records above `after`, in order."""
    return [
        (op[0], op[1]) for r in records(d, after=after, kind="workspace.files") for op in r["ops"]
    ]


def recorded_paths(d: Daemon, after: int = 0) -> list[str]:
    return [path for path, _ in file_ops(d, after)]


def _manifests_with(state_dir: Path, name: str, ref: str) -> list[Path]:
    out = []
    for p in state_dir.rglob("*"):
        if "manifests" not in p.parts or not p.is_file():
            continue
        try:
            m = json.loads(p.read_bytes())
        except ValueError:
            continue
        entry = m.get("entries", {}).get(name) if isinstance(m, dict) else None
        if entry is not None and entry[2] == ref:
            out.append(p)
    return out


def test_a_hostile_manifest_ref_never_reads_a_file_outside_the_blob_store(
    short_tmp: Path, ws: Path
) -> None:
    secret = short_tmp / "secret"
    secret.write_text("not the workspace's")
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        write(ws, "a.txt", "a1")
        g1 = agent.turn()
        write(ws, "a.txt", "a2")
        g2 = agent.turn()
        wait_tree_file(d, g2)  # the start loads the tip's tree, not the damaged one
    finally:
        d.stop()
    digest = hashlib.sha256(b"a1").hexdigest()
    found = _manifests_with(d.state_dir, "a.txt", digest)
    assert found, "no manifest holds a.txt"
    hostile = "xx" + str(secret)  # ObjectStore.path: root / "xx" / "/.../secret"
    for p in found:
        p.chmod(0o644)
        p.write_bytes(p.read_bytes().replace(digest.encode(), hostile.encode()))
    d = restart(d, short_tmp)
    try:
        head = d.call("daemon.status")["head"]
        reply = checkout(d, g1)
        assert (ws / "a.txt").read_text() != "not the workspace's", (
            "the restore copied a file from outside the blob store into the workspace",
            reply,
        )
        # A damaged manifest is refused before the reset record, saying so.
        assert reply.get("error", {}).get("code") == UNRESTORABLE, reply
        assert "damaged" in reply["error"]["message"], reply
        assert d.call("daemon.status")["head"] == head
        assert (ws / "a.txt").read_text() == "a2"
    finally:
        d.stop()


@pytest.fixture
def small_ws(short_tmp: Path) -> Iterator[Path]:
    """A workspace on its own 8 MiB tmpfs (root only)."""
    with small_tmpfs(short_tmp / "ws", "8m") as path:
        yield path


def test_a_mode_only_checkout_on_a_nearly_full_disk_is_not_refused(
    short_tmp: Path, small_ws: Path
) -> None:
    ws = small_ws
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        for i in range(5):  # 5 MiB of 8: each file replaced alone needs 1 MiB more
            (ws / f"f{i}").write_bytes(os.urandom(1 << 20))
            (ws / f"f{i}").chmod(0o644)
        g1 = agent.turn()
        for i in range(5):
            (ws / f"f{i}").chmod(0o755)
        agent.turn()
        reply = checkout(d, g1)
        assert "result" in reply, reply
        assert all((ws / f"f{i}").stat().st_mode & 0o777 == 0o644 for i in range(5))
        # What does not fit is still refused: a new 2.5 MiB file, 1 MiB free.
        (ws / "big").write_bytes(os.urandom(5 << 19))
        g3 = agent.turn()
        (ws / "big").unlink()
        agent.turn()
        (ws / "fill.log").write_bytes(b"\0" * (2 << 20))  # ignored: no change to record
        reply = checkout(d, g3)
        assert reply.get("error", {}).get("code") == UNRESTORABLE, reply
        assert "free" in reply["error"]["data"]["reasons"]["."], reply
        assert not (ws / "big").exists()
    finally:
        d.stop()


def test_a_setuid_file_is_not_restored_setuid_and_owned_by_the_daemon(
    short_tmp: Path, ws: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the case is a daemon running as root")
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        write(ws, "tool", "#!/bin/sh\nid\n")
        os.chown(ws / "tool", 65534, 65534)  # a user's own file
        (ws / "tool").chmod(0o4755)
        g1 = agent.turn()
        write(ws, "tool", "#!/bin/sh\necho changed\n")
        agent.turn()
        assert "result" in checkout(d, g1)
        s = (ws / "tool").lstat()
        assert not (s.st_uid == 0 and s.st_mode & 0o6000), (
            f"restored owned by uid {s.st_uid} with mode {oct(s.st_mode & 0o7777)}"
        )
    finally:
        d.stop()


DEEP = "/".join(["d"] * 190)


def _deep_turns(short_tmp: Path, ws: Path) -> tuple[Daemon, int]:
    """A daemon under a 128-descriptor limit (reserve 32), two turns on a 190-deep file."""
    d = start_daemon(short_tmp, config=workspace_config(ws, "watch = false\n"), nofile=(128, 128))
    agent = Agent(d)
    write(ws, f"{DEEP}/leaf.txt", "one")
    g1 = agent.turn()  # before: storage_unavailable EMFILE, every turn (one fd per level)
    write(ws, f"{DEEP}/leaf.txt", "two")
    agent.turn()
    paths = recorded_paths(d)
    assert f"{DEEP}/leaf.txt" in paths, d.stderr()[-3000:]
    return d, g1


def test_a_deep_tree_under_a_low_fd_limit_is_scanned(short_tmp: Path, ws: Path) -> None:
    d, _ = _deep_turns(short_tmp, ws)
    d.stop()


def test_a_deep_tree_under_a_low_fd_limit_is_restored(short_tmp: Path, ws: Path) -> None:
    d, g1 = _deep_turns(short_tmp, ws)
    try:
        reply = checkout(d, g1)
        assert "result" in reply, reply
        assert (ws / DEEP / "leaf.txt").read_text() == "one"
    finally:
        d.stop()


def _failed_checkout(
    short_tmp: Path, ws: Path, watch: str, point: str
) -> tuple[Daemon, Agent, int, int]:
    """Files a1 b1 c1 (turn g1), then a2 b2 c2 (g2); a checkout to g1 fails at `point`.

    Returns the daemon, its agent, g2 and the reset's seq.
    """
    d = start_daemon(
        short_tmp,
        config=workspace_config(ws, f"watch = {watch}\n"),  # false: every boundary scans all
        env={"REYN_CRASH_AT": point},
    )
    agent = Agent(d)
    for name in ("a", "b", "c"):
        write(ws, f"{name}.txt", f"{name}1")
    g1 = agent.turn()
    for name in ("a", "b", "c"):
        write(ws, f"{name}.txt", f"{name}2")
    g2 = agent.turn()
    assert checkout(d, g1)["error"]["data"]["stage"] == "restore"
    return d, agent, g2, d.call("daemon.status")["head"]


ONE_FILE = "workspace.restore.file:2:eio"  # b.txt's write fails
WHOLE = "workspace.before_restore:1:eio"  # nothing is restored


@pytest.mark.parametrize("watch", ["true", "false"])
@pytest.mark.parametrize(
    "case",
    [
        (ONE_FILE, [], {"a": "a1", "b": "b1", "c": "c1"}),
        (ONE_FILE, ["b3"], {"b": "b3"}),
        (ONE_FILE, ["b1", "b2"], {"b": "b2"}),  # the debt paid, then a write of b2
        (WHOLE, [], {"a": "a1", "b": "b1", "c": "c1"}),
    ],
)
def test_a_pending_restore_is_not_finished_by_recording_what_it_failed_to_restore(
    short_tmp: Path, ws: Path, watch: str, case: tuple[str, list[str], dict[str, str]]
) -> None:
    """What a restore failed to write is its debt, not a change, until someone writes the path."""
    point, writes, after_restart = case
    d, agent, _, reset = _failed_checkout(short_tmp, ws, watch, point)
    try:
        write(ws, "d.txt", "d1")
        agent.turn()
        for content in writes:
            write(ws, "b.txt", content)
            agent.turn()
        after = recorded_paths(d, after=reset)
        assert after == ["d.txt"] + ["b.txt"] * (writes[-1:] != ["b1"] and len(writes) > 0), after
    finally:
        d.stop()
    d = restart(d, short_tmp)  # finishes the restore: to the tip's tree
    try:
        assert d.call("daemon.status")["workspace"]["restore_pending"] is None
        for name, content in {**after_restart, "d": "d1"}.items():
            assert (ws / f"{name}.txt").read_text() == content, name
    finally:
        d.stop()


@pytest.mark.parametrize("watch", ["true", "false"])
def test_what_a_failed_restore_left_does_not_refuse_the_next_checkout(
    short_tmp: Path, ws: Path, watch: str
) -> None:
    d, agent, g2, _ = _failed_checkout(short_tmp, ws, watch, ONE_FILE)
    try:
        write(ws, "d.txt", "d1")
        agent.turn()  # a record between: b.txt, not written, stays owed
        assert d.call("checkout", {"seq": g2, "dry_run": True})["preview"]["unrecorded_count"] == 0
        assert "result" in checkout(d, g2), "b.txt, left by the failed restore, refused it"
        assert (ws / "b.txt").read_text() == "b2"
    finally:
        d.stop()


def _append(d: Daemon, kind: str, **data: Any) -> dict[str, Any]:
    with d.connect() as c:
        return c.request("wal.append", {"agent": "ada", "kind": kind, "data": data})


def _turn_end_refused(d: Daemon, turn: str) -> None:
    """Start `turn`; its end (a boundary: the workspace is looked at) is refused, saying why."""
    _append(d, "message.received", message_id=turn, text="q")
    _append(d, "turn.started", turn_id=turn, message_id=turn)
    head = d.call("daemon.status")["head"]
    err = _append(d, "turn.ended", turn_id=turn, reply="r").get("error")
    assert err is not None and "is not a directory now" in err["message"], err
    assert "put the workspace directory back" in err["message"], err
    assert err["data"]["errno"] in ("ELOOP", "ENOTDIR"), err
    assert d.call("daemon.status")["head"] == head, "a refused write reached the WAL"


@pytest.mark.parametrize("watch", ["true", "false"])
def test_a_workspace_root_replaced_by_a_symlink_is_not_recorded_as_everything_deleted(
    short_tmp: Path, ws: Path, watch: str
) -> None:
    """Writes are refused, saying why, while the root is a symlink; nothing is read through it."""
    elsewhere = short_tmp / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret").write_text("not the workspace's")
    aside = short_tmp / "ws-aside"
    d = start_daemon(short_tmp, config=workspace_config(ws, f"watch = {watch}\n"))
    try:
        write(ws, "a.txt", "a1")
        g1 = Agent(d).turn()
        ws.rename(aside)
        ws.symlink_to(elsewhere)
        _turn_end_refused(d, "t1")
        head = d.call("daemon.status")["head"]
        reply = checkout(d, g1)  # a restore never writes through it either
        assert "is not a directory now" in reply.get("error", {}).get("message", ""), reply
        assert d.call("daemon.status")["head"] == head
        assert sorted(p.name for p in elsewhere.iterdir()) == ["secret"]
        _turn_end_refused(d, "t2")  # the refusal left nothing behind to trip the next one
        ws.unlink()
        aside.rename(ws)
        write(ws, "b.txt", "b1")
        assert "result" in _append(d, "turn.ended", turn_id="t2", reply="r")
        ops = recorded_paths(d)
        assert ops == ["a.txt", "b.txt"], "deletions, or a file read through the link"
    finally:
        d.stop()


def test_a_tree_path_with_dot_dot_or_a_bad_ref_never_leads_the_restore_outside(
    short_tmp: Path,
) -> None:
    """The restore's own guard: a damaged tree (a WAL record's path, a manifest's ref)."""
    ws = short_tmp / "ws"
    ws.mkdir()
    write(ws, "sub/x.txt", "x")
    secret = short_tmp / "secret"
    secret.write_text("not the workspace's")
    objects = ObjectStore(short_tmp / "blobs")
    digest, size = objects.put_bytes(b"escaped")
    target = {
        "sub/x.txt": Item("f", 0o644, digest, size),
        "../escape.txt": Item("f", 0o644, digest, size),
        "sub/../../escape2.txt": Item("f", 0o644, digest, size),
        "stolen": Item("f", 0o644, "xx" + str(secret), 19),
    }
    ignore = Ignore([])
    current = scan(ws, ignore, {})
    problems = dict(preflight(ws, ignore, current, target, objects))
    assert {"../escape.txt", "sub/../../escape2.txt", "stolen"} <= problems.keys(), problems
    done = restore_tree(ws, ignore, current, target, objects)
    assert not (short_tmp / "escape.txt").exists() and not (short_tmp / "escape2.txt").exists()
    assert not (ws / "stolen").exists()
    assert (ws / "sub/x.txt").read_text() == "escaped"
    assert {p for p, _ in done.skipped} == {"../escape.txt", "sub/../../escape2.txt"}, done
    assert [p for p, _ in done.failed] == ["stolen"], done


def test_legitimate_shapes_pass_the_preflight_both_ways(short_tmp: Path, ws: Path) -> None:
    """File <-> directory, a directory deleted whole, links, mode only, a directory left
    holding only ignored content, an untouched read-only mount: none is refused."""
    ro = ws / "ro"
    write(ws, "ro/keep", "k")
    mounted = (
        subprocess.run(["mount", "--bind", str(ro), str(ro)], check=False).returncode == 0
        and subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=False).returncode == 0
    )
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        write(ws, "a", "file a")
        write(ws, "d/x", "x")
        write(ws, "d/y/z", "z")
        write(ws, "k/m", "m")
        write(ws, "mo", "mode", 0o644)
        write(ws, "e/f", "f")
        write(ws, "e/n.log", "ignored")
        (ws / "l").symlink_to("a")
        g1 = agent.turn()
        s1 = {p: v for p, v in snapshot(ws).items() if p != "e/n.log"}
        (ws / "a").unlink()
        write(ws, "a/b", "b")
        for p in ("d/y/z", "d/x", "k/m", "e/f"):
            (ws / p).unlink()
        for p in ("d/y", "d", "k"):
            (ws / p).rmdir()
        write(ws, "k", "file k")
        (ws / "mo").chmod(0o755)
        (ws / "l").unlink()
        (ws / "l").symlink_to("d/x")
        g2 = agent.turn()
        s2 = snapshot(ws)
        for target, want in ((g1, s1), (g2, s2), (g1, s1)):
            reply = checkout(d, target)
            assert "result" in reply, reply
            now = snapshot(ws)
            now.pop("e/n.log", None)
            assert now == {p: v for p, v in want.items() if p != "e/n.log"}
            assert (ws / "e" / "n.log").read_text() == "ignored"
    finally:
        d.stop()
        if mounted:
            subprocess.run(["umount", str(ro)], check=False)


def test_a_stray_file_in_the_blob_store_is_left_alone_by_gc(short_tmp: Path, ws: Path) -> None:
    """Objects are named by digest only now: a file in the store that is not one is not
    reynd's, and a collection neither trips on it nor deletes it."""
    d = gc_daemon(short_tmp, ws)
    try:
        agent = Agent(d)
        for n in range(30):
            write(ws, "big.txt", f"version {n}\n" * 100)
            agent.turn()
        stray = d.state_dir / "state" / "blobs" / "ab" / "notes.txt"
        stray.parent.mkdir(exist_ok=True)
        stray.write_text("someone's")
        gc = d.call("retention.gc")
        assert gc["floor"] > 0, gc
        assert stray.read_text() == "someone's"
    finally:
        d.stop()


@pytest.mark.parametrize("watch", ["true", "false"])
def test_a_workspace_root_made_anew_is_taken_and_watched(
    short_tmp: Path, ws: Path, watch: str
) -> None:
    """`rm -rf` and `mkdir` of the root: recorded as such, and later writes seen (inotify too)."""
    d = start_daemon(short_tmp, config=workspace_config(ws, f"watch = {watch}\n"))
    try:
        agent = Agent(d)
        write(ws, "a.txt", "a1")
        agent.turn()
        shutil.rmtree(ws)
        ws.mkdir()
        write(ws, "b.txt", "b1")
        agent.turn()
        write(ws, "c.txt", "c1")
        agent.turn()
        ops = file_ops(d)
        assert [p for p, _ in ops] == ["a.txt", "a.txt", "b.txt", "c.txt"], ops
        assert ops[1][1] == "-", f"a.txt not recorded deleted: {ops}"
    finally:
        d.stop()


@pytest.mark.parametrize("watch", ["true", "false"])
def test_a_symlink_put_on_the_way_to_the_root_is_never_followed(
    short_tmp: Path, watch: str
) -> None:
    root = short_tmp / "p" / "ws"
    root.mkdir(parents=True)
    other = short_tmp / "other"
    (other / "ws").mkdir(parents=True)
    (other / "ws" / "secret").write_text("not the workspace's")
    d = start_daemon(short_tmp, config=workspace_config(root, f"watch = {watch}\n"))
    try:
        write(root, "a.txt", "a1")
        Agent(d).turn()
        (short_tmp / "p").rename(short_tmp / "p.old")
        (short_tmp / "p").symlink_to(other)
        _turn_end_refused(d, "t1")
        paths = recorded_paths(d)
        assert paths == ["a.txt"], paths
    finally:
        d.stop()


def test_the_restore_s_directory_chain_stays_within_its_descriptors_deep_and_back(
    short_tmp: Path,
) -> None:
    """Down 100 levels, back up to 50 and across: a bounded number of descriptors open,
    each level still checked, a directory swapped above the open ones still refused."""
    ws = short_tmp / "ws"
    deep = "/".join(f"d{i}" for i in range(100))
    (ws / deep).mkdir(parents=True)

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = fds()
    with Dirs(ws) as dirs:
        assert dirs.at(deep) is not None
        assert fds() - before <= OPEN_LEVELS + 1
        half = "/".join(f"d{i}" for i in range(50))
        side = dirs.at(f"{half}/side", create=True)
        assert side is not None and fds() - before <= OPEN_LEVELS + 1
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=side))
        assert (ws / half / "side" / "f").exists()
        assert dirs.at(deep) is not None
        # A level far above the open ones replaced: found by the check, never followed.
        moved = ws / "/".join(f"d{i}" for i in range(10))
        moved.rename(short_tmp / "aside")
        moved.mkdir()
        with pytest.raises(Unsafe):
            dirs.at(f"{half}/side")
    assert fds() == before


@pytest.mark.parametrize("watch", ["true", "false"])
def test_a_start_with_the_root_missing_refuses_writes_until_it_is_back(
    short_tmp: Path, ws: Path, watch: str
) -> None:
    """An unmounted volume, a moved directory: not made anew empty, nothing recorded deleted."""
    d = start_daemon(short_tmp, config=workspace_config(ws, f"watch = {watch}\n"))
    try:
        write(ws, "a.txt", "a1")
        Agent(d).turn()
    finally:
        d.stop()
    aside = short_tmp / "ws-aside"
    ws.rename(aside)
    d = restart(d, short_tmp)
    try:
        assert not ws.exists(), "the start made an empty workspace"
        _append(d, "message.received", message_id="m", text="q")
        _append(d, "turn.started", turn_id="t", message_id="m")
        err = _append(d, "turn.ended", turn_id="t", reply="r").get("error")
        assert err is not None and "is not a directory now" in err["message"], err
        aside.rename(ws)
        write(ws, "b.txt", "b1")
        assert "result" in _append(d, "turn.ended", turn_id="t", reply="r")
        ops = recorded_paths(d)
        assert ops == ["a.txt", "b.txt"], ops
    finally:
        d.stop()

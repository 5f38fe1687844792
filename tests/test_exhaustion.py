"""The daemon's own resources running out under it: disk space, file descriptors, connections.

Against the real daemon, with the real resource exhausted: a small tmpfs
holds the state directory (root only: the test is skipped elsewhere, CI runs
as root), the daemon runs under a low RLIMIT_NOFILE (harness `nofile`), and
real clients hold its connection slots.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reynd.storage.crashpoints import CRASH_ENV
from tests.conftest import workspace_config
from tests.harness import IO_TIMEOUT, Client, Daemon, small_tmpfs, start_daemon
from tests.runtime_helpers import (
    create_builtin,
    create_program,
    log_lines,
    records,
    restart,
    send,
    wait_until,
)

CONNECTION_LIMIT = -32009
STORAGE_FAILED = -32011
STORAGE_UNAVAILABLE = -32022
# A snapshot as soon as the WAL grows past the last one (the snapshot writer opens files).
SNAPSHOT_EVERY_WRITE = "[storage]\nsnapshot_min_bytes = 0\n"


@pytest.fixture
def small_disk(short_tmp: Path) -> Iterator[Path]:
    """`short_tmp/state` on a 4 MiB tmpfs of its own (a disk that fills for real)."""
    with small_tmpfs(short_tmp / "state", "4m", mode="0700") as state:
        yield state


def test_a_full_blob_store_fails_the_turn_answers_the_caller_and_keeps_serving(
    small_disk: Path, short_tmp: Path
) -> None:
    """Issue 22, item 3: the step's files cannot be stored before its commit.

    The waiting `agents.send` gets a clear error (not a dropped connection),
    the turn ends failed, the partial blob is gone, the daemon keeps serving,
    and a restart finds the agent idle, never ambiguous.
    """
    ws = short_tmp / "ws"  # on the big disk: only the blob store fills up
    ws.mkdir()
    d = start_daemon(short_tmp, state_dir=small_disk, config=workspace_config(ws))
    try:
        create_builtin(d, "ada")
        assert send(d, "ada", "before")["outcome"] == "completed"
        (ws / "big.bin").write_bytes(os.urandom(6 << 20))  # more than the disk holds

        with d.connect() as c:
            reply = c.request(
                "agents.send", {"agent": "ada", "text": "hi", "wait": True, "timeout": 30}
            )
        assert "error" in reply, reply
        err = reply["error"]
        assert err["code"] == STORAGE_UNAVAILABLE, err
        assert err["data"]["errno"] == "ENOSPC", err
        assert "No space left on device" in err["message"], err
        turn = err["data"]["turn_id"]
        assert err["data"]["message_seq"] == int(turn[1:])

        assert d.proc.poll() is None, "the daemon must keep serving"
        (ended,) = wait_until(
            lambda: records(d, kind="turn.ended", turn_id=turn), f"turn.ended of {turn}"
        )
        assert ended["outcome"] == "failed", ended
        assert "No space left on device" in ended["reply"]
        info = d.call("agents.get", {"agent": "ada"})
        assert info["status"] == "idle", info
        assert "No space left on device" in (info["last_error"] or ""), info
        assert not list((small_disk / "state" / "blobs").glob(".tmp-*")), "partial blob left"

        (ws / "big.bin").unlink()
        (ws / "small.txt").write_text("fits")
        assert send(d, "ada", "after")["outcome"] == "completed"
    finally:
        code = d.stop(expect=None)
    assert code == 0, d.stderr()[-4000:]
    d2 = restart(d, short_tmp)
    try:
        info = d2.call("agents.get", {"agent": "ada"})
        assert info["status"] == "idle" and info["ambiguous"] is None, info
    finally:
        d2.stop()


def test_a_wal_failure_mid_turn_answers_the_waiting_send_before_the_daemon_stops(
    short_tmp: Path,
) -> None:
    """The WAL's fsync fails from the turn's first record on (rule 5: the daemon stops).

    The `agents.send` waiting for that turn is answered storage_failed, naming
    the turn, before the daemon exits 3: it used to lose its connection unanswered.
    """
    env = {CRASH_ENV: "wal.sync:3+:eio"}  # 1: agent.created, 2: the message, 3: turn.started
    d = start_daemon(short_tmp, env=env)
    try:
        create_builtin(d, "ada")
        with d.connect() as c:
            reply = c.request(
                "agents.send", {"agent": "ada", "text": "hi", "wait": True, "timeout": 30}
            )
        assert reply.get("error", {}).get("code") == STORAGE_FAILED, reply
        assert reply["error"]["data"]["turn_id"] == f"t{reply['error']['data']['message_seq']}"
        assert d.wait() == 3
    finally:
        d.stop(expect=None)


def test_a_tree_file_the_disk_refuses_costs_only_speed(short_tmp: Path) -> None:
    """A boundary is durable but its `trees/<seq>` cannot be written (ENOSPC, injected
    where a crash point sits): the daemon keeps serving, and a checkout to it restores
    exactly (from an older tree and the file records), as after a crash there."""
    ws = short_tmp / "ws"
    ws.mkdir()
    env = {CRASH_ENV: "workspace.before_pointer:1:enospc"}
    d = start_daemon(short_tmp, config=workspace_config(ws), env=env)
    try:

        def add(kind: str, **data: Any) -> int:
            r = d.call("wal.append", {"agent": "x", "kind": kind, "data": data})
            return int(r["seq"])

        add("agent.created", executor="external")
        add("message.received", message_id="m1", text="go")
        add("turn.started", turn_id="t1", message_id="m1")
        (ws / "a.txt").write_text("a1")
        boundary = add("turn.ended", turn_id="t1")
        wait_until(
            lambda: log_lines(d, "workspace.tree_not_written") or d.proc.poll() is not None,
            "the tree file's failure",
        )
        assert d.proc.poll() is None, d.stderr()[-2000:]
        assert not (d.state_dir / "state" / "trees" / f"{boundary:020d}").exists()
        add("message.received", message_id="m2", text="go")
        add("turn.started", turn_id="t2", message_id="m2")
        (ws / "a.txt").write_text("a2")
        add("turn.ended", turn_id="t2")
        with d.connect() as c:
            reply = c.request("checkout", {"seq": boundary})
        assert "result" in reply, reply
        assert (ws / "a.txt").read_text() == "a1"
        assert d.proc.poll() is None
    finally:
        code = d.stop(expect=None)
    assert code == 0, d.stderr()[-4000:]


def _open_files_limit(pid: int) -> tuple[int, int]:
    """The soft and hard RLIMIT_NOFILE of process `pid` (/proc/PID/limits)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no 'Max open files' line")


def _status_or_refusal(client: Client) -> dict[str, Any]:
    """daemon.status's reply, or the error line a refused connection got unasked."""
    with contextlib.suppress(BrokenPipeError):  # refused: closed already
        client.send_json({"jsonrpc": "2.0", "id": 1, "method": "daemon.status"})
    reply: dict[str, Any] = client.recv_json()
    return reply


def test_out_of_file_descriptors_refuses_connections_never_writes(short_tmp: Path) -> None:
    """Issue 22, item 4: `ulimit -n 64` and 100 clients.

    The daemon serves as many as its descriptors allow with a reserve kept
    for storage, refuses the others with connection_limit, and its writes
    and snapshots go on. It used to run out in the snapshot writer (EMFILE)
    and exit 3.
    """
    d = start_daemon(short_tmp, config=SNAPSHOT_EVERY_WRITE, nofile=(64, 64))
    clients = [Client(d.socket, timeout=IO_TIMEOUT) for _ in range(100)]
    try:
        writer = clients[0]  # the first in: served whatever the limit
        cap = writer.call("daemon.status").get("max_connections")  # absent before issue 22
        writer.call("wal.append", {"agent": "a", "kind": "agent.created", "data": {}})
        for i in range(200):
            data = {"message_id": f"m{i}", "text": "x" * 200}
            writer.call("wal.append", {"agent": "a", "kind": "message.received", "data": data})
        snapshots = d.state_dir / "state" / "snapshots"
        wait_until(lambda: list(snapshots.glob("*.snap")), "a snapshot")
        served, refused = [writer], 0
        for c in clients[1:]:
            reply = _status_or_refusal(c)
            if "result" in reply:
                served.append(c)
            else:
                assert reply["error"]["code"] == CONNECTION_LIMIT and reply["id"] is None, reply
                assert c.at_eof()
                refused += 1
        assert 0 < len(served) == cap < 64, (len(served), refused)
        assert refused == 100 - cap
        writer.call("wal.append", {"agent": "a", "kind": "message.received", "data": data})
        assert d.proc.poll() is None, d.stderr()[-4000:]
    finally:
        for c in clients:
            c.close()
        code = d.stop(expect=None)
    assert code == 0, d.stderr()[-4000:]


def test_the_soft_open_files_limit_is_raised_to_the_hard_one(short_tmp: Path) -> None:
    hard = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])  # no privilege needed
    assert hard >= 2048, f"this test needs a hard open-file limit of 2048 or more ({hard})"
    d = start_daemon(short_tmp, nofile=(64, hard))
    try:
        assert _open_files_limit(d.pid) == (hard, hard)
        assert d.call("daemon.status")["max_connections"] == 256  # the default: room enough
    finally:
        d.stop()


SLOTS = 3
LINE_TIMEOUT = f"max_connections = {SLOTS}\nline_timeout_s = 1.0\nidle_timeout_s = 600\n"
IDLE_TIMEOUT = "idle_timeout_s = 1.5\n"
LIMIT_EXCEEDED = -32019


class Trickler:
    """A client that sends one byte of a line every 0.1 s and never ends it (once started)."""

    def __init__(self, d: Daemon) -> None:
        self.client = Client(d.socket)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        line = b'{"jsonrpc": "2.0", "method": "daemon.status", "params": {}, "id": 1' * 1000
        for byte in line:
            if self.stop.wait(0.1):
                return
            try:
                self.client.send(bytes([byte]))
            except OSError:
                return  # closed by the daemon

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        self.client.close()


def _served(d: Daemon) -> dict[str, Any] | None:
    """daemon.status on a new connection, or None when it was refused for the limit."""
    with Client(d.socket) as c:
        reply = _status_or_refusal(c)
    if "error" in reply:
        assert reply["error"]["code"] == CONNECTION_LIMIT, reply
        return None
    return reply


def test_tricklers_cannot_lock_new_clients_out(short_tmp: Path) -> None:
    """Issue 22, item 5: every slot held by a client trickling one line forever.

    A new client is refused (the slots are full) until the line timeout
    closes the tricklers, each told why first; then it is served.
    """
    d = start_daemon(short_tmp, config=LINE_TIMEOUT)
    tricklers = [Trickler(d) for _ in range(SLOTS)]
    try:
        assert _served(d) is None, "the tricklers hold every slot"
        for t in tricklers:
            t.start()
        wait_until(lambda: _served(d), "a new client served once the tricklers timed out")
        for t in tricklers:
            reply = t.client.recv_json()
            assert reply["error"]["code"] == LIMIT_EXCEEDED and reply["id"] is None, reply
            assert reply["error"]["data"]["limit_name"] == "line_timeout_s", reply
            # Closed with the trickler's last bytes unread: a reset, or an EOF.
            with contextlib.suppress(ConnectionResetError):
                assert t.client.at_eof()
    finally:
        for t in tricklers:
            t.close()
        d.stop()


def test_idle_connections_are_closed_but_subscribers_and_waiting_calls_are_kept(
    short_tmp: Path,
) -> None:
    """Idle connections free their slot; a subscriber and a call in flight stay, however
    long they are silent."""
    d = start_daemon(short_tmp, config=IDLE_TIMEOUT)
    prog = short_tmp / "prog"
    create_program(d, "sleepy", prog)
    subscriber = Client(d.socket)
    waiting = Client(d.socket)
    try:
        sub = subscriber.call("subscribe", {"topics": ["records"]})
        # A turn whose step sleeps: the send waits (longer than the idle timeout).
        waiting.send_json(
            {
                "jsonrpc": "2.0",
                "id": "send",
                "method": "agents.send",
                "params": {"agent": "sleepy", "text": "sleep", "wait": True, "timeout": 4},
            }
        )
        with Client(d.socket) as idle:  # quiet after its call, which the others already were
            idle.call("daemon.status")
            assert idle.at_eof(), "an idle connection must be closed"
        # The idle one was silent for idle_timeout_s; the other two longer: both kept.
        reply = waiting.recv_json()
        assert reply["id"] == "send" and "result" in reply, reply
        seq = d.call("wal.append", {"agent": "ext", "kind": "agent.created", "data": {}})["seq"]
        note = subscriber.recv_json()
        while note["params"]["seq"] < seq:
            note = subscriber.recv_json()
        assert note["params"]["subscription"] == sub["subscription"], note
        assert subscriber.call("daemon.status")["connections"] >= 2
    finally:
        d.call("agents.cancel", {"agent": "sleepy"})
        subscriber.close()
        waiting.close()
        d.stop()


def _created_and_mirrored(d: Daemon) -> int:
    """Create agent `a`; return its seq once config.db mirrors it (its write done: the
    disk can then fill without catching that transaction)."""
    with d.connect() as c:
        seq: int = c.call("wal.append", {"agent": "a", "kind": "agent.created"})["seq"]
    db = d.state_dir / "state" / "config" / "config.db"

    def mirrored() -> bool:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            return bool(conn.execute("SELECT 1 FROM agents WHERE name = 'a'").fetchone())
        finally:
            conn.close()

    wait_until(mirrored, "config.db mirrors agent a")
    return seq


def _fill(disk: Path) -> Path:
    """Write a file on `disk` until the disk refuses it (ENOSPC); the file."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def test_a_clean_stop_on_a_full_disk_exits_0_and_the_next_start_serves(
    small_disk: Path, short_tmp: Path
) -> None:
    """A SIGTERM while the state dir's disk is full: the clean stop's record of the head
    in state/wal/extent is an extra, not a write anything acknowledged needs; failing it
    must not turn the stop into exit 3 (on d6f530e, before the extent file, it exited 0)."""
    d = start_daemon(short_tmp, state_dir=small_disk)
    seq = _created_and_mirrored(d)
    filler = _fill(small_disk)  # for real, to its last block
    code = d.stop(expect=None)
    assert code == 0, d.stderr()[-3000:]
    assert "extent.not_recorded" in d.stderr(), d.stderr()[-3000:]
    filler.unlink()
    d2 = restart(d, short_tmp)
    try:
        assert d2.call("daemon.status")["head"] == seq
    finally:
        d2.stop()


def test_a_start_on_a_full_disk_serves_without_writing_the_extent(
    small_disk: Path, short_tmp: Path
) -> None:
    """A start that would rewrite state/wal/extent (a state dir from before it, or one
    whose GC dropped segments since it was written) on a full disk: the file is brought
    up to date later; the start serves, as it did on d6f530e (it exited 3 on ENOSPC)."""
    d = start_daemon(short_tmp, state_dir=small_disk)
    seq = _created_and_mirrored(d)
    d.stop()
    (small_disk / "state" / "wal" / "extent").unlink()  # as a state dir of reynd 0.1 has none
    filler = _fill(small_disk)
    d2 = restart(d, short_tmp)
    try:
        assert d2.call("daemon.status")["head"] == seq
        assert "extent.not_recorded" in d2.stderr(), d2.stderr()[-3000:]
    finally:
        d2.stop(expect=None)
    filler.unlink()
    d3 = restart(d, short_tmp)  # with room again, the start writes it
    d3.stop()
    assert (small_disk / "state" / "wal" / "extent").is_file()


def test_retention_set_on_a_full_disk_says_so_and_the_daemon_serves(
    small_disk: Path, short_tmp: Path
) -> None:
    """A config.db write (retention.set) the full disk refuses: -32022 naming the full disk
    and what to do, not -32603 "internal error" with "cannot rollback - no transaction is
    active" in the log (SQLite had rolled the transaction back itself, and the explicit
    ROLLBACK hid the ENOSPC)."""
    d = start_daemon(short_tmp, state_dir=small_disk)
    try:
        d.call("retention.set", {"snapshot_keep": 3})
        filler = _fill(small_disk)
        with d.connect() as c:
            reply = c.request("retention.set", {"snapshot_keep": 4, "wal_keep_records": 1004})
        err = reply["error"]
        assert err["code"] == STORAGE_UNAVAILABLE, err
        assert "full" in err["message"] and "free disk space" in err["message"], err
        assert err["data"]["store"] == "config" and err["data"]["errno"] == "ENOSPC", err
        assert "cannot rollback" not in d.stderr()
        filler.unlink()
        policy = d.call("retention.set", {"snapshot_keep": 4})["policy"]
        assert policy["snapshot_keep"] == 4, policy
    finally:
        d.stop()

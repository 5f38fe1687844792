"""The real daemon when the disk fails under it: a failed fsync or write is fatal (rule 5).

The fault is injected inside the daemon process by a named point armed to
raise instead of kill (reynd/storage/crashpoints.py): `REYN_CRASH_AT=wal.sync:5:eio`
makes the 5th batch's fdatasync raise EIO after the batch's bytes were
written, exactly as a failing fsync does; `wal.write:5:enospc` makes the 5th
batch's write fail before any byte is written.

Several clients append concurrently (pipelined, one agent each, so batches
form by group commit). What must hold:

- no append is acknowledged after the failure: the acknowledged seqs are
  exactly 1..K (everything from batches 1-4), and every other request is
  answered, with storage_failed (-32011), or shutting_down (-32010) once the
  daemon stops taking requests: never a result, never a dropped connection;
- the daemon exits by itself, non-zero (3), without being signalled;
- a restart without the fault recovers: every acknowledged append is there
  with its seq and content.

And the records of the batch whose fsync failed? They were *written* (the
write succeeded, only the sync failed), so they sit in the file and, with no
power cut in between, recovery finds them intact and keeps them: a client was
told storage_failed for an event that is in the log after the restart. That
is correct and unavoidable: storage_failed means "not acknowledged: the
outcome is unknown", not "not written" (same as a timeout). What must never
happen is a gap or corruption: so after the restart the log is acknowledged
records 1..K, then at most a contiguous run of records each of which is one
of the failed requests (no duplicate, none invented), and nothing else. With
the write fault nothing of the failed batch reached the file, so the log is
exactly 1..K.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from reynd.protocol import events as ev
from reynd.storage.crashpoints import CRASH_ENV, _parse
from reynd.storage.store import Store
from tests.harness import READY_TIMEOUT, Client, start_daemon

CLIENTS = 4
PER_CLIENT = 12
SHUTTING_DOWN = -32010
STORAGE_FAILED = -32011
EXIT_FAILURE = 3

R = TypeVar("R")


@dataclass
class Outcome:
    """One request: (agent, message_id or None for the create) and how it ended."""

    agent: str
    message_id: str | None
    seq: int | None = None  # acknowledged
    code: int | None = None  # error code
    unanswered: bool = False


@dataclass
class ClientRun:
    outcomes: list[Outcome] = field(default_factory=list)
    error: BaseException | None = None


def _append(agent: str, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"agent": agent, "kind": kind, "data": data or {}}


def send_message(client: Client, rid: int | str, agent: str, message_id: str, text: str) -> None:
    """Send one message.received append without waiting for its answer (pipelining)."""
    data = {"message_id": message_id, "text": text}
    msg = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "wal.append",
        "params": _append(agent, "message.received", data),
    }
    client.send(json.dumps(msg).encode() + b"\n")


def _settle(out: Outcome, reply: dict[str, Any]) -> None:
    if "result" in reply:
        out.seq = reply["result"]["seq"]
    else:
        out.code = reply["error"]["code"]


def run_client(socket_path: Path, agent: str, run: ClientRun) -> None:
    """Create the agent, then pipeline PER_CLIENT messages; record every outcome."""
    try:
        with Client(socket_path) as client:
            create = Outcome(agent, None)
            run.outcomes.append(create)
            try:
                _settle(create, client.request("wal.append", _append(agent, "agent.created")))
            except (EOFError, OSError):
                create.unanswered = True
                return
            if create.seq is None:
                return
            pending: dict[int, Outcome] = {}
            for j in range(PER_CLIENT):
                out = Outcome(agent, f"{agent}-m{j}")
                run.outcomes.append(out)
                pending[1000 + j] = out
            try:
                for rid, out in pending.items():
                    assert out.message_id is not None
                    send_message(client, rid, agent, out.message_id, f"text of {out.message_id}")
                while pending:
                    reply = client.recv_json()
                    if isinstance(reply, dict) and reply.get("id") in pending:
                        _settle(pending.pop(reply["id"]), reply)
            except (EOFError, OSError):
                for out in pending.values():
                    out.unanswered = True
    except BaseException as exc:
        run.error = exc


def start_clients(
    target: Callable[[Path, str, R], None], socket_path: Path, runs: list[R]
) -> list[threading.Thread]:
    """One thread per run, each `target(socket_path, agent{i}, runs[i])`, started."""
    threads = [
        threading.Thread(target=target, args=(socket_path, f"agent{i}", run))
        for i, run in enumerate(runs)
    ]
    for t in threads:
        t.start()
    return threads


@pytest.mark.parametrize(
    ("spec", "failed_batch_written"),
    [("wal.sync:5:eio", True), ("wal.write:5:enospc", False)],
    ids=["fsync-eio", "write-enospc"],
)
def test_storage_failure_is_fatal_and_recovered(
    short_tmp: Path, spec: str, failed_batch_written: bool
) -> None:
    daemon = start_daemon(short_tmp, env={CRASH_ENV: spec})
    runs = [ClientRun() for _ in range(CLIENTS)]
    threads = start_clients(run_client, daemon.socket, runs)
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a client hung"
    # The daemon stops by itself: nobody signals it.
    code = daemon.wait(30)
    daemon.stop(expect=None)  # only closes the notify socket: it has exited
    stderr = daemon.stderr()
    assert code == EXIT_FAILURE, f"exit {code}; stderr:\n{stderr}"
    assert "injected at wal." in stderr

    outcomes = [o for r in runs for o in r.outcomes]
    assert all(r.error is None for r in runs), [r.error for r in runs]
    acked = sorted((o for o in outcomes if o.seq is not None), key=lambda o: o.seq or 0)
    failed = [o for o in outcomes if o.seq is None]
    # Batches 1-4 were acknowledged, in seq order, with no hole; nothing after.
    assert [o.seq for o in acked] == list(range(1, len(acked) + 1))
    assert acked, "the first four batches should have been acknowledged"
    # The daemon stops as on SIGTERM: every request in flight is answered, with
    # storage_failed, or shutting_down once it no longer takes new requests.
    assert all(o.code in (STORAGE_FAILED, SHUTTING_DOWN) for o in failed), [
        (o.message_id, o.code, o.unanswered)
        for o in failed
        if o.code not in (STORAGE_FAILED, SHUTTING_DOWN)
    ]
    assert any(o.code == STORAGE_FAILED for o in failed), "the failed batch got no error"

    # Restart without the fault: recovery, then the daemon serves and appends again.
    again = start_daemon(short_tmp, state_dir=daemon.state_dir)
    head = again.call("daemon.status")["head"]
    extra = again.call("wal.append", _append("late", "agent.created"))
    assert extra["seq"] == head + 1
    again.stop()

    with Store.open(daemon.state_dir) as store:
        log = list(store.wal.read(1, store.head)) if store.head else []
    assert [e.seq for e in log] == list(range(1, head + 2))
    assert isinstance(log[-1], ev.AgentCreated)
    assert log[-1].agent == "late"
    log = log[:-1]

    def key(e: ev.Event) -> tuple[str, str | None]:
        assert isinstance(e, ev.AgentCreated | ev.MessageReceived), e
        return (e.agent, e.message_id if isinstance(e, ev.MessageReceived) else None)

    # Every acknowledged append, at its seq, with its content.
    for o, e in zip(acked, log, strict=False):
        assert (o.seq, o.agent, o.message_id) == (e.seq, *key(e))
        if isinstance(e, ev.MessageReceived):
            assert e.text == f"text of {o.message_id}"
    assert len(log) >= len(acked)
    # Then at most the failed batch's records: each one a distinct failed request.
    survivors = [key(e) for e in log[len(acked) :]]
    failed_keys = {(o.agent, o.message_id) for o in failed}
    assert len(set(survivors)) == len(survivors)
    assert set(survivors) <= failed_keys, survivors
    if not failed_batch_written:
        assert survivors == [], "a write that failed left records behind"


def test_crash_spec_syntax() -> None:
    """The old forms still mean SIGKILL; the new ones an error, once or from the Nth hit on."""
    armed = _parse("wal.after_sync, snapshot.mid_write:3, wal.sync:5:eio, wal.write:2+:enospc")
    assert (armed["wal.after_sync"].remaining, armed["wal.after_sync"].errno) == (1, None)
    assert (armed["snapshot.mid_write"].remaining, armed["snapshot.mid_write"].errno) == (3, None)
    assert armed["wal.sync"].errno == 5
    assert not armed["wal.sync"].persistent
    assert armed["wal.write"].persistent
    assert armed["wal.write"].remaining == 2
    with pytest.raises(ValueError, match="unknown action"):
        _parse("wal.sync:1:boom")


def test_error_points_fire_once_or_from_the_nth_hit_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from reynd.storage import crashpoints

    monkeypatch.setattr(crashpoints, "_armed", _parse("wal.sync:2:eio,wal.write:2+:enospc"))
    fired: dict[str, list[int]] = {"wal.sync": [], "wal.write": []}
    for i in range(1, 5):
        for name, hits in fired.items():
            try:
                crashpoints.hit(name)
            except OSError as exc:
                hits.append(i)
                assert "injected at" in str(exc)
    assert fired == {"wal.sync": [2], "wal.write": [2, 3, 4]}


# -- a task of the daemon dies ---------------------------------------------------------------------

# A snapshot is due after a few hundred appends; its write fails (EIO, injected
# half-way through the tmp file): the snapshotter task dies with it.
SNAPSHOT_FAILS = "[storage]\nsnapshot_min_bytes = 30000\nsnapshot_ratio = 1000\n"
WINDOW = 8  # requests in flight per client


@dataclass
class Appender:
    """One client appending pipelined until it is refused or cut off."""

    acked: list[int] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    ended: str = ""  # "refused", "eof", "hung" or "" (still appending at the end)
    error: BaseException | None = None


def append_until_refused(socket_path: Path, agent: str, run: Appender) -> None:
    try:
        with Client(socket_path) as client:
            client.call("wal.append", _append(agent, "agent.created"))
            for window in range(500):
                for k in range(WINDOW):
                    mid = f"{agent}-{window}-{k}"
                    send_message(client, mid, agent, mid, "x" * 40)
                for _ in range(WINDOW):
                    reply = client.recv_json()
                    if "result" in reply:
                        run.acked.append(reply["result"]["seq"])
                    else:
                        run.codes.append(reply["error"]["code"])
                if run.codes:
                    run.ended = "refused"
                    return
    except TimeoutError:
        run.ended = "hung"
    except (EOFError, OSError):
        run.ended = "eof"  # the daemon closed the connection (or reset it: unread requests)
    except BaseException as exc:
        run.error = exc


def test_a_dead_task_stops_the_daemon_with_exit_3_and_no_append_hangs(short_tmp: Path) -> None:
    """The snapshotter dies: appends queued or arriving then are answered, the daemon exits 3.

    An append is not cancellable once queued: one queued after the writer took
    its stop marker used to wait forever, and the daemon with it.
    """
    daemon = start_daemon(
        short_tmp, config=SNAPSHOT_FAILS, env={CRASH_ENV: "snapshot.mid_write:1:eio"}
    )
    runs = [Appender() for _ in range(CLIENTS)]
    threads = start_clients(append_until_refused, daemon.socket, runs)
    try:
        code = daemon.wait(READY_TIMEOUT)  # nobody signals it
    except subprocess.TimeoutExpired:
        daemon.proc.kill()
        code = daemon.wait()
        pytest.fail(f"the daemon did not exit after its snapshotter died:\n{daemon.stderr()}")
    finally:
        for t in threads:
            t.join(READY_TIMEOUT)
        daemon.stop(expect=None)
    stderr = daemon.stderr()
    assert code == EXIT_FAILURE, f"exit {code}; stderr:\n{stderr}"
    assert "app.task_failed" in stderr
    assert "reynd: fatal: OSError(5, 'Input/output error (injected at snapshot.mid_write)')" in (
        stderr
    )
    assert not any(t.is_alive() for t in threads), "a client hung"
    assert [r.error for r in runs] == [None] * CLIENTS
    assert all(r.ended in ("refused", "eof") for r in runs), [r.ended for r in runs]
    # Refused as the daemon stops, never left to time out.
    codes = {c for r in runs for c in r.codes}
    assert codes <= {SHUTTING_DOWN}, codes

    # Every acknowledged append survives: the WAL itself never failed.
    again = start_daemon(short_tmp, state_dir=daemon.state_dir)
    head = again.call("daemon.status")["head"]
    again.stop()
    acked = sorted(s for r in runs for s in r.acked)
    assert acked and acked[-1] <= head
    with Store.open(daemon.state_dir) as store:
        seqs = {e.seq for e in store.wal.read(1, store.head)}
    assert set(acked) <= seqs

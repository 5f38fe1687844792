"""The daemon writes segment indexes as it runs, and a restart reads them (real processes).

A restart after a SIGKILL takes the records the indexes describe from them
and scans only the rest (the `storage.open` log line counts both); a kill in
the middle of an index write, or an index write that fails, costs a scan of
that segment at the next start and nothing else.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

from reynd.storage.crashpoints import CRASH_ENV
from reynd.storage.store import Store
from tests.harness import READY_TIMEOUT, Daemon, start_daemon
from tests.runtime_helpers import log_lines, wait_for_log

# Small segments and snapshot distance: a few hundred appends span several of each.
CONFIG = "[storage]\nsegment_bytes = 8192\nsnapshot_min_bytes = 4096\n"


def _append(d: Daemon, n: int, start: int = 0, acked: list[int] | None = None) -> int:
    """n appends, one at a time; each acknowledged seq goes to `acked`. Returns the head."""
    acked = [] if acked is None else acked
    with d.connect() as c:
        if start == 0:
            acked.append(c.call("wal.append", {"agent": "a", "kind": "agent.created"})["seq"])
        for i in range(start, start + n):
            text = f"hello {i} " + "x" * (i % 50)
            result = c.call(
                "wal.append",
                {
                    "agent": "a",
                    "kind": "message.received",
                    "data": {"message_id": f"m{i}", "text": text},
                },
            )
            acked.append(result["seq"])
    return int(d.call("daemon.status")["head"])


def test_restart_after_sigkill_reads_the_index_and_scans_the_tail(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=CONFIG)
    head = _append(d, 600)
    wait_for_log(d, "index.written")
    d.stop(signal.SIGKILL, expect=None)
    index = d.state_dir / "state" / "index"
    assert len(list(index.glob("*.idx"))) >= 3

    again = start_daemon(short_tmp, state_dir=d.state_dir)
    try:
        (opened,) = log_lines(again, "storage.open")
        assert opened["head"] == head == opened["records"]
        assert opened["indexed"] > head // 2  # the last writes may not have run yet
        assert opened["scanned"] == head - opened["indexed"]
        assert again.call("daemon.status")["head"] == head
        state = again.call("state.get", {"seq": head // 2})
    finally:
        again.stop()
    with Store.open(d.state_dir) as store:  # the same as a store that scanned all of it
        assert store.head == head
        inbox = store.state_as_of(head // 2).agents["a"].inbox
        assert [m.message_id for m in inbox] == [
            m["message_id"] for m in state["agents"]["a"]["inbox"]
        ]


def test_sigkill_mid_index_write_costs_a_scan_and_nothing_else(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=CONFIG, env={CRASH_ENV: "index.mid_write:2"})
    acked: list[int] = []
    with contextlib.suppress(OSError, EOFError):  # killed under our appends
        _append(d, 600, acked=acked)
    code = d.wait(READY_TIMEOUT)
    d.stop(expect=None)
    assert code == -signal.SIGKILL, d.stderr()

    again = start_daemon(short_tmp, state_dir=d.state_dir)
    try:
        stderr = again.stderr()
        assert "not used, segment scanned in full" in stderr and "torn chunk" in stderr
        head = again.call("daemon.status")["head"]
        assert acked and head >= acked[-1]  # nothing acknowledged was lost
        more = _append(again, 300, start=head)
        wait_for_log(again, "index.written")
    finally:
        again.stop()
    _restart_reads_the_index(short_tmp, d.state_dir, more)  # the torn one was rebuilt whole


def test_failed_index_write_is_logged_and_not_fatal(short_tmp: Path) -> None:
    """Unlike a WAL or snapshot write, an index write that fails stops nothing: the index is a
    cache of the WAL. That segment's index is dropped, and a later write rebuilds it."""
    d = start_daemon(short_tmp, config=CONFIG, env={CRASH_ENV: "index.mid_write:1:eio"})
    try:
        head = _append(d, 600)
        assert d.proc.poll() is None
        assert "segment index of" in d.stderr() and "not written" in d.stderr()
        wait_for_log(d, "index.written", 2)
    finally:
        d.stop()
    _restart_reads_the_index(short_tmp, d.state_dir, head)


def _restart_reads_the_index(workdir: Path, state_dir: Path, head: int) -> None:
    again = start_daemon(workdir, state_dir=state_dir)
    try:
        (opened,) = log_lines(again, "storage.open")
        assert opened["head"] == head
        assert opened["indexed"] > head // 2
        assert "not used" not in again.stderr()
    finally:
        again.stop()

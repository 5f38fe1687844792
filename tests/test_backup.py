"""`reynd backup`: a copy of a live state directory under write load that opens and holds it all.

A real daemon with concurrent writers (WAL appends and batches, config.db
writes through retention.set, GC dropping segments) while `reynd backup`
runs as its own process; then a real daemon is started on the copy and
every record acknowledged up to the backup's seq is checked there.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from reynd.storage.extent import load_extent
from tests.harness import Daemon, daemon_env, run_daemon_to_exit, start_daemon
from tests.runtime_helpers import records

CONFIG = """
[storage]
segment_bytes = 8192
snapshot_min_bytes = 4096

[retention]
snapshot_keep = 1
"""


REYND = (sys.executable, "-m", "reynd.daemon.cli")


def run_reynd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*REYND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=daemon_env(),
    )


def msg(name: str, i: int) -> dict[str, Any]:
    return {"kind": "message.received", "data": {"message_id": f"{name}-{i}", "text": "x" * 40}}


class Load:
    """Writers until stopped: every acknowledged record as (seq, message_id), and config writes."""

    def __init__(self, d: Daemon, writers: int) -> None:
        self.d = d
        self.acked: dict[int, str] = {}
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._write, args=(f"w{i}",)) for i in range(writers)
        ]
        self.threads.append(threading.Thread(target=self._configure))
        self.threads.append(threading.Thread(target=self._collect))

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        assert not self.errors, self.errors

    def _guard(self, fn: Any) -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test thread
            self.errors.append(exc)

    def _write(self, name: str) -> None:
        def run() -> None:
            with self.d.connect() as c:
                c.call("wal.append", {"agent": name, "kind": "agent.created"})
                i = 0
                while not self.stop.is_set():
                    events = [msg(name, i + k) for k in range(1 + i % 3)]
                    seqs = c.call("wal.append_batch", {"agent": name, "events": events})["seqs"]
                    for seq, e in zip(seqs, events, strict=True):
                        self.acked[seq] = e["data"]["message_id"]
                    i += len(events)

        self._guard(run)

    def _configure(self) -> None:
        def run() -> None:
            with self.d.connect() as c:
                n = 0
                while not self.stop.is_set():  # each one a config.db transaction
                    c.call("retention.set", {"snapshot_keep_age_s": float(n % 50)})
                    n += 1

        self._guard(run)

    def _collect(self) -> None:
        def run() -> None:
            with self.d.connect() as c:
                while not self.stop.wait(0.05):
                    c.call("retention.gc")

        self._guard(run)


def backup_seq(out: str) -> int:
    found = re.search(r" at seq (\d+) into ", out)
    assert found, out
    return int(found.group(1))


def test_backup_of_a_live_daemon_under_load_opens_and_holds_every_acked_record(
    short_tmp: Path,
) -> None:
    d = start_daemon(short_tmp, config=CONFIG)
    seqs = []
    try:
        with Load(d, writers=3) as load:
            # Several backups while the load runs: each must open on its own.
            for n in range(3):
                dest = short_tmp / f"backup-{n}"
                done = run_reynd("backup", "--state-dir", str(d.state_dir), str(dest))
                assert done.returncode == 0, done.stderr
                seqs.append(backup_seq(done.stdout))
            acked = dict(load.acked)
        assert d.call("retention.get")["floor"] > 1, "GC never dropped a segment under the load"
    finally:
        d.stop()
    for n, seq in enumerate(seqs):
        dest = short_tmp / f"backup-{n}"
        workdir = short_tmp / f"run-{n}"
        workdir.mkdir()
        # The copy carries its own extent, of its cut (never the source's, which is ahead).
        extent = load_extent(dest / "state" / "wal")
        assert extent is not None and extent.issued == seq, (extent, seq)
        copy = start_daemon(workdir, state_dir=dest)
        try:
            status = copy.call("daemon.status")
            assert status["head"] == seq, (status, seq)
            floor = copy.call("retention.get")["floor"]
            held = {r["seq"]: r for r in records(copy, after=floor - 1)}
            want = {s: m for s, m in acked.items() if floor <= s <= seq}
            assert want, (floor, seq)
            missing = {s for s in want if held.get(s, {}).get("message_id") != want[s]}
            assert not missing, sorted(missing)[:10]
            # The copy is a daemon of its own: it writes past the backup's seq.
            got = copy.call("wal.append", {"agent": "w0", **msg("after", 0)})
            assert got["seq"] == seq + 1
        finally:
            copy.stop()
        # And it verifies.
        checked = run_reynd("repair", "--verify", "--state-dir", str(dest))
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_backup_refuses_a_non_empty_destination(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        dest = short_tmp / "dest"
        dest.mkdir()
        (dest / "keep").write_text("mine")
        done = run_reynd("backup", "--state-dir", str(d.state_dir), str(dest))
        assert done.returncode == 2, done.stderr
        assert "is not empty" in done.stderr
        assert [p.name for p in dest.iterdir()] == ["keep"]
        inside = run_reynd("backup", "--state-dir", str(d.state_dir), str(d.state_dir / "b"))
        assert inside.returncode == 2 and "is inside the state directory" in inside.stderr
        assert not (d.state_dir / "b").exists()
    finally:
        d.stop()


def test_a_backup_that_does_not_verify_fails_and_leaves_nothing(short_tmp: Path) -> None:
    """A source whose config.db is damaged: the copy is refused naming the file, and removed."""
    d = start_daemon(short_tmp)
    try:
        d.call("retention.set", {"snapshot_keep": 7})
    finally:
        d.stop()
    corrupt_a_page(d.state_dir / "state" / "config" / "config.db", 2)
    dest = short_tmp / "dest"
    done = run_reynd("backup", "--state-dir", str(d.state_dir), str(dest))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "config.db" in done.stderr and "quick_check" in done.stderr, done.stderr
    assert not dest.exists()


def corrupt_a_page(db: Path, page: int) -> None:
    """Overwrite one B-tree page of a SQLite file with garbage (its header included)."""
    size = int.from_bytes(db.read_bytes()[16:18], "big") or 65536
    assert db.stat().st_size >= page * size, (db.stat().st_size, size)
    with db.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\x0d\xff\xff\xff" * (size // 4))


def test_verify_reports_a_corrupted_config_db_naming_it_and_the_repair(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        d.call("wal.append", {"agent": "ada", "kind": "agent.created"})
        d.call("retention.set", {"snapshot_keep": 7})
    finally:
        d.stop()
    db = d.state_dir / "state" / "config" / "config.db"
    intact = run_reynd("repair", "--verify", "--state-dir", str(d.state_dir))
    assert intact.returncode == 0 and intact.stdout.startswith("ok:"), intact.stderr
    corrupt_a_page(db, 2)
    checked = run_reynd("repair", "--verify", "--state-dir", str(d.state_dir))
    assert checked.returncode == 3, checked.stdout + checked.stderr
    assert f"{db}: " in checked.stderr and "quick_check" in checked.stderr, checked.stderr
    assert "reynd backup" in checked.stderr and "move config.db away" in checked.stderr
    # A start refuses it the same way: the file named, no traceback.
    start = run_daemon_to_exit(short_tmp, state_dir=d.state_dir, socket_path=d.socket)
    assert start.returncode == 3, start.stderr
    last = start.stderr.strip().splitlines()[-1]
    assert f"{db} is damaged" in last and "reynd backup" in last, last


def test_verify_reports_a_config_db_that_is_not_a_database(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    d.stop()
    db = d.state_dir / "state" / "config" / "config.db"
    db.write_bytes(b"not a database at all" * 300)
    checked = run_reynd("repair", "--verify", "--state-dir", str(d.state_dir))
    assert checked.returncode == 3, checked.stdout + checked.stderr
    assert f"{db}: " in checked.stderr and "not a readable SQLite database" in checked.stderr


def test_backup_with_workspace_rewind_restores_files_from_the_copy(short_tmp: Path) -> None:
    """Blobs, manifests and trees come along: a checkout on the copy restores older files."""
    import shutil

    from tests.conftest import workspace_config
    from tests.test_workspace import Agent, wait_tree_file

    ws = short_tmp / "ws"
    ws.mkdir()
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        (ws / "a.txt").write_text("one")
        first = agent.turn()
        (ws / "a.txt").write_text("two")
        (ws / "sub").mkdir()
        (ws / "sub" / "b.txt").write_text("bee")
        second = agent.turn()
        wait_tree_file(d, second)
        dest = short_tmp / "copy"
        done = run_reynd("backup", "--state-dir", str(d.state_dir), str(dest))
        assert done.returncode == 0, done.stderr
        assert backup_seq(done.stdout) == second
        assert (dest / "state" / "trees" / f"{second:020d}").is_file()
    finally:
        d.stop()
    # The copy's workspace is a copy of the files too (its reynd.toml names it).
    ws2 = short_tmp / "ws2"
    shutil.copytree(ws, ws2, symlinks=True)
    (dest / "reynd.toml").write_text(workspace_config(ws2))
    workdir = short_tmp / "run-copy"
    workdir.mkdir()
    copy = start_daemon(workdir, state_dir=dest)
    try:
        got = copy.call("checkout", {"seq": first})
        assert got["mode"] in ("undo", "fork_switch"), got
        assert (ws2 / "a.txt").read_text() == "one" and not (ws2 / "sub").exists()
        copy.call("checkout", {"seq": second})
        assert (ws2 / "a.txt").read_text() == "two" and (ws2 / "sub" / "b.txt").read_text() == "bee"
    finally:
        copy.stop()
    assert (ws / "a.txt").read_text() == "two"  # the original's files were never touched


def test_backup_of_a_dir_a_collection_left_half_done(short_tmp: Path) -> None:
    """Killed after GC published the new floor, before it deleted a segment: the copy opens."""
    from reynd.storage.crashpoints import CRASH_ENV
    from tests.test_retention_daemon import CONFIG as SMALL
    from tests.test_retention_daemon import fill

    d = start_daemon(short_tmp, config=SMALL, env={CRASH_ENV: "gc.after_retained"})
    acked = fill(d, "ext", 300)
    d.call("retention.set", {"snapshot_keep": 0, "wal_keep_records": 50})
    with d.connect() as c:
        c.send_json({"jsonrpc": "2.0", "id": 1, "method": "retention.gc"})
        assert d.wait() == -9, d.stderr()  # SIGKILLed at the point
    d.stop(expect=-9)
    retained = d.state_dir / "state" / "retained"
    first = min(int(p.stem) for p in (d.state_dir / "state" / "wal").glob("*.jsonl"))
    assert retained.is_file() and first == 1  # the new floor is durable, no segment gone
    dest = short_tmp / "copy"
    done = run_reynd("backup", "--state-dir", str(d.state_dir), str(dest))
    assert done.returncode == 0, done.stderr
    seq = backup_seq(done.stdout)
    assert seq == max(acked)
    workdir = short_tmp / "run-copy"
    workdir.mkdir()
    copy = start_daemon(workdir, state_dir=dest)
    try:
        floor = copy.call("retention.get")["floor"]
        assert floor > 1 and copy.call("daemon.status")["head"] == seq
        held = {r["seq"]: r.get("message_id") for r in records(copy, after=floor - 1)}
        assert all(held.get(s) == m for s, m in acked.items() if s >= floor)
    finally:
        copy.stop()


def test_a_collection_during_the_copy_makes_it_start_again(short_tmp: Path) -> None:
    """GC moves the floor while the copy runs (held up by a large audit file): attempt 2 opens."""
    import time

    from tests.test_retention_daemon import CONFIG as SMALL
    from tests.test_retention_daemon import fill

    d = start_daemon(short_tmp, config=SMALL)
    try:
        acked = fill(d, "ext", 300)
        d.call("retention.set", {"snapshot_keep": 0, "wal_keep_records": 50})
        big = d.state_dir / "events" / "run-20000101T000000Z-1.jsonl"
        line = b'{"i":0,"kind":"run.started","seq":0,"branch":0,"ts":0.0}\n'
        big.write_bytes(line * ((48 << 20) // len(line)))
        dest = short_tmp / "copy"
        proc = subprocess.Popen(
            [*REYND, "backup", "--state-dir", str(d.state_dir), str(dest)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=daemon_env(),
        )
        copying = dest / "events" / big.name
        deadline = time.monotonic() + 60
        while not copying.exists():  # the first attempt is copying the audit log
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.001)
        done = d.call("retention.gc")
        assert done["floor"] > done["floor_before"], done
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "retained history changed during attempt 1 (GC ran): starting again" in err, err
        assert "attempt 2)" in out, out
        seq = backup_seq(out)
    finally:
        d.stop()
    workdir = short_tmp / "run-copy"
    workdir.mkdir()
    copy = start_daemon(workdir, state_dir=dest)
    try:
        floor = copy.call("retention.get")["floor"]
        assert floor == done["floor"] and seq == max(acked)
        held = {r["seq"]: r.get("message_id") for r in records(copy, after=floor - 1)}
        assert all(held.get(s) == m for s, m in acked.items() if s >= floor)
    finally:
        copy.stop()


def test_verify_reports_a_damaged_replication_identity_and_notes_a_damaged_clean_stop(
    short_tmp: Path,
) -> None:
    d = start_daemon(short_tmp)
    d.stop()
    state = d.state_dir / "state"
    (state / "replication.json").write_text('{"store_id": 12')
    (state / "clean-stop").write_text("torn")
    checked = run_reynd("repair", "--verify", "--state-dir", str(d.state_dir))
    assert checked.returncode == 3, checked.stdout + checked.stderr
    assert f"{state / 'replication.json'}: does not decode" in checked.stderr, checked.stderr
    assert f"note: {state / 'clean-stop'}: damaged" in checked.stdout, checked.stdout

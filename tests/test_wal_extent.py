"""A WAL segment that disappears is noticed (issue 22, item 6): real daemons, real files.

`state/wal/extent` records the segments and a watermark apart from the
segment files (docs/format.md): a start or `reynd repair --verify` that finds
less refuses, naming the missing seqs and the file; `reynd repair
--accept-lost-segments` gives them up explicitly, and the next seq is still
above every seq ever issued.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import msgspec
import pytest

from reynd.storage.repair import audit_reach
from tests.harness import Daemon, run_daemon_to_exit, start_daemon
from tests.runtime_helpers import wait_until

DATA = Path(__file__).with_name("data")
SMALL = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 1073741824\n"


def _reynd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reynd.daemon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _append(d: Daemon, n: int) -> list[int]:
    """n acknowledged appends (the first creates agent a); their seqs."""
    seqs = []
    with d.connect() as c:
        if d.call("daemon.status")["head"] == 0:
            seqs.append(c.call("wal.append", {"agent": "a", "kind": "agent.created"})["seq"])
        while len(seqs) < n:
            data = {"message_id": f"m{len(seqs)}-{id(seqs)}", "text": "x" * 40}
            reply = c.call("wal.append", {"agent": "a", "kind": "message.received", "data": data})
            seqs.append(reply["seq"])
    return seqs


def _segments(state_dir: Path) -> list[Path]:
    return sorted((state_dir / "state" / "wal").glob("*.jsonl"))


def _refused(short_tmp: Path, state_dir: Path, lost: str, gone: Path) -> None:
    """verify and a start both refuse, naming `lost` (a..b), the file and the repair."""
    verify = _reynd("repair", "--state-dir", str(state_dir), "--verify")
    assert verify.returncode == 3, verify.stdout + verify.stderr
    start = run_daemon_to_exit(short_tmp, state_dir=state_dir, socket_path=short_tmp / "x.sock")
    assert start.returncode == 3, start.stderr
    for out in (verify.stderr, start.stderr):
        assert lost in out, out
        assert f"segment file {gone} is gone" in out, out
        assert f"reynd repair --state-dir {state_dir} --accept-lost-segments" in out, out


def _accept(state_dir: Path) -> str:
    proc = _reynd("repair", "--state-dir", str(state_dir), "--accept-lost-segments", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_losing_the_newest_segment_of_a_stopped_daemon_is_refused_then_accepted(
    short_tmp: Path,
) -> None:
    d = start_daemon(short_tmp, config=SMALL)
    try:
        acked = _append(d, 150)
    finally:
        d.stop()
    head = acked[-1]
    segs = _segments(d.state_dir)
    assert len(segs) >= 3
    newest = segs[-1]
    first = int(newest.stem)
    assert 1 < first <= head
    newest.unlink()

    _refused(short_tmp, d.state_dir, f"seqs {first}..{head} were acknowledged", newest)

    out = _accept(d.state_dir)
    assert f"gone: {newest}" in out
    assert f"seqs {first}..{head} are now `lost` records" in out
    assert f"the next seq is {head + 1}" in out
    verify = _reynd("repair", "--state-dir", str(d.state_dir), "--verify")
    assert verify.returncode == 0, verify.stderr
    again = start_daemon(short_tmp, state_dir=d.state_dir)
    try:
        assert again.call("daemon.status")["head"] == head
        (seq,) = _append(again, 1)
        assert seq == head + 1 > max(acked)
    finally:
        again.stop()
    from reynd.storage.extent import load_extent

    extent = load_extent(d.state_dir / "state" / "wal")
    assert extent is not None
    assert [(a, b) for a, b, _ in extent.lost] == [(first, head)]


def test_losing_the_only_segment_is_refused_then_accepted(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)  # a small install: the default 64 MiB segments
    try:
        acked = _append(d, 12)
    finally:
        d.stop()
    (only,) = _segments(d.state_dir)
    only.unlink()

    _refused(short_tmp, d.state_dir, f"seqs 1..{acked[-1]} were acknowledged", only)

    assert f"seqs 1..{acked[-1]} are now `lost` records" in _accept(d.state_dir)
    again = start_daemon(short_tmp, state_dir=d.state_dir)
    try:
        # The agent's records were lost with the segment: it is created anew.
        reply = again.call("wal.append", {"agent": "a", "kind": "agent.created"})
        assert reply["seq"] == acked[-1] + 1
    finally:
        again.stop()


def test_losing_the_newest_segment_after_a_sigkill_is_refused(short_tmp: Path) -> None:
    """No clean stop recorded the head: the extent still knows the segment existed, and
    every seq below it, not how many records it held (the documented limit). The repair
    then also reads the audit log: the seqs it names were committed."""
    d = start_daemon(short_tmp, config=SMALL)
    acked = _append(d, 150)
    audit = d.state_dir / "events"
    wait_until(  # the audit log is written within flush_interval_s (1 s), without fsync
        lambda: (audit_reach(audit) == acked[-1]) or None, "the audit log to name the head"
    )
    d.stop(signal.SIGKILL, expect=None)
    newest = _segments(d.state_dir)[-1]
    first = int(newest.stem)
    newest.unlink()

    _refused(short_tmp, d.state_dir, f"(seqs from {first} on;", newest)
    out = _accept(d.state_dir)
    assert f"seqs {first}..{acked[-1]} are now `lost` records (the audit log" in out, out
    assert f"the next seq is {acked[-1] + 1}" in out


def test_a_state_dir_without_the_extent_file_gets_one_at_its_first_start(
    short_tmp: Path,
) -> None:
    """The migration: tests/data/ws-v1.tar.gz (reynd 0.1.0) has no state/wal/extent."""
    from reynd.storage.extent import load_extent

    with tarfile.open(DATA / "ws-v1.tar.gz") as tar:
        tar.extractall(short_tmp, filter="tar")
    state_dir = short_tmp / "project" / ".reyn"
    wal = state_dir / "state" / "wal"
    assert load_extent(wal) is None
    firsts = [int(p.stem) for p in _segments(state_dir)]
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        head = d.call("daemon.status")["head"]
        extent = load_extent(wal)
        assert extent is not None and extent.segments == firsts
        assert extent.issued == firsts[-1] - 1  # what is sealed; the head at a clean stop
    finally:
        d.stop()
    extent = load_extent(wal)
    assert extent is not None and extent.issued == head
    body = json.loads((wal / "extent").read_bytes())["rec"]
    assert body == msgspec.to_builtins(extent)  # one framed line, readable with jq .rec
    _segments(state_dir)[-1].unlink()
    verify = _reynd("repair", "--state-dir", str(state_dir), "--verify")
    assert verify.returncode == 3
    assert f"..{head} were acknowledged" in verify.stderr


def test_a_damaged_extent_file_stops_the_start_with_what_to_do(tmp_path: Path) -> None:
    from reynd.protocol import events as ev
    from reynd.storage.errors import StorageError
    from reynd.storage.extent import load_extent
    from reynd.storage.store import Store

    root = tmp_path / ".reyn"
    with Store.open(root) as store:
        store.append([ev.AgentCreated(agent="a")])
    path = root / "state" / "wal" / "extent"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError, match=r"extent is damaged .*then remove it"):
        Store.open(root)
    verify = _reynd("repair", "--state-dir", str(root), "--verify")
    assert verify.returncode == 3 and "extent is damaged" in verify.stderr
    path.unlink()
    with Store.open(root) as store:
        assert store.head == 1
    extent = load_extent(root / "state" / "wal")
    assert extent is not None and extent.segments == [1]

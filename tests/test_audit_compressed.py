"""The audit log compressed (format 2, reynd/audit/codec.py), and the plain one still read.

Each flush is one gzip member of whole lines: the log no longer doubles the
WAL's bytes, `zcat` reads a file, and a member cut short (a crash mid-write)
is left out as a line without its newline was. A state dir whose audit log
an older reynd wrote as plain `.jsonl` files (tests/data/audit-v1.tar.gz, made
by tests/data/make_audit_v1.py) is listed, shown, replayed and backed up with
the compressed files written beside it.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import tarfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from reynd.audit.codec import compress, whole_lines, whole_prefix
from reynd.storage.repair import audit_reach
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import kill_daemon, restart
from tests.test_backup import run_reynd

DATA = Path(__file__).parent / "data"


def _sizes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _lines(d: Daemon) -> list[dict[str, object]]:
    events: list[dict[str, object]] = d.call("events.list", {"limit": 1000})["events"]
    return events


def test_the_audit_log_takes_a_fraction_of_the_wal(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        d.call("wal.append", {"agent": "a", "kind": "agent.created"})
        for i in range(200):  # payloads like a saver's: long, and alike from record to record
            text = f"turn {i}: " + " ".join(f"checkpoint {i - k} of thread t" for k in range(40))
            d.call(
                "wal.append",
                {
                    "agent": "a",
                    "kind": "message.received",
                    "data": {"message_id": f"m{i}", "text": text},
                },
            )
        assert len(_lines(d)) == 202  # run.started, the agent, 200 messages
    finally:
        d.stop()
    wal, audit = _sizes(d.state_dir / "state" / "wal"), _sizes(d.state_dir / "events")
    assert audit * 4 < wal, (audit, wal)  # it was larger than the WAL, uncompressed
    files = sorted((d.state_dir / "events").iterdir())
    assert [f.suffixes[-2:] for f in files] == [[".jsonl", ".gz"]]
    # A gzip file: the system's zcat reads it, and every line is JSON.
    out = subprocess.run(["gzip", "-dc", str(files[0])], capture_output=True, check=True).stdout
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds[0] == "run.started" and kinds[-1] == "run.stopped" and len(kinds) == 203


def test_a_member_cut_short_is_left_out_and_the_next_run_goes_on(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config="[audit]\nflush_interval_s = 0\n")
    d.call("wal.append", {"agent": "a", "kind": "agent.created"})
    shown = _lines(d)
    kill_daemon(d)
    (path,) = sorted((d.state_dir / "events").iterdir())
    whole = path.read_bytes()
    torn = compress(b'{"i":99,"kind":"x","seq":1,"branch":0,"ts":0.0}\n')
    path.write_bytes(whole + torn[: len(torn) // 2])  # a crash in the middle of a write
    d = restart(d, short_tmp)
    try:
        first_run = [e for e in _lines(d) if e["run"] == shown[0]["run"]]
        assert first_run == shown  # all of it, and nothing of the torn member
        assert len(d.call("events.runs")["runs"]) == 2
    finally:
        d.stop()


def test_a_plain_audit_log_of_an_older_reynd_is_read_beside_the_new(short_tmp: Path) -> None:
    facts = json.loads((DATA / "audit-v1.json").read_text())
    with tarfile.open(DATA / "audit-v1.tar.gz") as tar:
        tar.extractall(short_tmp, filter="tar")
    state_dir = short_tmp / "project" / ".reyn"
    events = state_dir / "events"
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        runs = d.call("events.runs")["runs"]
        assert [r["run"] for r in runs][:2] == facts["runs"] and len(runs) == 3
        old = [e for e in _lines(d) if e["run"] in facts["runs"]]
        assert len(old) == facts["lines"] + 1  # and the second run's run.stopped
        rewinds = d.call("events.list", {"kind": ["rewind"], "limit": 10})["events"]
        assert [e["seq"] for e in rewinds] == [facts["rewind"]]
        seek = d.call("replay.seek", {"seq": facts["rewind"] - 1})
        assert seek["complete"], seek
        d.call("wal.append", {"agent": "c", "kind": "agent.created"})
        everything = _lines(d)
    finally:
        d.stop()
    names = sorted(p.name for p in events.iterdir())
    assert set(facts["files"]) <= set(names)  # the old files, as they were
    new = [n for n in names if n not in facts["files"]]
    assert len(new) == 1 and new[0].endswith(".jsonl.gz")
    # A backup copies both kinds whole; a daemon on the copy lists the same lines.
    copy = short_tmp / "copy"
    done = run_reynd("backup", "--state-dir", str(state_dir), str(copy))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (copy / "events").iterdir()) == names
    d = start_daemon(short_tmp, state_dir=copy, socket_path=short_tmp / "copy.sock")
    try:
        copied = [e for e in _lines(d) if e["run"] != d.call("events.runs")["current"]]
    finally:
        d.stop()
    # What was listed, then the run.stopped its run wrote when it stopped.
    assert copied[:-1] == everything and copied[-1]["kind"] == "run.stopped"


_LINES = st.lists(st.binary(min_size=0, max_size=60).map(lambda b: b.replace(b"\n", b"") + b"\n"))


@given(st.lists(_LINES, min_size=1, max_size=8), st.data())
def test_whole_lines_are_the_complete_members_however_the_file_is_cut(
    members: list[list[bytes]], data: st.DataObject
) -> None:
    blobs = [compress(b"".join(lines)) for lines in members]
    file = b"".join(blobs)
    cut = data.draw(st.integers(min_value=0, max_value=len(file)))
    got, end, damaged = whole_lines(file[:cut], compressed=True)
    complete, total = 0, 0
    while complete < len(blobs) and total + len(blobs[complete]) <= cut:
        total += len(blobs[complete])
        complete += 1
    assert (got, end, damaged) == (b"".join(b"".join(m) for m in members[:complete]), total, 0)
    assert whole_prefix(file[:cut], compressed=True) == file[:total]
    assert gzip.decompress(file) == b"".join(b"".join(m) for m in members)


@given(st.lists(_LINES.filter(bool), min_size=2, max_size=6), st.data())
def test_a_damaged_member_is_skipped_and_the_read_goes_on(
    members: list[list[bytes]], data: st.DataObject
) -> None:
    blobs = [compress(b"".join(lines)) for lines in members]
    k = data.draw(st.integers(min_value=0, max_value=len(blobs) - 1))
    at = sum(map(len, blobs[:k])) + data.draw(st.integers(min_value=0, max_value=len(blobs[k]) - 1))
    file = bytearray(b"".join(blobs))
    file[at] ^= 0xFF
    got, end, damaged = whole_lines(bytes(file), compressed=True)
    everything = b"".join(b"".join(m) for m in members)
    others = b"".join(b"".join(m) for i, m in enumerate(members) if i != k)
    # The damage is found and member k alone is lost; or zlib cannot tell (a flipped bit
    # in a header field it does not check) and nothing is lost. Nothing is made up.
    allowed = [(others, len(file), 1), (everything, len(file), 0)]
    if k == len(blobs) - 1:  # the last member may look cut short: as if still being written
        allowed.append((others, sum(map(len, blobs[:k])), 0))
    assert (got, end, damaged) in allowed


def test_a_zeroed_block_hides_nothing_after_it(tmp_path: Path) -> None:
    """After a power cut, a block of the (never synced) log may read as zeros: the lines
    after it still count, for `repair --accept-lost-segments` (audit_reach) too."""
    batches = [
        b"".join(b'{"i":%d,"kind":"x","seq":%d,"branch":0,"ts":0.0}\n' % (s, s) for s in seqs)
        for seqs in (range(1, 11), range(11, 21), range(21, 31))
    ]
    blobs = [compress(b) for b in batches]
    events = tmp_path / "events"
    events.mkdir()
    (events / "run-20260101T000000Z-1.jsonl.gz").write_bytes(
        blobs[0] + bytes(len(blobs[1])) + blobs[2]
    )
    assert audit_reach(events) == 30
    got, _, damaged = whole_lines((events / "run-20260101T000000Z-1.jsonl.gz").read_bytes(), True)
    assert (got, damaged) == (batches[0] + batches[2], 1)


def test_plain_files_read_up_to_their_last_newline() -> None:
    assert whole_lines(b'{"a":1}\n{"b"', compressed=False) == (b'{"a":1}\n', 8, 0)
    assert whole_prefix(b"no newline yet", compressed=False) == b""

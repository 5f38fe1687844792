"""`reynd repair`: the operator's explicit cut of a damaged WAL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reynd.protocol import events as ev
from reynd.storage.errors import CorruptionError
from reynd.storage.options import StorageOptions
from reynd.storage.repair import truncate_at
from reynd.storage.store import Store


def _fill(root: Path, n: int) -> list[int]:
    """n records; returns the byte offset of each in the single segment."""
    with Store.open(root) as store:
        store.append([ev.AgentCreated(agent="a")])
        for i in range(n - 1):
            store.append([ev.MessageReceived(agent="a", message_id=f"m{i}", text=f"t{i}")])
        return list(store.wal.segments[0].offsets)


def _segment(root: Path) -> Path:
    (seg,) = sorted((root / "state" / "wal").glob("*.jsonl"))
    return seg


def test_repair_cuts_at_the_bad_record_and_never_reissues_a_seq(tmp_path: Path) -> None:
    root = tmp_path / ".reyn"
    offsets = _fill(root, 10)
    seg = _segment(root)
    data = bytearray(seg.read_bytes())
    data[offsets[4] + 40] ^= 0x01  # damage seq 5; seqs 6..10 stay intact
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptionError) as info:
        Store.open(root)
    err = info.value
    assert (err.path, err.offset, err.seq) == (seg, offsets[4], 5)
    assert f"--truncate-at {seg.name}:{offsets[4]}" in str(err)

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reynd.daemon.cli",
            "repair",
            "--state-dir",
            str(root),
            "--truncate-at",
            f"{seg.name}:{offsets[4]}",
            "--yes",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    with Store.open(root) as store:
        assert store.head == 10  # seqs 5..10 are `lost` records now
        kinds = [type(e).__name__ for e in store.wal.read(1, 10)]
        assert kinds[:4] == ["AgentCreated", *["MessageReceived"] * 3]
        assert kinds[4:] == ["Lost"] * 6
        assert [m.message_id for m in store.state.agents["a"].inbox] == ["m0", "m1", "m2"]
        (appended,) = store.append([ev.MessageReceived(agent="a", message_id="x", text="x")])
        assert appended.seq == 11
    saved = list((root / "state" / "wal" / "torn").iterdir())
    assert len(saved) == 1 and saved[0].read_bytes() == bytes(data[offsets[4] :])


# -- reynd repair --verify ------------------------------------------------------------------


def _reynd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reynd.daemon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.name != "LOCK"
    }


def _indexed_log(root: Path) -> list[tuple[Path, list[int]]]:
    """Several segments, all described by segment indexes; (segment, offsets) of each."""
    opts = StorageOptions(segment_bytes=4096, snapshot_min_bytes=1 << 30)
    with Store.open(root, opts) as store:
        store.append([ev.AgentCreated(agent="a")])
        for i in range(150):
            store.append([ev.MessageReceived(agent="a", message_id=f"m{i}", text="t" * 20)])
        store.snapshot_now()  # and the index of every segment
        assert store.recovery.records == 0
        return [(s.path, list(s.offsets)) for s in store.wal.segments]


def test_verify_an_intact_state_dir_exits_0_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / ".reyn"
    segs = _indexed_log(root)
    before = _tree(root)
    proc = _reynd("repair", "--state-dir", str(root), "--verify")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (
        f"ok: 151 records in {len(segs)} segments (head 151), 1 snapshots, "
        f"{len(segs)} index chunks verified"
    )
    assert _tree(root) == before


def test_verify_finds_the_damage_a_start_trusts_to_the_index(tmp_path: Path) -> None:
    """A flipped byte in a record of an older segment, under its index: the daemon's open no
    longer reads it (it would find it when the record is read); verify does, changing nothing,
    and names the cut; after the cut, verify is clean."""
    root = tmp_path / ".reyn"
    segs = _indexed_log(root)
    seg, offsets = segs[0]
    data = bytearray(seg.read_bytes())
    data[offsets[3] + 40] ^= 0x01  # seq first + 3
    seg.write_bytes(bytes(data))
    with Store.open(root) as store:
        assert store.recovery.indexed == 151 and store.head == 151
        with pytest.raises(CorruptionError):
            list(store.wal.read(4, 4))
    before = _tree(root)
    proc = _reynd("repair", "--state-dir", str(root), "--verify")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"corrupt record in {seg} at byte {offsets[3]} (seq 4): checksum mismatch" in (
        proc.stderr
    )
    assert f"--truncate-at {seg.name}:{offsets[3]}" in proc.stderr
    assert _tree(root) == before

    proc = _reynd("repair", "--state-dir", str(root), "--truncate-at", f"{seg.name}:{offsets[3]}")
    assert proc.returncode == 2  # not confirmed: nothing cut
    proc = _reynd(
        "repair", "--state-dir", str(root), "--truncate-at", f"{seg.name}:{offsets[3]}", "--yes"
    )
    assert proc.returncode == 0, proc.stderr
    assert not list((root / "state" / "index").glob("*.idx"))  # they described the cut records
    proc = _reynd("repair", "--state-dir", str(root), "--verify")
    assert proc.returncode == 0, proc.stderr
    with Store.open(root) as store:
        assert store.head == 151
        assert [type(e).__name__ for e in store.wal.read(3, 5)] == [
            "MessageReceived",
            "Lost",
            "Lost",
        ]


def test_verify_notes_a_torn_tail_without_cutting_it(tmp_path: Path) -> None:
    root = tmp_path / ".reyn"
    segs = _indexed_log(root)
    last, _ = segs[-1]
    with last.open("ab") as f:
        f.write(b'{"crc":"0000')
    before = _tree(root)
    proc = _reynd("repair", "--state-dir", str(root), "--verify")
    assert proc.returncode == 0, proc.stderr
    assert "note: torn tail: 12 bytes at" in proc.stdout
    assert _tree(root) == before


def test_verify_reports_a_damaged_snapshot_and_a_lying_index(tmp_path: Path) -> None:
    root = tmp_path / ".reyn"
    _indexed_log(root)
    (snap,) = (root / "state" / "snapshots").glob("*.snap")
    raw = bytearray(snap.read_bytes())
    raw[-1] ^= 0x01
    snap.write_bytes(bytes(raw))
    proc = _reynd("repair", "--state-dir", str(root), "--verify")
    assert proc.returncode == 3
    assert f"{snap}: corrupt record in {snap}" in proc.stderr
    assert "snapshot checksum mismatch" in proc.stderr
    assert "1 problems found" in proc.stderr


def test_verify_refuses_while_the_daemon_runs_and_takes_one_mode(tmp_path: Path) -> None:
    root = tmp_path / ".reyn"
    _indexed_log(root)
    with Store.open(root):  # holds the lock, as the daemon does
        proc = _reynd("repair", "--state-dir", str(root), "--verify")
    assert proc.returncode == 1 and "stop the daemon first" in proc.stderr
    for args in ([], ["--verify", "--truncate-at", "00000000000000000001.jsonl:0"]):
        proc = _reynd("repair", "--state-dir", str(root), *args)
        assert proc.returncode == 2
        assert (
            "give exactly one of --truncate-at, --verify and --accept-lost-segments" in proc.stderr
        )
    proc = _reynd("repair", "--state-dir", str(tmp_path / "nothing"), "--verify")
    assert proc.returncode == 3 and "no state directory" in proc.stderr


def test_a_cut_inside_an_atomic_batch_takes_the_whole_batch(tmp_path: Path) -> None:
    root = tmp_path / ".reyn"
    with Store.open(root) as store:
        store.append([ev.AgentCreated(agent="a")])
        store.append(
            [ev.MessageReceived(agent="a", message_id=f"b{k}", text="b") for k in range(4)],
            atomic=True,
        )
        store.append([ev.MessageReceived(agent="a", message_id="after", text="x")])
        offsets = list(store.wal.segments[0].offsets)
    seg = _segment(root)
    # The operator cuts at the batch's third record (seq 4): the batch starts at seq 2.
    report = truncate_at(root, seg.name, offsets[3])
    assert (report.offset, report.first_lost, report.last_lost) == (offsets[1], 2, 6)
    with Store.open(root) as store:
        assert store.head == 6 and store.recovery.torn_bytes == 0
        assert store.state.agents["a"].inbox == []
        kinds = [type(e).__name__ for e in store.wal.read(1, 6)]
        assert kinds == ["AgentCreated", *["Lost"] * 5]

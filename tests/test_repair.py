"""`reynd repair`: the operator's explicit cut of a damaged WAL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reynd.protocol import events as ev
from reynd.storage.errors import CorruptionError
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

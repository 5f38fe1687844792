"""A WAL of format 1 (no preallocated space) opens, reads and grows as it did.

tests/data/wal-v1.tar.gz was made by tests/data/make_wal_v1.py against the
version before preallocation (8b912db): four segments of 4 KiB, index files,
a snapshot, a rewind, a checkout and an atomic batch. Format 2 only adds
space after the last segment's records while it is written, so format 1 is
read as it is; there is nothing to migrate, and these tests hold that to
the byte.
"""

from __future__ import annotations

import json
import shutil
import signal
import tarfile
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store
from tests.harness import start_daemon

DATA = Path(__file__).with_name("data")


def segments(root: Path) -> list[Path]:
    return sorted((root / "state" / "wal").glob("*.jsonl"))


def opts(segment_bytes: int = StorageOptions().segment_bytes) -> StorageOptions:
    return StorageOptions(segment_bytes=segment_bytes, snapshot_min_bytes=1 << 40)


def read_all(store: Store) -> list[ev.Event]:
    return list(store.wal.read(1, store.head))


@pytest.fixture
def v1(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, bytes]]:
    """The extracted directory, what it holds (wal-v1.json), and its segments' bytes."""
    with tarfile.open(DATA / "wal-v1.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    root = tmp_path / "reyn"
    meta = json.loads((DATA / "wal-v1.json").read_text())
    return root, meta, {p.name: p.read_bytes() for p in segments(root)}


def test_a_v1_log_reads_back_every_event_and_state(
    v1: tuple[Path, dict[str, Any], dict[str, bytes]],
) -> None:
    root, meta, before = v1
    with Store.open(root, opts(segment_bytes=4096)) as store:
        assert (store.head, len(store.wal.segments)) == (meta["head"], meta["segments"])
        assert store.recovery.torn_path is None and store.recovery.indexed > 0
        assert json.loads(msgspec.json.encode(read_all(store))) == meta["events"]
        assert json.loads(msgspec.json.encode(store.state)) == meta["state"]
    # Opening and closing changed no byte of the log.
    assert {p.name: p.read_bytes() for p in segments(root)} == before


def test_a_v1_log_grows_into_preallocated_space_and_closes_as_format_1(
    v1: tuple[Path, dict[str, Any], dict[str, bytes]], tmp_path: Path
) -> None:
    root, meta, before = v1
    last = segments(root)[-1]
    new = [ev.MessageReceived(agent="a", message_id=f"n{i}", text="after") for i in range(5)]
    with Store.open(root, opts()) as store:  # 64 MiB segments: the last one goes on
        for e in new:
            store.append([e])
        assert store.head == meta["head"] + len(new)
        records = store.wal.segments[-1].size
        assert last.stat().st_size > records  # space ahead of the records while open
        # What a crash now would leave (the page cache's view): space, not a torn tail.
        crashed = tmp_path / "crashed"
        shutil.copytree(root, crashed, ignore=shutil.ignore_patterns("LOCK"))
    with Store.open(crashed, opts()) as store:
        assert store.head == meta["head"] + len(new) and store.recovery.torn_path is None
    # Closed: the older segments as they were, the last one its records only.
    after = {p.name: p.read_bytes() for p in segments(root)}
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k != last.name} == {
        k: v for k, v in before.items() if k != last.name
    }
    assert after[last.name].startswith(before[last.name]) and len(after[last.name]) == records
    assert after[last.name].count(b"\n") == before[last.name].count(b"\n") + len(new)


def test_the_daemon_serves_a_v1_state_dir_across_a_sigkill(
    v1: tuple[Path, dict[str, Any], dict[str, bytes]], short_tmp: Path
) -> None:
    root, meta, _ = v1
    state_dir = short_tmp / ".reyn"
    shutil.move(root, state_dir)
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        assert d.call("daemon.status")["head"] >= meta["head"]
        acked = [
            d.call(
                "wal.append",
                {"agent": "a", "kind": "message.received", "data": {"message_id": t, "text": t}},
            )
            for t in ("k0", "k1", "k2")
        ]
    finally:
        d.stop(signal.SIGKILL, expect=-signal.SIGKILL)
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        events = d.call("wal.read", {"agent": "a", "since": meta["head"]})["events"]
        texts = {e["seq"]: e.get("text") for e in events}
        assert [texts.get(a["seq"]) for a in acked] == ["k0", "k1", "k2"]
    finally:
        d.stop()
    assert not list((state_dir / "state" / "wal").glob("torn/*"))  # space, not a torn tail

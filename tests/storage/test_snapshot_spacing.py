"""Snapshots are spaced by the state's msgpack bytes, not by the compressed file.

Counted from the file (deflated since snapshot format 2), a state that
compresses well was cut that many times more often, and retention's floor
moved with every cut: an online backup under load started over on each move
and ran out of its attempts. A restart counts the same way: the rebuild
loads the base snapshot, and learns its msgpack size from it.
"""

from __future__ import annotations

from pathlib import Path

from helpers import opts, wal_dir

from reynd.protocol import events as ev
from reynd.storage.store import Store

OPTIONS = opts(segment_bytes=1 << 20, snapshot_min_bytes=1024)
TEXT = "spacing " * 500  # 4 KB that deflate to a few dozen bytes


def _wal_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in wal_dir(root).glob("*.jsonl"))


def _message(i: int) -> ev.MessageReceived:
    return ev.MessageReceived(agent="a", message_id=f"m{i}", text=TEXT)


def _bytes_until_due(store: Store, root: Path, first: int) -> int:
    """Append messages until a snapshot is due: the WAL bytes that took."""
    before = _wal_bytes(root)
    i = first
    while not store.snapshot_due():
        store.append([_message(i)])
        i += 1
    return _wal_bytes(root) - before


def test_the_next_snapshot_waits_for_the_states_uncompressed_size(tmp_path: Path) -> None:
    with Store.open(tmp_path, OPTIONS) as store:
        store.append([ev.AgentCreated(agent="a")])
        store.append([_message(i) for i in range(40)])  # ~160 KB of state
        seq = store.snapshot_now()
        packed, size = store.snapshots.packed[seq], store.snapshots.sizes[seq]
        assert packed > 10 * size  # it compresses well: the two rules are far apart
        assert _bytes_until_due(store, tmp_path, 40) >= packed


def test_a_restart_spaces_from_the_loaded_snapshots_uncompressed_size(tmp_path: Path) -> None:
    with Store.open(tmp_path, OPTIONS) as store:
        store.append([ev.AgentCreated(agent="a")])
        store.append([_message(i) for i in range(40)])
        seq = store.snapshot_now()
        packed = store.snapshots.packed[seq]
    with Store.open(tmp_path, OPTIONS) as store:
        assert store.snapshots.packed.get(seq) == packed  # learned from the rebuild's load
        assert _bytes_until_due(store, tmp_path, 40) >= packed

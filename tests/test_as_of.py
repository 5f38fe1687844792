"""The daemon's as-of reads fall back from a damaged snapshot by Store.fallback_plan.

A real Store in a temporary directory; the daemon's AsOf part on it. The
read below meets two damaged snapshots: the nearest is cheap to use (run on
the event loop), the next is not (a worker thread); both are set aside and
the state comes from the log.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from reynd.daemon.as_of import AsOf
from reynd.daemon.coordinator import Gate
from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store


def _message(i: int) -> ev.MessageReceived:
    return ev.MessageReceived(agent="a", message_id=f"m{i}", text=f"hello {i}")


def _flip(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:40] + bytes([data[40] ^ 0x10]) + data[41:])


async def test_an_as_of_read_falls_back_past_damaged_snapshots_on_loop_and_thread(
    tmp_path: Path,
) -> None:
    with Store.open(tmp_path, StorageOptions(snapshot_min_bytes=1 << 40)) as store:
        store.append([ev.AgentCreated(agent="a")])
        for i in range(20):
            store.append([_message(i)])
        far = store.snapshot_now()  # 229 records below the target: replayed on a thread
        for i in range(20, 199):
            store.append([_message(i)])
        near = store.snapshot_now()  # 50 records below it: replayed on the loop
        for i in range(199, 260):
            store.append([_message(i)])
        target = 250
        expected = msgspec.to_builtins(store.state_as_of(target))
        assert store.plan(target).snapshot == near
        for seq in (near, far):
            _flip(store.snapshots.path(seq))
        state = await AsOf(store, Gate()).read(target)
        assert msgspec.to_builtins(state) == expected
        assert store.snapshots.seqs == []
        for seq in (near, far):
            assert store.snapshots.path(seq).with_suffix(".damaged").exists()

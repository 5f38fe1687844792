"""The daemon's group commit on the simulated disk (simdisk.py): every sync is the disk's.

Kernel AIO would sync the real file behind the simulated disk's back, so the
committer syncs on a worker thread whenever fsops says a layer is installed.
Every acknowledged append is then in what the disk made durable.
"""

from __future__ import annotations

from pathlib import Path

import trio
from helpers import opts
from simdisk import SimDisk, materialise

from reynd.daemon.committer import Committer
from reynd.protocol import events as ev
from reynd.storage import fsops
from reynd.storage.store import Store


async def test_on_the_simulated_disk_every_acknowledged_append_is_synced_by_it(
    tmp_path: Path,
) -> None:
    top = tmp_path / "disk"
    top.mkdir()
    with Store.open(top / "reyn", opts(segment_bytes=1 << 20)) as store:
        store.append([ev.AgentCreated(agent="a")])
    assert not fsops.simulated()
    disk = SimDisk(top)
    acknowledged: list[str] = []
    with fsops.installed(disk):
        assert fsops.simulated()
        store = Store.open(top / "reyn", opts(segment_bytes=1 << 20))
        committer = Committer(store, lambda events: None)  # kernel AIO wherever it can
        committer.start()
        assert committer.sync_path == "worker thread (simulated disk)"

        async def writer(w: int) -> None:
            for i in range(5):
                (done,) = await committer.append(
                    [ev.MessageReceived(agent="a", message_id=f"m{w}.{i}", text="x" * 200)]
                )
                assert isinstance(done, ev.MessageReceived)
                acknowledged.append(done.message_id)

        async with trio.open_nursery() as nursery:
            for w in range(8):
                nursery.start_soon(writer, w)
        await committer.stop()
        # Before the store's close syncs once more: only what the disk made durable.
        materialise(disk.image(lambda n: 0), tmp_path / "synced")
        store.close()
        disk.release()
    assert not fsops.simulated()
    with Store.open(tmp_path / "synced" / "reyn", opts(segment_bytes=1 << 20)) as after:
        inbox = {m.message_id for m in after.state.agents["a"].inbox}
    assert len(acknowledged) == 40 and inbox == set(acknowledged)

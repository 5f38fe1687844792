"""The one write sequence (storage/batch.py) and the reset record it stages whole."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from helpers import opts
from simdisk import Fault, SimDisk

from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.storage import fsops
from reynd.storage.errors import WalFailed
from reynd.storage.store import Store


def _msg(i: int) -> ev.MessageReceived:
    return ev.MessageReceived(agent="a", message_id=f"m{i}", text=f"t{i}")


def test_a_batch_of_appends_is_committed_in_seq_order_once_synced(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    with Store.open(root, opts()) as store:
        store.append([ev.AgentCreated(agent="a")])
        staged = [store.stage([_msg(2), _msg(3)]), store.stage([_msg(4)], atomic=True)]
        batch = store.batch(staged)
        with pytest.raises(AssertionError, match="commit a batch that is staged"):
            batch.commit()
        batch.write()
        with pytest.raises(AssertionError, match="write a batch that is written"):
            batch.write()
        with pytest.raises(AssertionError, match="commit a batch that is written"):
            batch.commit()
        assert store.head == 1  # written, not durable: nothing visible
        batch.sync()
        assert [e.seq for e in batch.commit()] == [2, 3, 4]
        assert store.head == 4
        assert [m.message_id for m in store.state.agents["a"].inbox] == ["m2", "m3", "m4"]
        with pytest.raises(AssertionError, match="commit a batch that is committed"):
            batch.commit()
    with Store.open(root, opts()) as store:
        assert [m.message_id for m in store.state.agents["a"].inbox] == ["m2", "m3", "m4"]


def test_a_batch_whose_sync_failed_is_never_committed(tmp_path: Path) -> None:
    """docs/durability.md rules 1 and 5: no commit without the sync, no retry after it failed."""
    top = tmp_path / "disk"
    top.mkdir()
    with Store.open(top / "reyn", opts()) as store:
        store.append([ev.AgentCreated(agent="a")])
    disk = SimDisk(top, faults=[Fault("fdatasync", 1, errno.EIO)])
    with fsops.installed(disk):
        store = Store.open(top / "reyn", opts())
        batch = store.batch([store.stage([_msg(2)])])
        batch.write()
        assert batch.start_sync() >= 0
        with pytest.raises(OSError, match="simulated"):
            batch.finish_sync()
        assert disk.failed == [("fdatasync", errno.EIO)]
        with pytest.raises(AssertionError, match="commit a batch that is syncing"):
            batch.commit()
        assert store.head == 1
        with pytest.raises(WalFailed):
            store.append([_msg(3)])
        store.close()
        disk.release()


def test_a_reset_record_is_complete_when_staged(tmp_path: Path) -> None:
    """What a substrate records first stays on the branch left: the reset supersedes it."""
    with Store.open(tmp_path / "reyn", opts()) as store:
        store.append([ev.AgentCreated(agent="a"), *(_msg(i) for i in range(2, 6))])
        reset = store.prepare_reset(3, "act_turn", "a")
        assert (reset.mode, store.head) == ("undo", 5)  # validated, nothing written
        before = [ev.WorkspaceFiles(ops=(ev.FileOp("f", "-", 0, "", 0),))]
        *_, record = store.append(store.reset_batch(reset, before), store.rebuild(3))
        assert isinstance(record, ev.Rewind)
        assert (record.seq, record.supersedes, record.target_n) == (7, 6, 3)
        assert (record.mode, record.agent) == ("act_turn", "a")
        # Only a checkout goes to an abandoned seq; the operation alone decides.
        for op in ("rewind", "act_turn"):
            with pytest.raises(errors.NotActive, match="checkout 5"):
                store.prepare_reset(5, op)
        assert store.prepare_reset(5, "checkout").mode == "fork_switch"
        assert store.head == 7

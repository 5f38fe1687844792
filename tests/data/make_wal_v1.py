"""Make tests/data/wal-v1.tar.gz: a state directory whose WAL has no preallocated space.

WAL format 1, before issue 14's preallocation (commit 8b912db): segments
appended with O_APPEND, ending at their last record. This script only runs
against that version (`git archive 8b912db | tar -x -C OLD`, then
`PYTHONPATH=OLD python -m tests.data.make_wal_v1 OUT_DIR` from this checkout);
the archive it made is kept, with every event and the state at the head in
wal-v1.json, so that tests/test_wal_compat.py can check that such a
directory still opens, reads and grows exactly as it did.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import msgspec

from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

SEGMENT_BYTES = 4096


def _turn(store: Store, agent: str, n: int) -> None:
    store.append([ev.MessageReceived(agent=agent, message_id=f"{agent}{n}", text=f"hello {n}")])
    store.append([ev.TurnStarted(agent=agent, turn_id=f"t{n}", message_id=f"{agent}{n}")])
    reply = (ev.Message(role="assistant", content=f"reply {n} " + "x" * (n % 7) * 20),)
    store.append([ev.StepCommitted(agent=agent, turn_id=f"t{n}", step=0, messages=reply)])
    store.append([ev.TurnEnded(agent=agent, turn_id=f"t{n}", label=f"turn {n}")])


def main(out: Path) -> None:
    root = out / "reyn"
    with Store.open(root, StorageOptions(segment_bytes=SEGMENT_BYTES)) as store:
        store.append([ev.AgentCreated(agent="a"), ev.AgentCreated(agent="b")])
        for n in range(12):
            _turn(store, "ab"[n % 2], n)
        batch = [
            ev.MessageReceived(agent="a", message_id=f"batch{k}", text="in a batch")
            for k in range(3)
        ]
        store.append(batch, atomic=True)
        store.snapshot_now()
        fork = store.head
        store.rewind(fork - 9)
        for n in range(12, 20):
            _turn(store, "a", n)
        store.checkout(fork)
        store.index_now()  # index files for every segment so far; the last one grows past it
        for n in range(20, 24):
            _turn(store, "b", n)
        events = list(store.wal.read(1, store.head))
        expected = {
            "head": store.head,
            "segments": len(store.wal.segments),
            "events": json.loads(msgspec.json.encode(events)),
            "state": json.loads(msgspec.json.encode(store.state)),
        }
    (out / "wal-v1.json").write_text(json.dumps(expected, indent=1) + "\n")
    with tarfile.open(out / "wal-v1.tar.gz", "w:gz") as tar:
        tar.add(root, arcname="reyn")
    shutil.rmtree(root)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

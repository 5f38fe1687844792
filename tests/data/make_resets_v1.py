"""Make tests/data/resets-v1.tar.gz: a state directory written before issue 24.

Its reset records carry no reason, no peer and no cancelled turns (the
format of commit 6bd38d2): a rewind, a checkout back onto the abandoned
branch, appends around them, and segment indexes of version 2 (a small
snapshot distance makes the daemon write them). The archive it made is kept,
with the figures the test expects in resets-v1.json, so that
tests/test_reset_records.py can check that such a directory still opens,
rewinds and shows its old resets with no reason. Runs only against that
version.

    python -m tests.data.make_resets_v1 OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.data.pack import pack
from tests.harness import Daemon, start_daemon

CONFIG = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 1\n"


def _append(d: Daemon, n: int) -> list[int]:
    seqs = []
    with d.connect() as c:
        for i in range(n):
            data = {"message_id": f"m{d.call('daemon.status')['head']}-{i}", "text": "x" * 200}
            reply = c.call("wal.append", {"agent": "a", "kind": "message.received", "data": data})
            seqs.append(reply["seq"])
    return seqs


def main(out: Path) -> None:
    work = out / "work"
    state_dir = work / "project" / ".reyn"
    d = start_daemon(work, state_dir=state_dir, config=CONFIG)
    facts: dict[str, Any] = {}
    try:
        d.call("wal.append", {"agent": "a", "kind": "agent.created"})
        seqs = _append(d, 30)
        first = d.call("rewind", {"seq": seqs[9]})
        _append(d, 3)
        second = d.call("checkout", {"seq": seqs[20]})
        _append(d, 2)
        facts = {
            "resets": [
                [first["reset_seq"], first["target"]],
                [second["reset_seq"], second["target"]],
            ],
            "head": d.call("daemon.status")["head"],
        }
    finally:
        d.stop()
    pack(work, out, "resets-v1", facts)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

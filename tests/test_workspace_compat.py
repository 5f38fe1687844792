"""A state directory written by reynd 0.1.0's workspace rewind opens and restores as it did.

tests/data/ws-v1.tar.gz was made by tests/data/make_ws_v1.py against that
version: trees captured per generation, no file records in the WAL, and a
forced checkout killed before its restore (its journal carries the `backup`
of that format, which becomes the tree of the tip it left).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from tests.data.make_ws_v1 import tree
from tests.harness import start_daemon

DATA = Path(__file__).with_name("data")


def test_a_v1_state_dir_finishes_its_restore_and_checks_out_every_tree(short_tmp: Path) -> None:
    meta = json.loads((DATA / "ws-v1.json").read_text())
    with tarfile.open(DATA / "ws-v1.tar.gz") as tar:
        tar.extractall(short_tmp, filter="tar")
    project = short_tmp / "project"
    state_dir = project / ".reyn"
    wal_before = sorted(p.read_bytes() for p in (state_dir / "state" / "wal").glob("*.jsonl"))
    trees: dict[str, Any] = meta["trees"]
    d = start_daemon(
        short_tmp,
        state_dir=state_dir,
        config='[workspace]\nenabled = true\nignore = ["*.log"]\n',
    )
    try:
        # The forced checkout to g2 that the old daemon left half done is finished.
        assert tree(project) == trees[str(meta["g2"])]
        assert not (state_dir / "state" / "workspace-restore.json").exists()
        head = d.call("daemon.status")["head"]
        # Opening wrote nothing to the log: the old records are read as they are.
        wal_after = sorted(p.read_bytes() for p in (state_dir / "state" / "wal").glob("*.jsonl"))
        assert wal_after == wal_before
        # Every recorded tree restores, including the user's edit kept (as that
        # version did) as the tree of the tip the forced checkout left.
        for name in ("g3", "g1", "r1", "g2", "g3"):
            with d.connect() as c:
                reply = c.request("checkout", {"seq": meta[name]})
            assert "result" in reply, (name, reply)
            assert tree(project) == trees[str(meta[name])], name
        assert d.call("daemon.status")["head"] == head + 5
    finally:
        d.stop()

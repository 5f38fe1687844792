"""Make tests/data/audit-v1.tar.gz: an audit log written before it was compressed.

Its files are plain JSON lines (`<run>.jsonl`, `<run>.1.jsonl`, ...: the
format of commit 711e433), over two runs, one of them rotated, with a
rewind among the records. The archive it made is kept, with the figures the
test expects in audit-v1.json, so that tests/test_audit_compressed.py can
check that such a log is still listed, shown, replayed and backed up beside
the compressed files a newer reynd writes. Runs only against that version.

    python -m tests.data.make_audit_v1 OUT_DIR
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.harness import start_daemon

# Small files: the first run rotates.
CONFIG = "[audit]\nfile_bytes = 4096\nflush_interval_s = 0\n"


def main(out: Path) -> None:
    work = out / "work"
    state_dir = work / "project" / ".reyn"
    facts: dict[str, Any] = {}
    d = start_daemon(work, state_dir=state_dir, config=CONFIG)
    try:
        d.call("wal.append", {"agent": "a", "kind": "agent.created"})
        seqs = []
        for i in range(12):
            data = {"message_id": f"m{i}", "text": f"message {i} " + "x" * 200}
            reply = d.call("wal.append", {"agent": "a", "kind": "message.received", "data": data})
            seqs.append(reply["seq"])
        rewind = d.call("rewind", {"seq": seqs[5], "reason": "before compression"})
        facts["rewind"] = rewind["reset_seq"]
    finally:
        d.stop()
    d = start_daemon(work, state_dir=state_dir, config=CONFIG)
    try:
        d.call("wal.append", {"agent": "b", "kind": "agent.created"})
        facts["runs"] = [r["run"] for r in d.call("events.runs")["runs"]]
        facts["lines"] = len(d.call("events.list", {"limit": 1000})["events"])
        facts["head"] = d.call("daemon.status")["head"]
    finally:
        d.stop()
    (state_dir / "reynd.toml").unlink()
    facts["files"] = sorted(p.name for p in (state_dir / "events").iterdir())
    with tarfile.open(out / "audit-v1.tar.gz", "w:gz") as tar:
        tar.add(work / "project", arcname="project")
    (out / "audit-v1.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Make tests/data/ws-v1.tar.gz: a state directory written by reynd 0.1.0's workspace rewind.

The format before issue 11 (commit 2c0cd2c): a tree per generation captured
after the boundary was acknowledged (`state/trees/<seq>`), no file records in
the WAL, a forced checkout that replaces the old tip's tree with what the
workspace held, and a restore journal that carries that `backup`. This
script only runs against that version (a checkout of 2c0cd2c); the archive
it made is kept, with the trees expected at each seq in ws-v1.json, so that
tests/test_workspace_compat.py can check that such a directory still opens
and restores exactly as it did.

    python -m tests.data.make_ws_v1 OUT_DIR
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.harness import start_daemon
from tests.runtime_helpers import kill_daemon, wait_until


def tree(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".reyn"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ["l", os.readlink(p)]
            else:
                out[rel] = ["f", p.read_text(), p.stat().st_mode & 0o777]
    return out


def main(out: Path) -> None:
    work = out / "work"
    project = work / "project"
    project.mkdir(parents=True)
    state_dir = project / ".reyn"
    config = '[workspace]\nenabled = true\nignore = ["*.log"]\n'
    env = {"REYN_CRASH_AT": "workspace.before_restore:2"}
    d = start_daemon(work, state_dir=state_dir, config=config, env=env)
    expected: dict[str, Any] = {}
    n = 0

    def add(kind: str, **data: Any) -> int:
        r = d.call("wal.append", {"agent": "ada", "kind": kind, "data": data})
        return int(r["seq"])

    def turn() -> int:
        nonlocal n
        n += 1
        add("message.received", message_id=f"m{n}", text=f"q{n}")
        add("turn.started", turn_id=f"t{n}", message_id=f"m{n}")
        seq = add("turn.ended", turn_id=f"t{n}", reply=f"r{n}")
        index = state_dir / "state" / "trees" / f"{seq:020d}"
        wait_until(index.is_file, f"the capture of {seq}")
        return seq

    add("agent.created")
    (project / "a.txt").write_text("a1")
    (project / "dir").mkdir()
    (project / "dir" / "b.txt").write_text("b1")
    (project / "run.sh").write_text("#!/bin/sh\n")
    (project / "run.sh").chmod(0o755)
    os.symlink("a.txt", project / "link")
    (project / "notes.log").write_text("ignored")
    g1 = turn()
    expected[str(g1)] = tree(project)
    (project / "a.txt").write_text("a2")
    shutil.rmtree(project / "dir")
    (project / "c.txt").write_text("c2")
    g2 = turn()
    expected[str(g2)] = tree(project)
    with d.connect() as c:
        r1 = c.call("checkout", {"seq": g1})["reset_seq"]
    expected[str(r1)] = tree(project)
    (project / "a.txt").write_text("a3")
    g3 = turn()
    # The user's edit; the forced checkout keeps it as the tree of g3 (the tip),
    # then the daemon is killed before it restores anything.
    (project / "a.txt").write_text("edited by hand")
    (project / "mine.txt").write_text("mine")
    expected[str(g3)] = tree(project)
    with d.connect() as c, __import__("contextlib").suppress(EOFError, ConnectionError):
        c.request("checkout", {"seq": g2, "force": True})
    kill_daemon(d)
    assert (state_dir / "state" / "workspace-restore.json").is_file()
    meta = {"g1": g1, "g2": g2, "g3": g3, "r1": r1, "trees": expected}
    (out / "ws-v1.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    (state_dir / "reynd.toml").unlink()
    with tarfile.open(out / "ws-v1.tar.gz", "w:gz") as tar:
        tar.add(project, arcname="project")
    shutil.rmtree(work)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

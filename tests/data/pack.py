"""What the fixture makers share: a state directory packed as `NAME.tar.gz` with `NAME.json`."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any


def pack(work: Path, out: Path, name: str, facts: dict[str, Any]) -> None:
    """Pack `work`/project (its `.reyn` without reynd.toml and the audit log, which
    these fixtures are not about) and write the figures the test expects."""
    state_dir = work / "project" / ".reyn"
    (state_dir / "reynd.toml").unlink()
    shutil.rmtree(state_dir / "events")
    with tarfile.open(out / f"{name}.tar.gz", "w:gz") as tar:
        tar.add(work / "project", arcname="project")
    (out / f"{name}.json").write_text(json.dumps(facts, indent=1) + "\n")

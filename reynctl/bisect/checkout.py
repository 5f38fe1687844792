"""One candidate, materialized: its workspace tree and `reyn-state.json` in a fresh directory.

Blobs are fetched once per bisect (their name is their content's sha256) and copied into
each checkout, so a step costs what the tree and the state as of its seq cost.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from reynctl.client import Client
from reynd.protocol import methods as m
from reynd.protocol import workspace_methods as wm

__all__ = ["STATE_FILE", "Checkouts"]

STATE_FILE = "reyn-state.json"


class Checkouts:
    """Checkouts of one bisect under one directory; `close` removes them all."""

    def __init__(self, c: Client, agent: str | None, root: Path | None = None) -> None:
        """`root`: the directory of an interactive bisect's checkouts (kept between runs)."""
        self._c = c
        self._agent = agent
        self.root = root or Path(tempfile.mkdtemp(prefix="reynctl-bisect-"))
        self._blobs = self.root / "blobs"
        self._blobs.mkdir(parents=True, exist_ok=True)
        self.workspace = True  # workspace rewind is on (as far as we know yet)

    def make(self, seq: int) -> tuple[Path, Path]:
        """(the directory to run in, the state file): the workspace and state as of `seq`."""
        where = Path(tempfile.mkdtemp(prefix=f"seq-{seq}-", dir=self.root))
        work = where / "workspace"
        work.mkdir()
        files: dict[str, wm.FileEntry] = {}
        if self.workspace:  # once the daemon said rewind is off, no need to ask again
            tree = self._c.workspace_tree(seq=seq)
            self.workspace, files = tree.enabled, tree.files
        for path, entry in files.items():
            self._put(work / path, entry)
        state = self._c.call("state.get", m.StateParams(seq=seq, agent=self._agent), m.StateResult)
        # Beside the tree when the tree has a file of that name (it is the tree's, then).
        state_file = where / STATE_FILE if STATE_FILE in files else work / STATE_FILE
        state_file.write_bytes(state.raw)  # state.get's result as sent
        return work, state_file

    def remove(self, work: Path) -> None:
        """Delete one checkout (made by `make`)."""
        shutil.rmtree(work.parent, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _put(self, dest: Path, entry: wm.FileEntry) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if entry.kind == "l":
            os.symlink(entry.ref, dest)
            return
        blob = self._blobs / entry.ref
        if not blob.exists():
            blob.write_bytes(self._c.workspace_blob(digest=entry.ref).data)
        shutil.copyfile(blob, dest)
        dest.chmod(entry.mode & 0o777)

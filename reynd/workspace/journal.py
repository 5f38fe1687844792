"""The restore journal, `state/workspace-restore.json`: a restore that a crash must finish.

Written (atomically) before the reset record, removed once the files are
restored. At start, its presence means: if the first reset record after
`head` targets `target` (the tip itself for a workspace-only restore, whose
`goal` is the tree as of `files`), the restore runs again (it is idempotent); if no
such record became durable, the journal is dropped and the files are left.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from reynd.storage.fsutil import atomic_write, fsync_dir

__all__ = ["Intent", "clear", "read", "write"]


class Intent(msgspec.Struct, kw_only=True):
    target: int
    head: int  # the tip before the reset (and before the file records that go with it)
    goal: str | None  # root manifest to restore (None: no tree at or below target)
    tip: str | None  # the tree the reset leaves; with no goal, it stays the tree of the reset
    # The seq `goal` is the tree of, when not `target`: a workspace-only restore (issue 25),
    # whose reset record targets the tip itself. Absent from older journals.
    files: int | None = None
    # Written by 0.1.0 only: what a forced checkout found, recorded as the tree of `head`.
    backup: str | None = None


def read(path: Path) -> Intent | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Intent)
    except FileNotFoundError:
        return None


def write(path: Path, intent: Intent) -> None:
    atomic_write(path, msgspec.json.encode(intent))


def clear(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    fsync_dir(path.parent)

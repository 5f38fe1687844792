"""The damage mark: `state/damage`, left when a running daemon finds a corrupt record.

A start takes the records a segment index describes on trust, so damage to
one of them is found after start-up: by the scrub that reads them back once
the daemon is ready, or by a read that needs one. Either way the daemon stops
(exit 3), as a start that found it would have refused to run (docs/durability.md
rule 7), and leaves this mark. The next start then trusts no index: it scans
and verifies every record, so it refuses to start with the same message, at
once and on every try, until the log is repaired (`reynd repair
--truncate-at`); a start whose full scan finds everything intact (the file
was restored from a backup, say) removes the mark and goes on.

The mark holds the operator's message as text. Older versions ignore it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Final

from reynd.storage import fsops
from reynd.storage.errors import CorruptionError
from reynd.storage.fsutil import atomic_write, fsync_dir

__all__ = ["DAMAGE_FILE", "clear_mark", "mark_damage", "read_mark"]

DAMAGE_FILE: Final = "damage"


def mark_damage(state_dir: Path, exc: CorruptionError) -> None:
    """Leave the mark (durably) for the next start."""
    atomic_write(state_dir / DAMAGE_FILE, f"{exc}\n".encode())


def read_mark(state_dir: Path) -> str | None:
    """The message of a mark a previous run left, or None."""
    try:
        return (state_dir / DAMAGE_FILE).read_text(errors="replace").strip() or "(no message)"
    except FileNotFoundError:
        return None


def clear_mark(state_dir: Path) -> None:
    """Remove the mark once a full scan found the log intact."""
    with contextlib.suppress(FileNotFoundError):
        fsops.unlink(state_dir / DAMAGE_FILE)
        fsync_dir(state_dir)

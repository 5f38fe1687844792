"""The config generation store, synchronous: the live database, its generations, restores.

Layout under `<state_dir>/state/config/`:

    config.db                 the live database (query it with `sqlite3`)
    index.log                 seq -> generation, restore progress (generations.py)
    generations/<sha256>.db   one file per distinct content

No event loop here: the daemon (substrate.py) runs these methods on a worker
thread, one at a time; tests call them directly.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reynd.config_store import db
from reynd.config_store.generations import (
    ConfigFileDamaged,
    GenerationFiles,
    GenerationIndex,
    open_fresh,
)
from reynd.core.lineage import Lineage
from reynd.storage import fsops
from reynd.storage.fsutil import fsync_dir, make_dirs

__all__ = ["ConfigCore", "ConfigFileDamaged"]

log = logging.getLogger(__name__)

_SIDECARS = ("-journal", "-wal", "-shm")


class ConfigCore:
    """One state directory's config database and its generations."""

    def __init__(self, root: Path) -> None:
        self.root = root  # .../state/config
        self.db_path = root / "config.db"
        self.files = GenerationFiles(root / "generations")
        self.index: GenerationIndex
        self.conn: sqlite3.Connection
        # The live database equals generation `current` unless `dirty`.
        self.current: str | None = None
        self.dirty = True
        self._agents: dict[str, db.AgentRow] = {}
        self.captures = 0  # generation files written (tests, logs)

    # -- open / close ----------------------------------------------------------------

    def open(self, head: int) -> None:
        """Create or open; a new store records `head` as its base (nothing below it captured)."""
        for path in (self.root.parent, self.root, self.files.dir):
            if make_dirs(path):
                fsync_dir(path.parent)
        self.files.remove_leftovers()
        for tmp in self.root.glob(".tmp-*"):
            fsops.unlink(tmp)
        self.index = GenerationIndex.open(self.root / "index.log")
        if self.index.created:
            self.index.append([f"base {head}"])
        try:
            self.conn = db._open(self.db_path)
            # A torn page (a copy taken mid-transaction) may pass the open and
            # fail the first read: check it all now, while the error can name it.
            db.quick_check(self.conn)
            self._agents = db.read_agents(self.conn)
            db.read_settings(self.conn)
        except sqlite3.DatabaseError as exc:
            self.index.close()
            if hasattr(self, "conn"):
                self.conn.close()
            raise ConfigFileDamaged(
                self.db_path,
                f"cannot open it ({exc})",
                "Restore it from a copy `reynd backup` made, or move it away: it is recreated "
                "empty, then `reynctl checkout` (or a restart after a rewind) restores a "
                "generation",
            ) from None
        self.current, self.dirty = None, True  # unknown until hashed

    def close(self) -> None:
        self.conn.close()
        self.index.close()

    # -- writes ------------------------------------------------------------------------

    def write_settings(self, changes: Mapping[str, Any]) -> None:
        if changes:
            db.write_settings(self.conn, changes)
            self.dirty = True

    def settings(self) -> dict[str, Any]:
        return db.read_settings(self.conn)

    def sync_agents(self, wanted: Mapping[str, db.AgentRow]) -> bool:
        """Mirror the agent configurations `wanted` (from the WAL's state); True if changed."""
        if not db.sync_agents(self.conn, self._agents, wanted):
            return False
        self._agents = dict(wanted)
        self.dirty = True
        return True

    # -- generations -------------------------------------------------------------------

    def capture(self) -> str:
        """The live content as a generation (written only if new); its hash. O(1) when clean."""
        if not self.dirty and self.current is not None:
            return self.current
        digest = db.content_hash(self.conn)
        if self.files.capture(self.conn, digest):
            self.captures += 1
        self.current, self.dirty = digest, False
        return digest

    def seal(self, seqs: Sequence[int], tip: int | None = None) -> None:
        """Index `seqs` (boundaries, ascending) with the live content; and `tip` if it changed."""
        keys = list(seqs)
        if tip is not None and self.dirty and tip not in keys:
            keys.append(tip)
        if not keys:
            return
        if self.dirty or self.current is None:
            # A change point: the first of these boundaries starts a new content,
            # the later ones share it (the nearest entry on a lineage answers).
            self.index.add_gens([keys[0]], self.capture())
        self.index.advance(max(keys))

    def pick(self, target: int, lineage: Lineage) -> str | None:
        """The generation for `target`: nearest at or below it on its lineage (None: empty)."""
        for seq, digest in self.index.candidates(target, lineage):
            if self.files.path(digest).exists():
                return digest
            log.warning("config generation %s (seq %d) is missing: using an older one", digest, seq)
        return None

    def restore_to_seq(self, target: int, lineage: Lineage) -> str | None:
        """Swap the live database for the generation of `target`, reopen, migrate.

        The agents are the generation's; the settings stay the live ones
        (operator policy: a rewind must not bring an old retention back).
        Returns the generation's hash (None: the empty configuration). Raises
        ConfigFileDamaged naming the file when it fails its checks; the live
        database is then left as it was.
        """
        digest = self.pick(target, lineage)
        tmp = self.root / ".tmp-config.db"
        if digest is None:
            open_fresh(tmp)
        else:
            self.files.checkout(digest, tmp)
        # Operator policy is not rewound: the live settings go into the restored
        # file before the swap, so a crash leaves either file with the same ones.
        db.carry_settings(self.conn, tmp)
        self.conn.close()
        for suffix in _SIDECARS:  # none after a clean close; never apply one to the new file
            sidecar = self.db_path.with_name(self.db_path.name + suffix)
            if sidecar.exists():
                fsops.unlink(sidecar)
        fsops.replace(tmp, self.db_path)
        fsync_dir(self.root)
        self.conn = db._open(self.db_path)  # runs _migrate_columns
        self._agents = db.read_agents(self.conn)
        live = db.content_hash(self.conn)
        self.current = digest
        self.dirty = digest is None or live != digest  # migrated: capture it next time
        if digest is None:
            self.current = None
        return digest

    def reset(self, reset: int, target: int, lineage: Lineage, pending: Sequence[int]) -> bool:
        """Carry out reset record `reset` (to `target`); False if it was already done.

        First the configuration being left is captured: the boundaries not yet
        indexed (`pending`) and the tip the reset supersedes (reset - 1). Then
        `reset R target` is logged, the file swapped, and `restored R` logged.
        After a crash anywhere in between, calling this again finishes the job:
        a logged `reset` line means the capture must not run again (the live
        file may already be the restored one).
        """
        state = self.index.reset_state(reset)
        if state == "done":
            return False
        if state == "todo":
            self.seal([s for s in pending if s < reset], tip=reset - 1)
            if (
                not self.dirty
                and self.current is not None
                and self.pick(target, lineage) == self.current
            ):
                # The target's configuration is the live one (the common case:
                # nothing was reconfigured): no swap, one fsync for both lines.
                self.index.append([f"reset {reset} {target}", f"restored {reset}"])
                return True
            self.index.append([f"reset {reset} {target}"])
        self.restore_to_seq(target, lineage)
        self.index.append([f"restored {reset}"])
        return True

    def generation_count(self) -> int:
        return len(self.files.names())

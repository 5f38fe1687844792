"""Workspace rewind at a reset (rewind, checkout, act-turn rewind): the Substrate hooks.

- `before_reset(target, force)`: the workspace is scanned and compared with
  the tree as of the tip; changes reynd did not record refuse the reset
  (WorkspaceDirty) unless `force`. The steps in flight still run.
- `reset_records(target)`: they are cancelled now: what the workspace holds
  that is not recorded (what the scan found, what the watcher saw since) is
  stored and becomes a `workspace.files` record just before the reset
  record (so `checkout <reset - 1>` brings it back); the restore journal is
  written.
- `after_reset(target, reset_seq)`: restore tree(target), file by file;
  index it as the tree of the target; remove the journal.
"""

from __future__ import annotations

import time

import trio

from reynd.protocol import errors
from reynd.protocol.events import Event
from reynd.storage import crashpoints
from reynd.workspace import journal
from reynd.workspace.core import Prepared, WorkspaceCore, file_records, log
from reynd.workspace.model import Dir, apply, flat
from reynd.workspace.tree import Scan, changed_paths, restore_tree, scan, store_dir

__all__ = ["SHOWN_PATHS", "Resets"]

SHOWN_PATHS = 8  # dirty paths named in the error message (all of them are in data.paths)


class Resets(WorkspaceCore):
    async def before_reset(self, target: int, force: bool) -> None:
        await self._settled.wait()
        async with self._lock:
            plan = self.history.plan(target)
            if plan is None:
                return  # no tree as of target (rewind was off): the files stay as they are
            dirty = await trio.to_thread.run_sync(self._dirty_paths)
            self._dirty.paths.update(dirty)  # for reset_records to record, if it comes to it
            head = self._store.head
            if dirty and not force:
                raise errors.WorkspaceDirty(
                    _dirty_message(dirty, head),
                    {"paths": dirty, "workspace": str(self.root), "head": head, "target": target},
                )
            if dirty:
                log.warning("workspace.forced", paths=len(dirty), kept_as_record_after=head)

    async def reset_records(self, target: int) -> list[Event]:
        """Record what the workspace holds that is not recorded; journal the restore."""
        async with self._lock:
            plan = self.history.plan(target)
            prepared = await trio.to_thread.run_sync(self._seal)
            goal = await trio.to_thread.run_sync(self.history.execute, plan) if plan else None
            intent = journal.Intent(target=target, head=self._store.head, goal=None, tip=None)
            await trio.to_thread.run_sync(self._write_intent, intent, goal, prepared.model)
            self._adopt(prepared, ())
            self._pending = (intent, goal)
            return list(file_records(prepared.changes, "reset"))

    def _seal(self) -> Prepared:
        """Everything that differs from the model, stored (worker thread, locked).

        What before_reset's full scan found, and what the watcher saw since
        (a cancelled step's last writes): each looked at and stored.
        """
        changes, hasher = self._look(self.blobs)
        self.blobs.sync()
        if changes:
            log.warning("workspace.unrecorded_kept", paths=len(changes))
        return Prepared(apply(self._model, changes), changes, None, hasher.hashed, hasher.added)

    def _write_intent(self, intent: journal.Intent, goal: Dir | None, left: Dir) -> None:
        if goal is not None:
            intent.goal = store_dir(self.manifests, goal)[0]
        else:
            intent.tip = store_dir(self.manifests, left)[0]
        journal.write(self._journal, intent)

    async def after_reset(self, target: int, reset_seq: int) -> None:
        async with self._lock:
            pending, self._pending = self._pending, None
            if pending is None or pending[0].target != target:  # not prepared: rebuild it
                plan = self.history.plan(target)
                goal = await trio.to_thread.run_sync(self.history.execute, plan) if plan else None
                intent = journal.Intent(target=target, head=reset_seq - 1, goal=None, tip=None)
                await trio.to_thread.run_sync(self._write_intent, intent, goal, self._model)
                pending = (intent, goal)
            intent, goal = pending
            try:
                now = await trio.to_thread.run_sync(self._now) if goal is not None else None
                await trio.to_thread.run_sync(self._apply, intent, reset_seq, now)
            finally:
                # Failed part-way, the journal stays and the next start finishes the
                # restore: the goal is the tree as of the tip meanwhile, whatever the
                # files hold.
                if goal is not None:
                    self._model = goal
                self._unindexed = False
                self._dirty.clear()  # looked at for the restore; later changes are queued
                self._dirty.full = self._watcher is None

    def _apply(self, intent: journal.Intent, reset_seq: int, current: Scan | None = None) -> None:
        """Restore intent.goal, then index the trees; idempotent (a restart redoes it).

        `current`: what the workspace holds (a full scan when not known, as at start).
        """
        started = time.perf_counter()
        crashpoints.hit("workspace.before_restore")
        written = deleted = 0
        if intent.goal is not None:
            if current is None:
                current = scan(self.root, self._ignore, self._cache)
            target = flat(self.history.load(intent.goal))
            written, deleted, skipped = restore_tree(
                self.root, self._ignore, current, target, self.blobs
            )
            if skipped:
                log.error(
                    "workspace.restore_skipped",
                    paths=skipped[:SHOWN_PATHS],
                    count=len(skipped),
                    reason="a directory, symlink or ignored path not recorded is in the way",
                )
        crashpoints.hit("workspace.after_restore")
        if intent.backup is not None:  # a journal of 0.1.0: its forced checkout's backup
            self.index.set(intent.head, intent.backup)
        if intent.goal is not None:
            if self.index.get(intent.target) != intent.goal:
                self.index.set(intent.target, intent.goal)  # tree(reset) = tree(target)
        elif intent.tip is not None:
            self.index.set(reset_seq, intent.tip)  # nothing to restore: the files stay
        journal.clear(self._journal)
        log.info(
            "workspace.restored",
            target=intent.target,
            reset=reset_seq,
            written=written,
            deleted=deleted,
            duration_ms=round((time.perf_counter() - started) * 1e3, 3),
        )

    def _reset_after(self, intent: journal.Intent) -> int | None:
        """The reset record the journal was written for, if it became durable."""
        for r, t in self._store.lineage.resets:
            if r > intent.head:
                return r if t == intent.target else None
        return None

    def _dirty_paths(self) -> list[str]:
        return changed_paths(flat(self._model), self._scan(False))


def _dirty_message(paths: list[str], head: int) -> str:
    shown = ", ".join(paths[:SHOWN_PATHS])
    more = f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else ""
    return (
        f"the workspace has {len(paths)} change(s) reynd did not record since seq {head}: "
        f"{shown}{more}. "
        "Save them elsewhere, or retry the checkout with force=true to restore anyway: "
        "what it overwrites is recorded first, right before its reset record R, and "
        "`checkout R-1` brings it back"
    )

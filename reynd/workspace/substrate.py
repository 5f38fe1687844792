"""Workspace rewind: the workspace directory as a substrate tied to the WAL, seq by seq.

The tree as of seq N is the nearest recorded tree at or below N on N's
lineage (`state/trees/<seq>`) plus the `workspace.files` records after it
(history.py). This module keeps the two in step with the runtime:

- `record(committer, events)`: a step's commit, or a boundary record, goes
  into the WAL with a `workspace.files` record just before it, in the same
  batch, holding what changed since the last one (found through the
  watcher, so it costs what changed). Blobs are durable before the batch is
  staged, so before it is acknowledged; for a boundary, so are the manifests
  of its tree. `on_generation(seq)` then writes `trees/<seq>` (a crash
  before it only means tree(seq) is rebuilt from an older tree + records).
- `start(head)`: finish a restore the journal shows was interrupted after
  its reset record became durable (drop it otherwise); one that cannot
  finish is reported (`info()`, the log) and the daemon serves, the
  journal kept for the next start. Rebuild the tree as of the tip, or
  capture a first one. `settle()` then finds what changed
  while the daemon was down: recorded with the next step or boundary.

The reset hooks are in resets.py, the retention hooks in retention.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import trio

from reynd.protocol.events import Event, StepCommitted, boundary_kind
from reynd.protocol.methods import RestorePending, WorkspaceInfo
from reynd.storage import crashpoints
from reynd.storage.appender import Appender, TicketT
from reynd.workspace import journal
from reynd.workspace.core import Pending, Prepared, RecordStats, file_records, log, resolve_root
from reynd.workspace.model import Dir, apply, changed, flat
from reynd.workspace.refusals import not_stored
from reynd.workspace.resets import Resets
from reynd.workspace.retention import GcStats, Retention
from reynd.workspace.tree import RootUnusable, scan, store_dir
from reynd.workspace.watch import Watcher, WatchUnavailable

__all__ = ["GcStats", "RecordStats", "Workspace", "resolve_root"]


SHOWN_IN_STATUS = 100  # paths of an unfinished restore in daemon.status (`count`: all)


class Workspace(Resets, Retention):
    """The Substrate for one workspace directory (reynd/daemon/hooks.py)."""

    # -- start ---------------------------------------------------------------------------

    async def start(self, head: int) -> None:
        await trio.to_thread.run_sync(self.open)
        async with self._lock:
            intent = await trio.to_thread.run_sync(journal.read, self._journal)
            if intent is not None:
                reset = self._reset_after(intent)
                if reset is None:
                    log.info("workspace.restore_dropped", target=intent.target, head=intent.head)
                    await trio.to_thread.run_sync(journal.clear, self._journal)
                else:
                    log.warning("workspace.restore_resumed", target=intent.target, reset=reset)
                    await self._resume(intent, reset)
            plan = self.history.plan(self._store.head)
            if plan is None:
                self._model = await trio.to_thread.run_sync(self._baseline, self._store.head)
            else:
                self._model = await trio.to_thread.run_sync(self.history.execute, plan)
                self._unindexed = bool(plan.records)
            if not self._watch:
                self._dirty.full = True  # a full scan at every record
            else:
                try:
                    self._watcher = await trio.to_thread.run_sync(Watcher, self.root, self._ignore)
                except WatchUnavailable as exc:
                    self._unwatch(exc)
        log.info(
            "workspace.open",
            root=str(self.root),
            trees=len(self.index),
            watches=self._watcher.watches if self._watcher else 0,
        )

    async def _resume(self, intent: journal.Intent, reset: int) -> None:
        """Finish the restore the journal shows; a start never fails on it (it is reported).

        Right after a crash the tip is the reset: its tree is the journal's goal.
        A tip past it means the daemon served after a restore it could not
        finish: the files are made the tree as of the tip, what was recorded
        since included.
        """
        head = self._store.head
        try:
            goal = None
            plan = self.history.plan(head) if head > reset and intent.goal else None
            if plan is not None:
                goal = flat(await trio.to_thread.run_sync(self.history.execute, plan))
            await trio.to_thread.run_sync(self._apply, intent, reset, None, goal)
        except Exception as exc:
            self.unfinished = Pending(intent.target, reset, [(".", repr(exc))])
            log.error(
                "workspace.restore_unfinished",
                target=intent.target,
                reset=reset,
                error=repr(exc),
                effect="the journal stays: the next start finishes the restore",
                exc_info=exc,
            )

    def info(self) -> WorkspaceInfo:
        """For daemon.status: the workspace, and the restore a failure left, if any."""
        pending = None
        if self.unfinished is not None:
            u = self.unfinished
            pending = RestorePending(
                target=u.target,
                reset_seq=u.reset_seq,
                count=len(u.problems),
                paths=[p for p, _ in u.problems[:SHOWN_IN_STATUS]],
                reasons=dict(u.problems[:SHOWN_IN_STATUS]),
            )
        return WorkspaceInfo(root=str(self.root), restore_pending=pending)

    async def settle(self) -> None:
        """Mark what changed while the daemon was down, for the next record (once, at start)."""
        try:
            async with self._lock:
                now = await trio.to_thread.run_sync(self._scan)
                found = changed(flat(self._model), now.tree)
                self._dirty.paths.update(found)
                if found:
                    log.info("workspace.changed_while_down", paths=len(found))
        except RootUnusable as exc:
            # Each write refuses until the root is back, then scans everything.
            self._dirty.full = True
            log.error("workspace.root_unusable", root=str(self.root), error=str(exc))
        finally:
            self._settled.set()

    run = settle  # the daemon's background task for this substrate

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()

    def _baseline(self, head: int) -> Dir:
        """First start with rewind on: the files now are the tree as of the tip (all stored)."""
        result = scan(self.root, self._ignore, self._cache, self.blobs)
        model = apply(Dir({}), result.tree)
        digest, added = store_dir(self.manifests, model)
        self.index.set(head, digest)
        log.info(
            "workspace.baseline",
            root=str(self.root),
            seq=head,
            files=len(result.tree),
            bytes_added=added + result.added_bytes,
        )
        return model

    # -- recording (the runtime's and wal.append's path) ---------------------------------

    async def record(
        self, committer: Appender[TicketT], events: Sequence[Event], *, atomic: bool = False
    ) -> list[Event]:
        """Append `events` durably, with the workspace changes since the last record first.

        `atomic` (a wal.append_batch) covers the file records too. Returns
        `events` with their seqs (the file records are not among them).
        """
        if not self._settled.is_set():
            await self._settled.wait()
        started = time.perf_counter()
        boundary = any(boundary_kind(e) is not None for e in events)
        cause = "step" if any(isinstance(e, StepCommitted) for e in events) else "boundary"
        try:  # no trip through the scheduler when nobody holds it (the usual case)
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            first = self._watcher.read_nowait() if self._watcher is not None else b""
            if first or self._dirty or (boundary and (self._unindexed or self._root_moved())):
                try:
                    prepared = await trio.to_thread.run_sync(self._prepare, first, boundary)
                except OSError as exc:
                    # Nothing is staged and the model is unchanged: what changed
                    # stays dirty, for the next record that can store it.
                    raise not_stored(exc) from exc
            else:
                prepared = Prepared(self._model, {}, None)
            records = file_records(prepared.changes, cause)
            # From here to `wait`, no checkpoint: the writer wakes this task.
            queued = committer.enqueue([*records, *events], atomic=atomic)
            self._adopt(prepared, queued.staged.events)
        finally:
            self._lock.release()
        self.last_record = RecordStats(
            len(prepared.changes),
            prepared.hashed,
            prepared.added,
            (time.perf_counter() - started) * 1e3,
        )
        durable = await committer.wait(queued)
        return durable[len(records) :]

    def _prepare(self, first: bytes, boundary: bool) -> Prepared:
        """Look at what the watcher says changed; store new content (worker thread, locked)."""
        looked, hasher = self._look(self.blobs, first)
        changes = self._unstuck(looked)
        self.blobs.sync()  # every blob a record names is durable before it is staged
        model = apply(self._model, changes)
        root = None
        added = hasher.added
        if boundary and (changes or self._unindexed):
            root, n = store_dir(self.manifests, model)
            added += n
        crashpoints.hit("workspace.recorded")
        return Prepared(model, changes, root, hasher.hashed, added)

    def committed(self, events: Sequence[Event]) -> None:
        """From the commit hook: these records are durable."""
        if not self._inflight:
            return
        for e in events:
            self._inflight.discard(e.seq)
        if not self._inflight:
            self._inflight_done.set()
            self._inflight_done = trio.Event()

    async def on_generation(self, seq: int) -> None:
        """A boundary is durable: record its tree as trees/<seq> (its manifests are stored)."""
        root = self._pointers.get(seq)
        if root is None:
            return  # unchanged since the newest recorded tree: nothing to write
        try:
            crashpoints.hit("workspace.before_pointer")
            await trio.to_thread.run_sync(self.index.write, seq, root)
        except OSError as exc:
            # Only speed is lost (as after a crash here): the tree as of `seq` is
            # rebuilt from an older tree and the file records, all durable.
            log.warning("workspace.tree_not_written", seq=seq, error=str(exc))
            async with self._lock:
                del self._pointers[seq]
            return
        async with self._lock:
            self.index.note(seq, root)
            del self._pointers[seq]

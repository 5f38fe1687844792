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
- `before_reset(target, force)`: the workspace is compared with the tree as
  of the tip; changes reynd did not record refuse the reset (WorkspaceDirty)
  unless `force`.
- `reset_records(target)`: after the in-flight steps are cancelled: what
  the workspace holds that is not recorded becomes a `workspace.files`
  record just before the reset record (so `checkout <reset - 1>` brings it
  back); the restore journal is written.
- `after_reset(target, reset_seq)`: restore tree(target), file by file;
  remove the journal.
- `start(head)`: finish a restore the journal shows was interrupted after
  its reset record became durable (drop it otherwise); rebuild the tree as
  of the tip, or capture a first one. `settle()` then finds what changed
  while the daemon was down: recorded with the next step or boundary.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio

from reynd.protocol import errors
from reynd.protocol.events import Event, StepCommitted, WorkspaceFiles, boundary_kind
from reynd.storage import crashpoints
from reynd.storage.store import Store
from reynd.workspace import journal
from reynd.workspace.blobs import ObjectStore, TreeIndex
from reynd.workspace.config import WorkspaceConfig
from reynd.workspace.history import History, TreePlan
from reynd.workspace.model import Dir, Item, apply, changed, flat, to_ops
from reynd.workspace.observe import observe
from reynd.workspace.retention import collect_unreferenced
from reynd.workspace.tree import (
    CacheEntry,
    Hasher,
    Ignore,
    Scan,
    changed_paths,
    restore_tree,
    scan,
    store_dir,
)
from reynd.workspace.watch import Dirty, Watcher, WatchUnavailable

if TYPE_CHECKING:
    from reynd.daemon.committer import Committer

__all__ = ["GcStats", "RecordStats", "Workspace", "resolve_root"]

log = structlog.get_logger("reynd.workspace")

SHOWN_PATHS = 8  # dirty paths named in the error message (all of them are in data.paths)
OPS_PER_RECORD = 512  # a large change is split over several records of one batch


@dataclass(frozen=True, slots=True)
class RecordStats:
    changed: int  # paths recorded
    hashed: int  # files read
    bytes_added: int  # blob + manifest bytes stored
    duration_ms: float  # looking, storing and staging (not the WAL's fsync)


@dataclass(frozen=True, slots=True)
class GcStats:
    trees: int
    manifests: int
    blobs: int
    bytes: int


@dataclass(slots=True)
class _Prepared:
    model: Dir
    changes: dict[str, Item | None]
    root: str | None  # the tree's stored root manifest, for a boundary
    hashed: int = 0
    added: int = 0


def resolve_root(config: WorkspaceConfig, state_dir: Path) -> Path:
    base = state_dir.resolve().parent
    return (base / config.path).resolve() if config.path else base


def file_records(changes: dict[str, Item | None], cause: str) -> list[WorkspaceFiles]:
    ops = to_ops(changes)
    return [
        WorkspaceFiles(ops=tuple(ops[i : i + OPS_PER_RECORD]), cause=cause)  # type: ignore[arg-type]
        for i in range(0, len(ops), OPS_PER_RECORD)
    ]


class Workspace:
    """The Substrate for one workspace directory (reynd/daemon/hooks.py)."""

    def __init__(self, config: WorkspaceConfig, state_dir: Path, store: Store) -> None:
        self.root = resolve_root(config, state_dir)
        self._store = store
        self._state = state_dir / "state"
        self._journal = self._state / "workspace-restore.json"
        excluded: list[str] = []
        with_state = state_dir.resolve()
        if with_state.is_relative_to(self.root) and with_state != self.root:
            excluded.append(with_state.relative_to(self.root).as_posix())
        self._ignore = Ignore(config.ignore, excluded)
        self._watch = config.watch
        self._cache: dict[str, CacheEntry] = {}
        self._lock = trio.Lock()  # the model, the index, the dirty set: one user at a time
        self._settled = trio.Event()
        self._model = Dir({})  # the tree as of the last staged record
        self._unindexed = False  # the model differs from the newest recorded tree
        self._dirty = Dirty()
        self._watcher: Watcher | None = None
        self._pointers: dict[int, str] = {}  # boundary seq -> its tree, not indexed yet
        self._inflight: set[int] = set()  # file records staged, not durable yet
        self._inflight_done = trio.Event()
        self._pending: tuple[journal.Intent, Dir | None] | None = None  # the reset under way
        self.blobs: ObjectStore
        self.manifests: ObjectStore
        self.index: TreeIndex
        self.history: History
        self.last_record: RecordStats | None = None

    # -- start ---------------------------------------------------------------------------

    def open(self) -> None:
        """Create the directories and load the index (worker thread; `start` calls it)."""
        made = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        if made:
            log.info("workspace.created", root=str(self.root))
        self.blobs = ObjectStore(self._state / "blobs")
        self.manifests = ObjectStore(self._state / "manifests")
        self.index = TreeIndex(self._state / "trees")
        self.history = History(self._store, self.index, self.manifests)

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
                    await trio.to_thread.run_sync(self._apply, intent, reset)
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

    async def settle(self) -> None:
        """Mark what changed while the daemon was down, for the next record (once, at start)."""
        try:
            async with self._lock:
                now = await trio.to_thread.run_sync(self._scan, False)
                found = changed(flat(self._model), now)
                self._dirty.paths.update(found)
                if found:
                    log.info("workspace.changed_while_down", paths=len(found))
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

    async def record(self, committer: Committer, events: Sequence[Event]) -> list[Event]:
        """Append `events` durably, with the workspace changes since the last record first.

        Returns `events` with their seqs (the file records are not among them).
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
            if first or self._dirty or (boundary and self._unindexed):
                prepared = await trio.to_thread.run_sync(self._prepare, first, boundary)
            else:
                prepared = _Prepared(self._model, {}, None)
            records = file_records(prepared.changes, cause)
            # From here to `wait`, no checkpoint: the writer wakes this task.
            queued = committer.enqueue([*records, *events])
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

    def _prepare(self, first: bytes, boundary: bool) -> _Prepared:
        """Look at what the watcher says changed; store new content (worker thread, locked)."""
        if self._watcher is not None:
            try:
                self._watcher.drain(first, self._dirty)
            except WatchUnavailable as exc:
                self._unwatch(exc)
        hasher = Hasher(self.root, self._cache, self.blobs)
        changes = observe(self.root, self._ignore, self._dirty, self._model, hasher)
        self.blobs.sync()  # every blob a record names is durable before it is staged
        model = apply(self._model, changes)
        root = None
        added = hasher.added
        if boundary and (changes or self._unindexed):
            root, n = store_dir(self.manifests, model)
            added += n
        crashpoints.hit("workspace.recorded")
        return _Prepared(model, changes, root, hasher.hashed, added)

    def _adopt(self, prepared: _Prepared, staged: Iterable[Event]) -> None:
        """The staged batch holds `prepared`: it is the tree as of the batch's last record."""
        self._model = prepared.model
        self._dirty.clear()
        self._dirty.full = self._watcher is None
        for e in staged:
            if isinstance(e, WorkspaceFiles):
                self._inflight.add(e.seq)
            elif prepared.root is not None and boundary_kind(e) is not None:
                self._pointers[e.seq] = prepared.root
        if prepared.root is not None:
            self._unindexed = False
        elif prepared.changes:
            self._unindexed = True

    def _unwatch(self, exc: OSError) -> None:
        log.warning(
            "workspace.unwatched",
            root=str(self.root),
            error=str(exc),
            effect="every step and generation scans the whole workspace",
        )
        if self._watcher is not None:
            self._watcher.close()
        self._watcher = None
        self._dirty.full = True

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
        crashpoints.hit("workspace.before_pointer")
        await trio.to_thread.run_sync(self.index.write, seq, root)
        async with self._lock:
            self.index.note(seq, root)
            del self._pointers[seq]

    # -- resets --------------------------------------------------------------------------

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

    def _seal(self) -> _Prepared:
        """Everything that differs from the model, stored (worker thread, locked).

        What before_reset's full scan found, and what the watcher saw since
        (a cancelled step's last writes): each looked at and stored.
        """
        changes, hasher = self._look(self.blobs)
        self.blobs.sync()
        if changes:
            log.warning("workspace.unrecorded_kept", paths=len(changes))
        return _Prepared(apply(self._model, changes), changes, None, hasher.hashed, hasher.added)

    def _look(self, objects: ObjectStore | None) -> tuple[dict[str, Item | None], Hasher]:
        """What differs from the model where the dirty set says (all of it without a watcher)."""
        if self._watcher is not None:
            try:
                self._watcher.drain(b"", self._dirty)
            except WatchUnavailable as exc:
                self._unwatch(exc)
        hasher = Hasher(self.root, self._cache, objects)
        return observe(self.root, self._ignore, self._dirty, self._model, hasher), hasher

    def _now(self) -> Scan:
        """What the workspace holds now, for a restore: the model and what changed since."""
        changes, _ = self._look(None)
        return Scan(flat(apply(self._model, changes)))

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

    def _scan(self, store: bool) -> dict[str, Item]:
        return scan(self.root, self._ignore, self._cache, self.blobs if store else None).tree

    def _dirty_paths(self) -> list[str]:
        return changed_paths(flat(self._model), self._scan(False))

    # -- retention -----------------------------------------------------------------------

    async def pin(self, points: Iterable[int]) -> None:
        """Before the WAL below a new floor goes: record the tree of each way into it.

        A seq whose tree needs file records that are about to be dropped gets
        a tree of its own (trees/<seq>), durable before any segment goes.
        """
        async with self._lock:
            for seq in sorted(set(points)):
                plan = self.history.plan(seq) if 0 <= seq <= self._store.head else None
                if plan is None or not plan.records:
                    continue
                await trio.to_thread.run_sync(self._pin_one, plan)

    def _pin_one(self, plan: TreePlan) -> None:
        digest, _ = store_dir(self.manifests, self.history.execute(plan))
        self.index.set(plan.seq, digest)

    async def collect(self) -> GcStats:
        """Drop trees no kept seq resolves to, then manifests and blobs nothing kept names."""
        async with self._lock:
            while self._inflight:  # their blobs are named by records not yet readable
                await self._inflight_done.wait()
            store = self._store
            floor = store.floor
            keep = {s for s in self.index.seqs if s >= floor}
            probes = {floor - 1}
            probes.update(t for r, t in store.lineage.resets if r >= floor and t < floor)
            probes.update(s for s in store.snapshots.seqs if s < floor)
            for p in probes:
                found = self.history.base(p) if 0 <= p <= store.head else None
                if found is not None:
                    keep.add(found[0])
            records = tuple(store.file_ops.between(floor, store.head))
            pending = self._pending[0] if self._pending else None
            extra_roots = {*self._pointers.values()}
            if pending is not None:
                extra_roots.update(d for d in (pending.goal, pending.tip) if d)
            stats = await trio.to_thread.run_sync(
                lambda: collect_unreferenced(
                    self.index,
                    self.manifests,
                    self.blobs,
                    keep=keep,
                    roots=extra_roots,
                    model=self._model,
                    records=self.history.records(records),
                    journal_path=self._journal,
                )
            )
            self.history.forget(stats.manifests_gone)
            for entry in self._cache.values():
                if entry.digest in stats.blobs_gone:
                    entry.stored = False
        result = GcStats(stats.trees, len(stats.manifests_gone), len(stats.blobs_gone), stats.bytes)
        if result.trees or result.blobs or result.manifests:
            log.info(
                "workspace.gc",
                trees=result.trees,
                manifests=result.manifests,
                blobs=result.blobs,
                bytes=result.bytes,
            )
        return result


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

"""Workspace rewind: the workspace directory as a substrate tied to the WAL at boundary seqs.

- `on_generation(seq)`: capture the tree (blobs for changed files only, one
  manifest, `trees/<seq>`), off the event loop.
- `before_reset(target, force)`: compare the workspace with the tree recorded
  at the tip; changes reynd did not record refuse the reset (WorkspaceDirty)
  unless `force`, and with `force` they are stored first. A journal file
  (`state/workspace-restore.json`) records the restore about to happen.
- `after_reset(target, reset_seq)`: restore the tree of target (the newest
  recorded tree at or below it on its lineage), file by file; record the
  overwritten content as the tree of the old tip (so `checkout <old tip>`
  brings it back) and the restored tree as the tree of the reset record;
  remove the journal.
- `start(head)`: finish a restore the journal shows was interrupted after its
  reset record became durable; drop it if the reset never happened. With no
  tree recorded for the tip yet (first start with rewind on), capture one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import structlog
import trio

from reynd.protocol import errors
from reynd.storage import crashpoints
from reynd.storage.fsutil import atomic_write, fsync_dir
from reynd.storage.store import Store
from reynd.workspace.blobs import ObjectStore, TreeIndex
from reynd.workspace.config import WorkspaceConfig
from reynd.workspace.tree import (
    CacheEntry,
    Ignore,
    Scan,
    Tree,
    changed_paths,
    load_tree,
    put_tree,
    reachable,
    restore_tree,
    scan,
)

__all__ = ["CaptureStats", "GcStats", "Workspace", "resolve_root"]

log = structlog.get_logger("reynd.workspace")

SHOWN_PATHS = 8  # dirty paths named in the error message (all of them are in data.paths)


class _Intent(msgspec.Struct, kw_only=True):
    """The restore journal: written before the reset record, removed after the restore."""

    target: int
    head: int  # the tip before the reset
    goal: str | None  # manifest to restore (None: nothing recorded at or below target)
    tip: str | None  # the tree recorded at the tip
    backup: str | None  # what the workspace held instead (force over unrecorded changes)


@dataclass(frozen=True, slots=True)
class CaptureStats:
    seq: int
    files: int
    hashed: int  # files read (changed or not in the stat cache)
    bytes_added: int  # new blob + manifest + index bytes
    duration_ms: float


@dataclass(frozen=True, slots=True)
class GcStats:
    trees: int
    manifests: int
    blobs: int
    bytes: int


def resolve_root(config: WorkspaceConfig, state_dir: Path) -> Path:
    base = state_dir.resolve().parent
    return (base / config.path).resolve() if config.path else base


class Workspace:
    """The Substrate for one workspace directory (reynd/daemon/hooks.py)."""

    def __init__(self, config: WorkspaceConfig, state_dir: Path, store: Store) -> None:
        self.root = resolve_root(config, state_dir)
        self._store = store
        state = state_dir / "state"
        self._state = state
        self._journal = state / "workspace-restore.json"
        excluded: list[str] = []
        with_state = state_dir.resolve()
        if with_state.is_relative_to(self.root) and with_state != self.root:
            excluded.append(with_state.relative_to(self.root).as_posix())
        self._ignore = Ignore(config.ignore, excluded)
        self._cache: dict[str, CacheEntry] = {}
        self._lock = trio.Lock()
        self._open_head = store.head  # boundaries above it are delivered to on_generation
        self._captured = store.head
        self._capture_done = trio.Event()
        self._pending: _Intent | None = None
        self._manifests_cache: dict[str, Tree] = {}
        self.blobs: ObjectStore
        self.manifests: ObjectStore
        self.index: TreeIndex
        self.last_capture: CaptureStats | None = None

    # -- the Substrate hooks ---------------------------------------------------------

    async def start(self, head: int) -> None:
        await trio.to_thread.run_sync(self.open)
        async with self._lock:
            intent = await trio.to_thread.run_sync(self._read_journal)
            if intent is not None:
                reset = self._reset_after(intent)
                if reset is None:
                    log.info("workspace.restore_dropped", target=intent.target, head=intent.head)
                    await trio.to_thread.run_sync(self._clear_journal)
                else:
                    log.warning("workspace.restore_resumed", target=intent.target, reset=reset)
                    await trio.to_thread.run_sync(self._apply, intent, reset)
            tip = self._store.head
            if self._tree_at(tip) is None:
                stats = await trio.to_thread.run_sync(self.capture, tip)
                log.info("workspace.baseline", root=str(self.root), **_fields(stats))

    async def on_generation(self, seq: int) -> None:
        try:
            async with self._lock:
                stats = await trio.to_thread.run_sync(self.capture, seq)
            log.debug("workspace.captured", **_fields(stats))
        except Exception:
            # A failed capture leaves the previous tree as the record: the next
            # checkout will see these changes as unrecorded and ask for force.
            log.exception("workspace.capture_failed", seq=seq)
        finally:
            self._captured = max(self._captured, seq)
            self._capture_done.set()
            self._capture_done = trio.Event()

    async def before_reset(self, target: int, force: bool) -> None:
        await self._wait_captured()
        async with self._lock:
            head = self._store.head
            tip = self._tree_at(head)
            goal = self._tree_at(target)
            intent = _Intent(
                target=target,
                head=head,
                goal=goal[1] if goal else None,
                tip=tip[1] if tip else None,
                backup=None,
            )
            if intent.goal is not None:
                dirty = await trio.to_thread.run_sync(self._dirty, intent.tip)
                if dirty and not force:
                    raise errors.WorkspaceDirty(
                        _dirty_message(dirty, head),
                        {
                            "paths": dirty,
                            "workspace": str(self.root),
                            "head": head,
                            "target": target,
                        },
                    )
                if dirty:
                    intent.backup = await trio.to_thread.run_sync(self._store_current)
                    log.warning("workspace.forced", paths=len(dirty), kept_as_tree_of=head)
            await trio.to_thread.run_sync(self._write_journal, intent)
            self._pending = intent

    async def after_reset(self, target: int, reset_seq: int) -> None:
        async with self._lock:
            intent = self._pending
            self._pending = None
            if intent is None or intent.target != target:  # not prepared by before_reset
                goal = self._tree_at(target)
                tip = self._tree_at(reset_seq - 1)
                intent = _Intent(
                    target=target,
                    head=reset_seq - 1,
                    goal=goal[1] if goal else None,
                    tip=tip[1] if tip else None,
                    backup=None,
                )
            await trio.to_thread.run_sync(self._apply, intent, reset_seq)

    # -- retention -------------------------------------------------------------------

    async def collect(self) -> GcStats:
        """Drop trees no kept seq resolves to, then manifests and blobs nothing kept references.

        Kept: every tree recorded at or above the WAL floor, and the tree
        that each way into the dropped history (floor - 1, a kept reset's
        target below the floor, a coarse snapshot) resolves to.
        """
        async with self._lock:
            store = self._store
            floor = store.floor
            keep = {s for s in self.index.seqs if s >= floor}
            probes = {floor - 1}
            probes.update(t for r, t in store.lineage.resets if r >= floor and t < floor)
            probes.update(s for s in store.snapshots.seqs if s < floor)
            for p in probes:
                found = self._tree_at(p) if p >= 0 else None
                if found is not None:
                    keep.add(found[0])
            stats = await trio.to_thread.run_sync(self._collect, keep)
        if stats.trees or stats.blobs or stats.manifests:
            log.info(
                "workspace.gc",
                trees=stats.trees,
                manifests=stats.manifests,
                blobs=stats.blobs,
                bytes=stats.bytes,
            )
        return stats

    # -- internals (worker threads, under the lock) ----------------------------------

    def open(self) -> None:
        """Create the directories and load the index (worker thread; `start` calls it)."""
        made = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        if made:
            log.info("workspace.created", root=str(self.root))
        self.blobs = ObjectStore(self._state / "blobs")
        self.manifests = ObjectStore(self._state / "manifests")
        self.index = TreeIndex(self._state / "trees")

    def _tree_at(self, seq: int) -> tuple[int, str] | None:
        """The newest recorded tree at or below `seq` on lineage(seq): (its seq, manifest hash)."""
        lineage = self._store.lineage
        seq = min(seq, lineage.head)
        for lo, hi in lineage.iter_intervals(seq):
            found = self.index.newest_in(lo, hi)
            if found is not None:
                digest = self.index.get(found)
                assert digest is not None
                return found, digest
        genesis = self.index.get(0)
        return (0, genesis) if genesis is not None else None

    def tree(self, digest: str) -> Tree:
        """The flat tree of root manifest `digest` (the last few are cached)."""
        return self._manifest(digest)

    def _manifest(self, digest: str) -> Tree:
        tree = self._manifests_cache.get(digest)
        if tree is None:
            tree = load_tree(self.manifests, digest)
            self._remember(digest, tree)
        return tree

    def _remember(self, digest: str, tree: Tree) -> None:
        if digest not in self._manifests_cache and len(self._manifests_cache) >= 4:
            self._manifests_cache.pop(next(iter(self._manifests_cache)))
        self._manifests_cache[digest] = tree

    def _scan(self, store: bool) -> Scan:
        return scan(self.root, self._ignore, self._cache, self.blobs if store else None)

    def capture(self, seq: int) -> CaptureStats:
        """Capture the tree as of `seq` now (worker thread; the hooks hold the lock)."""
        started = time.perf_counter()
        crashpoints.hit("workspace.capture")
        result = self._scan(store=True)
        digest, added = put_tree(self.manifests, result.tree)
        added += result.added_bytes + self.index.set(seq, digest)
        self._remember(digest, result.tree)
        stats = CaptureStats(
            seq, len(result.tree), result.hashed, added, (time.perf_counter() - started) * 1e3
        )
        self.last_capture = stats
        return stats

    def _dirty(self, tip: str | None) -> list[str]:
        recorded = self._manifest(tip) if tip is not None else {}
        return changed_paths(recorded, self._scan(store=False).tree)

    def _store_current(self) -> str:
        result = self._scan(store=True)
        return put_tree(self.manifests, result.tree)[0]

    def _apply(self, intent: _Intent, reset_seq: int) -> None:
        """Restore intent.goal, then record the trees; idempotent (a restart redoes it)."""
        started = time.perf_counter()
        crashpoints.hit("workspace.before_restore")
        written = deleted = 0
        if intent.goal is not None:
            current = self._scan(store=False)
            written, deleted, skipped = restore_tree(
                self.root, self._ignore, current, self._manifest(intent.goal), self.blobs
            )
            if skipped:
                log.error(
                    "workspace.restore_skipped",
                    paths=skipped[:SHOWN_PATHS],
                    count=len(skipped),
                    reason="a directory, symlink or ignored path not recorded is in the way",
                )
        crashpoints.hit("workspace.after_restore")
        if intent.backup is not None:
            self.index.set(intent.head, intent.backup)
        recorded = intent.goal if intent.goal is not None else intent.tip
        if recorded is not None:
            self.index.set(reset_seq, recorded)
        self._clear_journal()
        log.info(
            "workspace.restored",
            target=intent.target,
            reset=reset_seq,
            written=written,
            deleted=deleted,
            forced=intent.backup is not None,
            duration_ms=round((time.perf_counter() - started) * 1e3, 3),
        )

    def _reset_after(self, intent: _Intent) -> int | None:
        """The reset record the journal was written for, if it became durable."""
        for r, t in self._store.lineage.resets:
            if r > intent.head:
                return r if t == intent.target else None
        return None

    def _read_journal(self) -> _Intent | None:
        try:
            return msgspec.json.decode(self._journal.read_bytes(), type=_Intent)
        except FileNotFoundError:
            return None

    def _write_journal(self, intent: _Intent) -> None:
        atomic_write(self._journal, msgspec.json.encode(intent))

    def _clear_journal(self) -> None:
        try:
            os.unlink(self._journal)
        except FileNotFoundError:
            return
        fsync_dir(self._journal.parent)

    def _collect(self, keep: set[int]) -> GcStats:
        drop = {s for s in self.index.seqs if s not in keep}
        self.index.remove(drop)  # first: a tree never names a missing manifest
        roots = {d for _, d in self.index.items()}
        pending = self._pending or self._read_journal()
        if pending is not None:
            roots.update(d for d in (pending.goal, pending.tip, pending.backup) if d)
        kept_manifests, referenced = reachable(self.manifests, roots)
        manifests = size = 0
        for digest in list(self.manifests):
            if digest not in kept_manifests:
                size += self.manifests.remove(digest)
                self._manifests_cache.pop(digest, None)
                manifests += 1
        self.manifests.sync()
        gone: set[str] = set()
        for digest in list(self.blobs):
            if digest not in referenced:
                size += self.blobs.remove(digest)
                gone.add(digest)
        self.blobs.sync()
        for entry in self._cache.values():
            if entry.digest in gone:
                entry.stored = False
        return GcStats(len(drop), manifests, len(gone), size)

    async def _wait_captured(self) -> None:
        """Wait until every generation committed so far is captured (the tip's tree is current)."""
        while True:
            newest = next(self._store.catalog.newest_first(), None)
            if newest is None or newest.seq <= self._open_head or newest.seq <= self._captured:
                return
            await self._capture_done.wait()


def _fields(stats: CaptureStats) -> dict[str, object]:
    return {
        "seq": stats.seq,
        "files": stats.files,
        "hashed": stats.hashed,
        "bytes_added": stats.bytes_added,
        "duration_ms": round(stats.duration_ms, 3),
    }


def _dirty_message(paths: list[str], head: int) -> str:
    shown = ", ".join(paths[:SHOWN_PATHS])
    more = f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else ""
    return (
        f"the workspace has {len(paths)} change(s) reynd did not record: {shown}{more}. "
        "Save them elsewhere, or retry the checkout with force=true to restore anyway: "
        f"what it overwrites is kept as the tree of seq {head}, and `checkout {head}` "
        "brings it back"
    )

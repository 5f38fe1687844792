"""Workspace rewind and retention: pin the trees a new floor needs, collect the rest.

`Retention.pin(points)` runs before a collection drops WAL segments: a seq
leading into the dropped history whose tree needs file records below the
new floor gets a tree of its own. `Retention.collect()` runs after it:
trees no kept seq needs go, then what nothing kept names.

Order on disk: `trees/` entries first, then manifests, then blobs, so a
crash in between leaves only unreferenced objects, collected next time.
What stays: every kept tree and what it references; the blobs named by
the `workspace.files` records still in the WAL; the tree reynd holds for
the workspace now (its stored directories and its files); a restore in
progress (the journal's trees); trees of boundaries not indexed yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import trio

from reynd.protocol.events import WorkspaceFiles
from reynd.workspace import journal
from reynd.workspace.blobs import ObjectStore, TreeIndex
from reynd.workspace.core import WorkspaceCore, log
from reynd.workspace.history import TreePlan
from reynd.workspace.model import Dir, flat
from reynd.workspace.tree import reachable, store_dir

__all__ = ["Collected", "GcStats", "Retention", "collect_unreferenced", "stored_dirs"]


@dataclass(frozen=True, slots=True)
class Collected:
    trees: int
    manifests_gone: set[str]
    blobs_gone: set[str]
    bytes: int


def stored_dirs(root: Dir) -> set[str]:
    """The digests of the topmost directories of `root` that are stored manifests."""
    out: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.digest is not None:
            out.add(node.digest)
            continue
        stack.extend(v for v in node.entries.values() if isinstance(v, Dir))
    return out


def collect_unreferenced(
    index: TreeIndex,
    manifests: ObjectStore,
    blobs: ObjectStore,
    *,
    keep: set[int],
    roots: Iterable[str],
    model: Dir,
    records: Iterable[WorkspaceFiles],
    journal_path: Path,
) -> Collected:
    """Drop the trees of seqs not in `keep`, then every object no kept thing references."""
    drop = {s for s in index.seqs if s not in keep}
    index.remove(drop)  # first: a tree never names a missing manifest
    kept_roots = {d for _, d in index.items()} | set(roots) | stored_dirs(model)
    pending = journal.read(journal_path)
    if pending is not None:
        kept_roots.update(d for d in (pending.goal, pending.tip, pending.backup) if d)
    kept_manifests, referenced = reachable(manifests, kept_roots)
    referenced.update(op.ref for r in records for op in r.ops if op.kind == "f")
    referenced.update(item.ref for item in flat(model).values() if item.kind == "f")
    manifests_gone, size = _sweep(manifests, kept_manifests)
    blobs_gone, blob_bytes = _sweep(blobs, referenced)
    return Collected(len(drop), manifests_gone, blobs_gone, size + blob_bytes)


def _sweep(objects: ObjectStore, keep: set[str]) -> tuple[set[str], int]:
    """Delete every object not in `keep` (durably); (their digests, their bytes)."""
    gone: set[str] = set()
    size = 0
    for digest in list(objects):
        if digest not in keep:
            size += objects.remove(digest)
            gone.add(digest)
    objects.sync()
    return gone, size


@dataclass(frozen=True, slots=True)
class GcStats:
    trees: int
    manifests: int
    blobs: int
    bytes: int


class Retention(WorkspaceCore):
    """The workspace's part in a collection (reynd/daemon/retention_api.py)."""

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

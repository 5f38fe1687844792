"""The workspace as of any seq: tree(N) = the nearest recorded tree at or below N on N's
lineage, with the WAL's file records between it and N applied in seq order.

`plan` only looks at in-memory indexes (the event loop's thread); `execute`
reads manifests and records (a worker thread).
"""

from __future__ import annotations

from dataclasses import dataclass

from reynd.protocol.events import WorkspaceFiles
from reynd.storage.store import Store
from reynd.workspace.blobs import ObjectStore, TreeIndex
from reynd.workspace.model import Dir, apply, from_ops
from reynd.workspace.tree import load_dir

__all__ = ["History", "TreePlan"]


@dataclass(frozen=True, slots=True)
class TreePlan:
    seq: int
    base: int  # the recorded tree it starts from (a seq with trees/<base>)
    digest: str  # that tree's root manifest
    records: tuple[int, ...]  # seqs of the workspace.files records to apply, ascending


class History:
    def __init__(self, store: Store, index: TreeIndex, manifests: ObjectStore) -> None:
        self._store = store
        self._index = index
        self._manifests = manifests
        self._loaded: dict[str, Dir] = {}  # a few root trees, by digest

    def base(self, seq: int) -> tuple[int, str] | None:
        """The newest recorded tree at or below `seq` on lineage(seq): (its seq, digest)."""
        lineage = self._store.lineage
        seq = min(seq, lineage.head)
        for lo, hi in lineage.iter_intervals(seq):
            found = self._index.newest_in(lo, hi)
            if found is not None:
                digest = self._index.get(found)
                assert digest is not None
                return found, digest
        genesis = self._index.get(0)
        return (0, genesis) if genesis is not None else None

    def plan(self, seq: int) -> TreePlan | None:
        """How to build tree(seq); None when no tree was recorded at or below it (rewind was
        off then)."""
        found = self.base(seq)
        if found is None:
            return None
        base, digest = found
        spans: list[tuple[int, int]] = []
        for lo, hi in self._store.lineage.iter_intervals(min(seq, self._store.head)):
            if hi <= base:
                break
            spans.append((max(lo, base + 1), hi))
        records: list[int] = []
        for lo, hi in reversed(spans):
            records.extend(self._store.file_ops.between(lo, hi))
        return TreePlan(seq, base, digest, tuple(records))

    def execute(self, plan: TreePlan) -> Dir:
        """tree(plan.seq) (worker thread)."""
        root = self.load(plan.digest)
        for event in self.records(plan.records):
            root = apply(root, from_ops(event.ops))
        return root

    def records(self, seqs: tuple[int, ...]) -> list[WorkspaceFiles]:
        """The workspace.files records at `seqs` (worker thread)."""
        out: list[WorkspaceFiles] = []
        wal = self._store.wal
        for seq in seqs:
            for event in wal.read(seq, seq):
                assert isinstance(event, WorkspaceFiles), event
                out.append(event)
        return out

    def load(self, digest: str) -> Dir:
        """The tree of root manifest `digest` (the last few are kept)."""
        root = self._loaded.get(digest)
        if root is None:
            root = load_dir(self._manifests, digest)
            if len(self._loaded) >= 4:
                self._loaded.pop(next(iter(self._loaded)))
            self._loaded[digest] = root
        return root

    def forget(self, digests: set[str]) -> None:
        """Manifests that retention deleted: never hand out a tree loaded from them."""
        for d in digests & self._loaded.keys():
            del self._loaded[d]

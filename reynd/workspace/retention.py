"""Collecting the workspace store: trees no kept seq needs, then what nothing kept names.

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

from reynd.protocol.events import WorkspaceFiles
from reynd.workspace import journal
from reynd.workspace.blobs import ObjectStore, TreeIndex
from reynd.workspace.model import Dir, flat
from reynd.workspace.tree import reachable

__all__ = ["Collected", "collect_unreferenced", "stored_dirs"]


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

"""What changed in the workspace since the tree reynd holds for it: look only where told.

`observe` turns a `Dirty` (from the watcher) into changes against the model:
each dirty path is looked at (lstat, and the file read when it is one), each
dirty directory is walked and compared with what the model has below it.
`full` scans everything (the stat cache spares unchanged files). File
contents are stored as blobs as they are read; the caller syncs the store
before it records anything that names them.
"""

from __future__ import annotations

from pathlib import Path

from reynd.workspace.model import Dir, Item, changed, diff, flat, under
from reynd.workspace.tree import TMP_PREFIX, Hasher, Ignore, look, scan, walk
from reynd.workspace.watch import Dirty

__all__ = ["observe"]


def observe(
    root: Path, ignore: Ignore, dirty: Dirty, model: Dir, hasher: Hasher
) -> dict[str, Item | None]:
    """The changes that make `model` what the dirty paths hold now."""
    if dirty.full:
        now = scan(root, ignore, hasher.cache, hasher.objects)
        hasher.hashed += now.hashed
        hasher.added += now.added_bytes
        return changed(flat(model), now.tree)
    seen: dict[str, Item | None] = {}
    for d in sorted(dirty.dirs):
        for path in under(model, d):
            seen.setdefault(path, None)
        for rel, s, link in walk(root, ignore, d):
            if not rel.rsplit("/", 1)[-1].startswith(TMP_PREFIX):
                seen[rel] = hasher.item(rel, s, link, trust_cache=False)
    for path in dirty.paths - seen.keys():
        seen[path] = look(hasher, ignore, path)
    return diff(model, seen)

"""Workspace trees as immutable nested directories, and their manifests (pure: no I/O).

A `Dir` maps names to `Item`s (regular files and symlinks) and to `Dir`s.
A Dir is never changed once built: `apply` returns a new root that shares
every directory off the paths it changed (path copying), so the trees as of
two records share all but the directories on the way to what changed.

A Dir's manifest (one JSON object per directory, names sorted, as in git) is
named by its sha256. `encode` computes the manifests of the directories that
have none yet; once they are stored, `remember` keeps their digests in the
nodes, so encoding the next tree costs only the directories it changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping

import msgspec

from reynd.protocol.events import FileOp

__all__ = [
    "EMPTY",
    "KEPT_MODE",
    "MANIFEST_VERSION",
    "Changes",
    "Dir",
    "Encoded",
    "Item",
    "Manifest",
    "Tree",
    "apply",
    "changed",
    "clean_name",
    "diff",
    "encode",
    "flat",
    "from_ops",
    "get",
    "remember",
    "to_ops",
    "under",
]

MANIFEST_VERSION = 1
# The mode bits a file keeps across a restore: permissions and sticky, never setuid or
# setgid. Owners are not kept (a restore writes new files as the daemon's user), so a
# user's setuid file restored by a root daemon would be a root setuid file (git keeps
# less still: 644 or 755).
KEPT_MODE = 0o1777


class Item(msgspec.Struct, array_like=True, frozen=True):
    """A regular file (`ref` = blob hash), a symlink (`ref` = its target), or in a manifest
    a subdirectory (`d`, `ref` = its manifest)."""

    kind: str  # "f" | "l" | "d"
    mode: int  # permission bits (files); 0 otherwise
    ref: str
    size: int


Tree = dict[str, Item]  # flat: relative path -> file or link
Changes = Mapping[str, Item | None]  # path -> what it became (None: gone)


class Manifest(msgspec.Struct, frozen=True):
    """One directory: name -> Item, where kind "d" is a subdirectory (`ref` = its manifest)."""

    v: int
    entries: dict[str, Item]


class Dir:
    """One directory of a tree; `digest` is its manifest's hash once known (and stored)."""

    __slots__ = ("digest", "entries")

    def __init__(self, entries: dict[str, Item | Dir], digest: str | None = None) -> None:
        self.entries = entries
        self.digest = digest


EMPTY = Dir({})

Encoded = list[tuple[Dir, str, bytes]]  # (node, manifest digest, manifest bytes)


def clean_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def get(root: Dir, path: str) -> Item | None:
    """The file or link at `path`, if any."""
    node = root
    *dirs, name = path.split("/")
    for d in dirs:
        child = node.entries.get(d)
        if not isinstance(child, Dir):
            return None
        node = child
    found = node.entries.get(name)
    return found if isinstance(found, Item) else None


def apply(root: Dir, changes: Changes) -> Dir:
    """The tree `root` with `changes` made; `root` itself is left as it was.

    A file set where a directory was replaces that directory with all it
    holds; a path set below a file replaces the file with a directory; a
    directory left empty disappears (trees hold no empty directory).
    """
    if not changes:
        return root
    return _apply(root, changes) or EMPTY


def _apply(node: Dir | None, changes: Changes) -> Dir | None:
    entries: dict[str, Item | Dir] = dict(node.entries) if node is not None else {}
    direct: dict[str, Item | None] = {}
    below: dict[str, dict[str, Item | None]] = {}
    for path, item in changes.items():
        head, sep, rest = path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = item
        else:
            direct[head] = item
    for name, sub in below.items():
        child = entries.get(name)
        new = _apply(child if isinstance(child, Dir) else None, sub)
        if new is not None:
            entries[name] = new
        elif isinstance(child, Dir):
            del entries[name]
    for name, item in direct.items():
        if item is not None:
            entries[name] = item
        elif isinstance(entries.get(name), Item):
            del entries[name]
    return Dir(entries) if entries else None


def flat(root: Dir, prefix: str = "") -> Tree:
    """Every file and link of `root`, by path (each prefixed with `prefix`)."""
    return dict(_walk(root, prefix))


def _walk(root: Dir, prefix: str) -> Iterator[tuple[str, Item]]:
    stack = [(prefix, root)]
    while stack:
        at, node = stack.pop()
        for name, value in node.entries.items():
            if isinstance(value, Dir):
                stack.append((f"{at}{name}/", value))
            else:
                yield f"{at}{name}", value


def under(root: Dir, path: str) -> Tree:
    """The files and links at or below `path` (a directory or a file), by full path."""
    node: Item | Dir = root
    for part in path.split("/"):
        if not isinstance(node, Dir) or part not in node.entries:
            return {}
        node = node.entries[part]
    if isinstance(node, Item):
        return {path: node}
    return flat(node, f"{path}/")


def diff(root: Dir, observed: Changes) -> dict[str, Item | None]:
    """The entries of `observed` that differ from `root`."""
    return {p: item for p, item in observed.items() if get(root, p) != item}


def changed(before: Tree, after: Tree) -> dict[str, Item | None]:
    """What turns `before` into `after`: every path that differs, with its new value."""
    return {p: after.get(p) for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def encode(root: Dir) -> tuple[str, Encoded]:
    """The root's manifest digest, and the manifests of the directories with no digest yet.

    Children come before their parents in the list. Nothing is kept in the
    nodes: call `remember` once the manifests are stored.
    """
    out: Encoded = []

    def enc(node: Dir) -> str:
        if node.digest is not None:
            return node.digest
        entries: dict[str, Item] = {}
        for name in sorted(node.entries):
            value = node.entries[name]
            entries[name] = Item("d", 0, enc(value), 0) if isinstance(value, Dir) else value
        data = msgspec.json.encode(Manifest(MANIFEST_VERSION, entries))
        digest = hashlib.sha256(data).hexdigest()
        out.append((node, digest, data))
        return digest

    return enc(root), out


def remember(encoded: Encoded) -> None:
    """Keep the digests of stored manifests in their nodes (they never change)."""
    for node, digest, _ in encoded:
        node.digest = digest


def to_ops(changes: Changes) -> list[FileOp]:
    """The WAL's form of `changes`, sorted by path."""
    out = []
    for path in sorted(changes):
        item = changes[path]
        if item is None:
            out.append(FileOp(path, "-", 0, "", 0))
        else:
            out.append(
                FileOp(path, "l" if item.kind == "l" else "f", item.mode, item.ref, item.size)
            )
    return out


def from_ops(ops: Iterable[FileOp]) -> dict[str, Item | None]:
    """The changes that the WAL's `ops` record, later ops of a path winning."""
    return {
        op.path: None if op.kind == "-" else Item(op.kind, op.mode, op.ref, op.size) for op in ops
    }

"""Workspace trees: scanning (with a stat cache), manifests, diffs and the per-file restore."""

from __future__ import annotations

import errno
import fnmatch
import os
import stat as st
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from reynd.storage import crashpoints, fsops
from reynd.storage.fsutil import fsync_dir, write_all
from reynd.workspace.blobs import CHUNK, ObjectStore, hash_file
from reynd.workspace.config import ALWAYS_IGNORED

__all__ = [
    "TMP_PREFIX",
    "CacheEntry",
    "Ignore",
    "Item",
    "Scan",
    "Tree",
    "changed_paths",
    "load_tree",
    "put_tree",
    "reachable",
    "restore_tree",
    "scan",
]

TMP_PREFIX = ".reynd-tmp-"  # a restore's tmp file; a crash may leave one
MANIFEST_VERSION = 1
# A cached hash is trusted only for files whose mtime lies this far before the
# scan that hashed them: a write in the same timestamp tick must not be missed.
RACY_NS = 100_000_000


class Item(msgspec.Struct, array_like=True, frozen=True):
    """One path of a tree: a regular file (`ref` = blob hash) or a symlink (`ref` = its target)."""

    kind: str  # "f" | "l"
    mode: int  # permission bits (files); 0 for links
    ref: str
    size: int


Tree = dict[str, Item]


class _Manifest(msgspec.Struct, frozen=True):
    """One directory: name -> Item, where kind "d" is a subdirectory (`ref` = its manifest)."""

    v: int
    entries: dict[str, Item]


def _clean_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def put_tree(objects: ObjectStore, tree: Tree) -> tuple[str, int]:
    """Store `tree` as one manifest per directory (git-like); (root hash, bytes added).

    Manifests are deterministic (names sorted), so an unchanged directory
    has the same hash in every generation and is stored once: a generation
    adds the manifests of the directories on the paths to what changed.
    """
    root: dict[str, object] = {}
    for path, item in tree.items():
        node = root
        *dirs, name = path.split("/")
        for d in dirs:
            child = node.setdefault(d, {})
            assert isinstance(child, dict)
            node = child
        node[name] = item
    added = 0

    def store(node: dict[str, object]) -> str:
        nonlocal added
        entries: dict[str, Item] = {}
        for name in sorted(node):
            value = node[name]
            if isinstance(value, dict):
                entries[name] = Item("d", 0, store(value), 0)
            else:
                assert isinstance(value, Item)
                entries[name] = value
        digest, n = objects.put_bytes(msgspec.json.encode(_Manifest(MANIFEST_VERSION, entries)))
        added += n
        return digest

    digest = store(root)
    objects.sync()
    return digest, added


def _read_dir(objects: ObjectStore, digest: str) -> dict[str, Item]:
    m = msgspec.json.decode(objects.read(digest), type=_Manifest)
    if m.v != MANIFEST_VERSION:
        raise ValueError(f"manifest {digest}: version {m.v} is not {MANIFEST_VERSION}")
    for name, item in m.entries.items():
        if not _clean_name(name) or item.kind not in ("f", "l", "d"):
            raise ValueError(f"manifest {digest}: bad entry {name!r}")
    return m.entries


def load_tree(objects: ObjectStore, digest: str) -> Tree:
    """The flat tree (path -> file or link) of the root manifest `digest`."""
    out: Tree = {}
    stack = [("", digest)]
    while stack:
        prefix, d = stack.pop()
        for name, item in _read_dir(objects, d).items():
            if item.kind == "d":
                stack.append((f"{prefix}{name}/", item.ref))
            else:
                out[f"{prefix}{name}"] = item
    return out


def reachable(objects: ObjectStore, roots: Iterable[str]) -> tuple[set[str], set[str]]:
    """(manifests, blobs) referenced from the root manifests `roots`; shared subtrees read once."""
    manifests: set[str] = set()
    blobs: set[str] = set()
    stack = list(roots)
    while stack:
        d = stack.pop()
        if d in manifests:
            continue
        manifests.add(d)
        for item in _read_dir(objects, d).values():
            if item.kind == "d":
                stack.append(item.ref)
            elif item.kind == "f":
                blobs.add(item.ref)
    return manifests, blobs


class Ignore:
    """What the workspace code never reads, writes or deletes."""

    def __init__(self, patterns: Iterable[str], excluded: Iterable[str] = ()) -> None:
        self._names: list[tuple[str, bool]] = []
        self._paths: list[tuple[str, bool]] = []
        for raw in patterns:
            dir_only = raw.endswith("/")
            pat = raw.strip("/")
            if not pat:
                continue
            (self._paths if "/" in pat else self._names).append((pat, dir_only))
        self._excluded = {e for e in excluded if e}  # e.g. the state directory, relative

    def __call__(self, rel: str, is_dir: bool) -> bool:
        name = rel.rsplit("/", 1)[-1]
        if name in ALWAYS_IGNORED or rel in self._excluded:
            return True
        for pat, dir_only in self._names:
            if (is_dir or not dir_only) and fnmatch.fnmatchcase(name, pat):
                return True
        for pat, dir_only in self._paths:
            if (is_dir or not dir_only) and fnmatch.fnmatchcase(rel, pat):
                return True
        return False

    def covers(self, rel: str) -> bool:
        """True when `rel` or one of its parent directories is ignored."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self("/".join(parts[:i]), True):
                return True
        return self(rel, False)


@dataclass(slots=True)
class CacheEntry:
    size: int
    mtime_ns: int
    ino: int
    digest: str
    stored: bool  # the blob is known to be in the store


@dataclass(slots=True)
class Scan:
    tree: Tree
    hashed: int = 0  # files read (cache misses)
    added_bytes: int = 0  # blob bytes newly stored
    leftovers: list[str] = field(default_factory=list)  # stale TMP_PREFIX files


def _walk(root: Path, ignore: Ignore) -> Iterable[tuple[str, os.stat_result, str | None]]:
    """(rel path, lstat, link target) of every regular file and symlink not ignored."""
    stack = [("", root)]
    while stack:
        prefix, d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except FileNotFoundError:
            continue
        for e in entries:
            rel = f"{prefix}{e.name}"
            try:
                s = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if st.S_ISDIR(s.st_mode):
                if not ignore(rel, True):
                    stack.append((rel + "/", Path(e.path)))
            elif st.S_ISREG(s.st_mode):
                if not ignore(rel, False):
                    yield rel, s, None
            elif st.S_ISLNK(s.st_mode) and not ignore(rel, False):
                yield rel, s, os.readlink(e.path)
            # sockets, fifos, devices: not workspace content


def scan(
    root: Path,
    ignore: Ignore,
    cache: dict[str, CacheEntry],
    objects: ObjectStore | None = None,
) -> Scan:
    """The workspace tree now. With `objects`, every file's content is stored as a blob.

    A file whose (size, mtime_ns, inode) match the cache keeps its cached hash
    (and is not read) unless its mtime is too close to the scan that cached it.
    """
    started = time.time_ns()
    out = Scan({})
    seen: set[str] = set()
    for rel, s, link in _walk(root, ignore):
        name = rel.rsplit("/", 1)[-1]
        if name.startswith(TMP_PREFIX):
            out.leftovers.append(rel)
            continue
        seen.add(rel)
        if link is not None:
            out.tree[rel] = Item("l", 0, link, 0)
            continue
        mode = st.S_IMODE(s.st_mode)
        hit = cache.get(rel)
        if (
            hit is not None
            and (hit.size, hit.mtime_ns, hit.ino) == (s.st_size, s.st_mtime_ns, s.st_ino)
            and (objects is None or hit.stored)
        ):
            out.tree[rel] = Item("f", mode, hit.digest, s.st_size)
            continue
        path = root / rel
        try:
            # Read once to hash; copy in only content the store does not have yet.
            digest, size = hash_file(path)
            added = 0
            if objects is not None and not objects.has(digest):
                digest, size, added = objects.put_file(path)
        except FileNotFoundError:
            seen.discard(rel)
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a symlink under us
                seen.discard(rel)
                continue
            raise
        out.hashed += 1
        out.added_bytes += added
        out.tree[rel] = Item("f", mode, digest, size)
        if s.st_mtime_ns < started - RACY_NS and size == s.st_size:
            cache[rel] = CacheEntry(s.st_size, s.st_mtime_ns, s.st_ino, digest, objects is not None)
        else:
            cache.pop(rel, None)
    for gone in cache.keys() - seen:
        del cache[gone]
    if objects is not None:
        objects.sync()
    return out


def changed_paths(recorded: Tree, now: Tree) -> list[str]:
    """Paths created, deleted or changed (content, mode, kind) between two trees, sorted."""
    return sorted(p for p in recorded.keys() | now.keys() if recorded.get(p) != now.get(p))


def _dirs_of(tree: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for p in tree:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            out.add("/".join(parts[:i]))
    return out


def restore_tree(
    root: Path, ignore: Ignore, current: Scan, target: Tree, objects: ObjectStore
) -> tuple[int, int, list[str]]:
    """Make the workspace equal `target`, one atomic rename (or unlink) per file.

    Paths that `ignore` covers are never touched. Directories are created as
    needed; a directory left empty by a deletion is removed unless the target
    needs it. Returns (files written, files deleted, paths skipped because
    something not reynd's is in the way).
    """
    now = current.tree
    skipped: list[str] = []
    touched: set[Path] = set()
    deleted = written = 0
    needed_dirs = _dirs_of(target)
    for rel in current.leftovers:
        if _unlink(root / rel):
            touched.add((root / rel).parent)
    # 1. deletions, deepest first
    emptied: set[str] = set()
    gone = (p for p in now if p not in target or now[p].kind != target[p].kind)
    for rel in sorted(gone, reverse=True):
        if ignore.covers(rel):
            continue
        crashpoints.hit("workspace.restore.file")
        if _unlink(root / rel):
            deleted += 1
            touched.add((root / rel).parent)
            emptied.update(_dirs_of([rel]))
    for d in sorted(emptied - needed_dirs, key=lambda p: -p.count("/")):
        try:
            os.rmdir(root / d)
        except OSError:
            continue  # not empty (ignored or unrecorded content): left alone
        touched.add((root / d).parent)
    # 2. writes
    for rel, item in sorted(target.items()):
        if now.get(rel) == item or ignore.covers(rel):
            continue
        path = root / rel
        if not _make_parents(root, rel, touched):
            skipped.append(rel)
            continue
        crashpoints.hit("workspace.restore.file")
        tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
        _unlink(tmp)
        if item.kind == "l":
            os.symlink(item.ref, tmp)
        else:
            _write_blob(objects, item, tmp)
        try:
            fsops.replace(tmp, path)
        except IsADirectoryError:
            _unlink(tmp)
            skipped.append(rel)
            continue
        written += 1
        touched.add(path.parent)
    for parent in sorted(touched):
        if parent.is_dir():
            fsync_dir(parent)
    return written, deleted, skipped


def _unlink(path: Path) -> bool:
    try:
        if st.S_ISDIR(os.lstat(path).st_mode):
            return False
        fsops.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _make_parents(root: Path, rel: str, touched: set[Path]) -> bool:
    """Create the directories above `rel`; False when a non-directory is in the way."""
    cur = root
    for part in rel.split("/")[:-1]:
        cur = cur / part
        try:
            s = os.lstat(cur)
        except FileNotFoundError:
            fsops.mkdir(cur)
            touched.add(cur.parent)
            continue
        if not st.S_ISDIR(s.st_mode):  # a symlink or file: never write through it
            return False
    return True


def _write_blob(objects: ObjectStore, item: Item, tmp: Path) -> None:
    src = os.open(objects.path(item.ref), os.O_RDONLY | os.O_CLOEXEC)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = fsops.open(tmp, flags, 0o600)
        try:
            while chunk := os.read(src, CHUNK):
                write_all(fd, chunk)
            os.fchmod(fd, item.mode)
            fsops.fsync(fd)
        finally:
            fsops.close(fd)
    finally:
        os.close(src)

"""Workspace trees on disk: scanning (with a stat cache), stored manifests.

Restoring a tree onto the workspace is in restore.py, its preflight in preflight.py.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat as st
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from reynd.workspace.blobs import ObjectStore, hash_file, is_digest
from reynd.workspace.config import ALWAYS_IGNORED
from reynd.workspace.model import (
    KEPT_MODE,
    MANIFEST_VERSION,
    Dir,
    Item,
    Manifest,
    Tree,
    clean_name,
    encode,
    remember,
)

__all__ = [
    "DIR_FLAGS",
    "FILE_FLAGS",
    "MAX_DEPTH",
    "TMP_PREFIX",
    "CacheEntry",
    "Hasher",
    "Ignore",
    "RootUnusable",
    "Scan",
    "changed_paths",
    "load_dir",
    "look",
    "open_dir",
    "open_file",
    "open_file_at",
    "reachable",
    "root_ident",
    "scan",
    "store_dir",
    "walk",
]

# A restore's tmp file (dirs.tmp_name: the prefix and 16 hex digits; before issue 22,
# the prefix and the name of the file it became); a crash may leave either.
TMP_PREFIX = ".reynd-tmp-"
# A cached hash is trusted only for files whose mtime lies this far before the
# scan that hashed them: a write in the same timestamp tick must not be missed.
RACY_NS = 100_000_000
# Directories deeper than this are not workspace content (nor are names that
# are not UTF-8, which no manifest or record could hold).
MAX_DEPTH = 200


def store_dir(objects: ObjectStore, root: Dir) -> tuple[str, int]:
    """Store the manifests of `root` that are not stored yet; (root digest, bytes added).

    Only the directories changed since the tree they were derived from are
    encoded and written: the others carry the digest of a stored manifest.
    """
    digest, encoded = encode(root)
    added = 0
    for _, d, data in encoded:
        added += objects.put_bytes(data, d)[1]
    objects.sync()
    remember(encoded)
    return digest, added


def _read_dir(objects: ObjectStore, digest: str) -> dict[str, Item]:
    m = msgspec.json.decode(objects.read(digest), type=Manifest)
    if m.v != MANIFEST_VERSION:
        raise ValueError(f"manifest {digest}: version {m.v} is not {MANIFEST_VERSION}")
    for name, item in m.entries.items():
        bad_ref = item.kind in ("f", "d") and not is_digest(item.ref)
        if not clean_name(name) or item.kind not in ("f", "l", "d") or bad_ref:
            raise ValueError(f"manifest {digest}: bad entry {name!r}")
    return m.entries


def load_dir(objects: ObjectStore, digest: str) -> Dir:
    """The tree of root manifest `digest`, each directory knowing its digest."""
    entries: dict[str, Item | Dir] = {}
    for name, item in _read_dir(objects, digest).items():
        entries[name] = load_dir(objects, item.ref) if item.kind == "d" else item
    return Dir(entries, digest)


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


def _usable(name: str) -> bool:
    """A name a manifest and a WAL record can hold (UTF-8)."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)  # not there, or not a real directory


class RootUnusable(OSError):
    """The workspace root itself is missing or not a real directory (a symlink put there).

    Never read as an empty workspace: that would record every file deleted.
    Whoever looks at the workspace fails instead, and nothing is recorded.
    """


def open_dir(root: Path, rel: str) -> int | None:
    """A descriptor of directory `rel` below `root`, each component opened O_NOFOLLOW.

    None when a component is missing or is not a real directory: a path is
    never resolved through a symlink, whatever changes meanwhile. The root
    itself not being one raises RootUnusable.
    """
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        if exc.errno in _GONE:
            raise RootUnusable(exc.errno, os.strerror(exc.errno), str(root)) from exc
        raise
    for part in rel.split("/") if rel else ():
        try:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _GONE:
                return None
            raise
        os.close(fd)
        fd = nxt
    return fd


def root_ident(root: Path) -> tuple[int, int]:
    """(st_dev, st_ino) of the directory at `root` now; RootUnusable when there is none."""
    fd = open_dir(root, "")
    assert fd is not None  # the root's own failures raise
    try:
        s = os.fstat(fd)
    finally:
        os.close(fd)
    return s.st_dev, s.st_ino


def open_file(root: Path, rel: str) -> int | None:
    """A read descriptor of the regular file at `rel` (None: none there now), as open_dir."""
    parent, _, name = rel.rpartition("/")
    dir_fd = open_dir(root, parent)
    if dir_fd is None:
        return None
    try:
        return open_file_at(dir_fd, name)
    finally:
        os.close(dir_fd)


def open_file_at(dir_fd: int, name: str) -> int | None:
    """A read descriptor of the regular file `name` in open directory `dir_fd`, O_NOFOLLOW."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise
    if not st.S_ISREG(os.fstat(fd).st_mode):  # became a fifo, a device... under us
        os.close(fd)
        return None
    return fd


def walk(
    root: Path, ignore: Ignore, under: str = ""
) -> Iterator[tuple[str, os.stat_result, str | None]]:
    """(rel path, lstat, link target) of every regular file and symlink not ignored.

    `under`: only what lies below that directory (relative to root; nothing
    when it is not a real directory now). Symlinks are never followed: each
    directory is opened from the root one component at a time, O_NOFOLLOW
    (`open_dir`), and read through that descriptor. One directory is open at
    a time, whatever the depth: a deep tree cannot run the daemon out of
    descriptors.
    """
    for rel, s, link, _ in _walk_fds(root, ignore, under):
        yield rel, s, link


def _walk_fds(
    root: Path, ignore: Ignore, under: str = ""
) -> Iterator[tuple[str, os.stat_result, str | None, int]]:
    """As `walk`, with the descriptor of the directory each entry was read from."""
    stack = [under]
    while stack:
        d = stack.pop()
        fd = open_dir(root, d)
        if fd is None:
            continue  # gone, or swapped for a symlink or file since it was listed
        try:
            for rel, s, link in _walk_at(fd, f"{d}/" if d else "", ignore, stack):
                yield rel, s, link, fd
        finally:
            os.close(fd)


def _walk_at(
    fd: int, prefix: str, ignore: Ignore, stack: list[str]
) -> Iterator[tuple[str, os.stat_result, str | None]]:
    with os.scandir(fd) as it:
        entries = list(it)
    for e in entries:
        if not _usable(e.name):
            continue
        rel = f"{prefix}{e.name}"
        try:
            s = os.stat(e.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if st.S_ISDIR(s.st_mode):
            if not ignore(rel, True) and rel.count("/") < MAX_DEPTH:
                stack.append(rel)
        elif st.S_ISREG(s.st_mode):
            if not ignore(rel, False):
                yield rel, s, None
        elif st.S_ISLNK(s.st_mode) and not ignore(rel, False):
            try:
                yield rel, s, os.readlink(e.name, dir_fd=fd)
            except OSError:
                continue  # gone, or no longer a link
        # sockets, fifos, devices: not workspace content


class Hasher:
    """Turns what `lstat` says about a path into an Item, reading files only when needed.

    A file whose (size, mtime_ns, inode) match the cache keeps its cached
    hash (and is not read) unless `trust_cache` is off or its mtime was too
    close to the read that cached it. With `objects`, content the store does
    not hold yet is copied in (the caller syncs the store).
    """

    def __init__(
        self, root: Path, cache: dict[str, CacheEntry], objects: ObjectStore | None
    ) -> None:
        self.root = root
        self.cache = cache
        self.objects = objects
        self.started = time.time_ns()
        self.hashed = 0
        self.added = 0

    def item(
        self,
        rel: str,
        s: os.stat_result,
        link: str | None,
        trust_cache: bool = True,
        dir_fd: int | None = None,
    ) -> Item | None:
        """The Item for `rel` (None: gone, or not a regular file now).

        `dir_fd`: the open directory `rel` was listed in (the file is opened
        relative to it); else the path is opened from the root, as open_dir.
        """
        if link is not None:
            return Item("l", 0, link, 0)
        mode = st.S_IMODE(s.st_mode) & KEPT_MODE
        hit = self.cache.get(rel)
        if (
            trust_cache
            and hit is not None
            and (hit.size, hit.mtime_ns, hit.ino) == (s.st_size, s.st_mtime_ns, s.st_ino)
            and (self.objects is None or hit.stored)
        ):
            return Item("f", mode, hit.digest, s.st_size)
        if dir_fd is not None:
            fd = open_file_at(dir_fd, rel.rpartition("/")[2])
        else:
            fd = open_file(self.root, rel)  # never through a symlink
        if fd is None:
            return None  # gone, or not a regular file now
        try:
            # Read once to hash; copy in only content the store does not have yet.
            digest, size = hash_file(fd)
            if self.objects is not None and not self.objects.has(digest):
                digest, size, added = self.objects.put_file(fd)
                self.added += added
        finally:
            os.close(fd)
        self.hashed += 1
        if s.st_mtime_ns < self.started - RACY_NS and size == s.st_size:
            self.cache[rel] = CacheEntry(
                s.st_size, s.st_mtime_ns, s.st_ino, digest, self.objects is not None
            )
        else:
            self.cache.pop(rel, None)
        return Item("f", mode, digest, size)


def scan(
    root: Path,
    ignore: Ignore,
    cache: dict[str, CacheEntry],
    objects: ObjectStore | None = None,
) -> Scan:
    """The whole workspace tree now. With `objects`, every file's content is stored as a blob."""
    hasher = Hasher(root, cache, objects)
    out = Scan({})
    for rel, s, link, dir_fd in _walk_fds(root, ignore):
        if rel.rsplit("/", 1)[-1].startswith(TMP_PREFIX):
            out.leftovers.append(rel)
            continue
        item = hasher.item(rel, s, link, dir_fd=dir_fd)
        if item is not None:
            out.tree[rel] = item
    for gone in cache.keys() - out.tree.keys():
        del cache[gone]
    if objects is not None:
        objects.sync()
    out.hashed, out.added_bytes = hasher.hashed, hasher.added
    return out


def look(hasher: Hasher, ignore: Ignore, rel: str) -> Item | None:
    """The file or link at `rel` now (None: none there, or not workspace content).

    Every directory on the way must be a real one (each opened O_NOFOLLOW
    from its parent): a path is never seen through a symlink. The file is
    always read (the caller knows it changed).
    """
    parts = rel.split("/")
    name = parts[-1]
    if name.startswith(TMP_PREFIX) or len(parts) > MAX_DEPTH or ignore.covers(rel):
        return None
    fd = open_dir(hasher.root, "/".join(parts[:-1]))
    if fd is None:
        return None
    try:
        s = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if st.S_ISLNK(s.st_mode):
            return Item("l", 0, os.readlink(name, dir_fd=fd), 0)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # no longer a link
            return None
        raise
    finally:
        os.close(fd)
    if not st.S_ISREG(s.st_mode):
        return None
    return hasher.item(rel, s, None, trust_cache=False)


def changed_paths(recorded: Tree, now: Tree) -> list[str]:
    """Paths created, deleted or changed (content, mode, kind) between two trees, sorted."""
    return sorted(p for p in recorded.keys() | now.keys() if recorded.get(p) != now.get(p))

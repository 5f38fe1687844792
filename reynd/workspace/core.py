"""What the parts of workspace rewind share: the tree reynd holds for the workspace.

`WorkspaceCore` owns the state (the model: the tree as of the last staged
record; what the watcher says is dirty; the stores and the tree index) and
the few operations every part uses. The parts: recording and start-up
(substrate.py), resets (resets.py), retention (retention.py). All of it is
used under `_lock`, one task (or its worker thread) at a time.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog
import trio

from reynd.protocol.events import Event, WorkspaceFiles, boundary_kind
from reynd.storage.store import Store
from reynd.workspace import journal
from reynd.workspace.blobs import ObjectStore, TreeIndex
from reynd.workspace.config import WorkspaceConfig
from reynd.workspace.history import History
from reynd.workspace.model import Dir, Item, Tree, apply, flat, to_ops
from reynd.workspace.observe import observe
from reynd.workspace.tree import (
    CacheEntry,
    Hasher,
    Ignore,
    RootUnusable,
    Scan,
    changed_paths,
    root_ident,
    scan,
)
from reynd.workspace.watch import Dirty, Watcher, WatchUnavailable

__all__ = [
    "Pending",
    "Prepared",
    "RecordStats",
    "WorkspaceCore",
    "file_records",
    "resolve_root",
]

log = structlog.get_logger("reynd.workspace")

OPS_PER_RECORD = 512  # a large change is split over several records of one batch


@dataclass(frozen=True, slots=True)
class RecordStats:
    changed: int  # paths recorded
    hashed: int  # files read
    bytes_added: int  # blob + manifest bytes stored
    duration_ms: float  # looking, storing and staging (not the WAL's fsync)


@dataclass(slots=True)
class Prepared:
    """Changes looked at and stored, and the tree they make: not staged yet."""

    model: Dir
    changes: dict[str, Item | None]
    root: str | None  # the tree's stored root manifest, for a boundary
    hashed: int = 0
    added: int = 0


@dataclass(frozen=True, slots=True)
class Pending:
    """A restore that did not finish: its journal stays for a start or a later reset to finish."""

    target: int
    reset_seq: int
    problems: list[tuple[str, str]]  # (path, why), in the order found


def resolve_root(config: WorkspaceConfig, state_dir: Path) -> Path:
    base = state_dir.resolve().parent
    return (base / config.path).resolve() if config.path else base


def unrecorded(model: Tree, now: Tree, stuck: dict[str, Item | None]) -> list[str]:
    """The paths that differ from the model, but those a failed restore left as they were."""
    return [p for p in changed_paths(model, now) if p not in stuck or stuck[p] != now.get(p)]


def owed(failed: list[str], now: Tree, goal: Tree) -> dict[str, Item | None]:
    """What a failed restore left, by path: each of `failed`, or with "." (the whole
    restore failed) every path it was to change; with what it holds `now`."""
    paths = changed_paths(now, goal) if "." in failed else failed
    return {p: now.get(p) for p in paths}


def file_records(changes: dict[str, Item | None], cause: str) -> list[WorkspaceFiles]:
    ops = to_ops(changes)
    return [
        WorkspaceFiles(ops=tuple(ops[i : i + OPS_PER_RECORD]), cause=cause)  # type: ignore[arg-type]
        for i in range(0, len(ops), OPS_PER_RECORD)
    ]


class WorkspaceCore:
    """The state of one workspace under rewind, and what every part does with it."""

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
        self._planned: tuple[int, Dir] | None = None  # (target, its tree): from the preflight
        self._leftovers: list[str] = []  # tmp files the preflight's scan found
        self.unfinished: Pending | None = None  # the restore a failure left (daemon.status)
        # The paths that restore could not write, with what they still hold (None: nothing)
        self._stuck: dict[str, Item | None] = {}
        self._root_ident = (0, 0)  # (st_dev, st_ino) of the directory taken as the root
        self.blobs: ObjectStore
        self.manifests: ObjectStore
        self.index: TreeIndex
        self.history: History
        self.last_record: RecordStats | None = None

    # -- shared ------------------------------------------------------------------------

    def open(self) -> None:
        """Create the directories and load the index (worker thread; `start` calls it)."""
        self.blobs = ObjectStore(self._state / "blobs")
        self.manifests = ObjectStore(self._state / "manifests")
        self.index = TreeIndex(self._state / "trees")
        self.history = History(self._store, self.index, self.manifests)
        if not self.root.exists():
            if len(self.index):
                # Trees are recorded: a missing root is an unmounted volume or a move far
                # more often than a workspace emptied. Each write refuses until it is back.
                log.error("workspace.root_missing", root=str(self.root))
                return
            self.root.mkdir(parents=True, exist_ok=True)
            log.info("workspace.created", root=str(self.root))
        self._root_ident = root_ident(self.root)

    def _adopt(self, prepared: Prepared, staged: Iterable[Event]) -> None:
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

    def _look(
        self, objects: ObjectStore | None, first: bytes = b""
    ) -> tuple[dict[str, Item | None], Hasher]:
        """What differs from the model where the dirty set says (all of it without a watcher).

        `first`: what was read off the watcher already. The stuck paths are
        looked at too, for `_unstuck`.
        """
        if self._check_root():
            first = b""  # the old watcher's: its watch numbers mean nothing to the new one
        self._drain(first)
        self._dirty.paths.update(self._stuck)
        hasher = Hasher(self.root, self._cache, objects)
        return observe(self.root, self._ignore, self._dirty, self._model, hasher), hasher

    def _check_root(self) -> bool:
        """The root is still the directory taken at start (worker thread, locked).

        Else, with a symlink now on the path to it, RootUnusable: nothing is
        read or written through it. A directory made anew at the same path
        (`rm -rf`, `mkdir`) is taken instead: every path is looked at again,
        and the watcher, blind to it, starts over: True then.
        """
        now = root_ident(self.root)
        if now == self._root_ident:
            return False
        if os.path.realpath(self.root) != str(self.root):  # resolved when configured
            raise RootUnusable(
                errno.ELOOP, "a directory on the way to it is now a symlink", str(self.root)
            )
        log.warning("workspace.root_replaced", root=str(self.root), effect="every path looked at")
        self._root_ident = now
        self._rewatch()
        return True

    def _drain(self, first: bytes) -> None:
        """What the watcher queued (after `first`, read already) into the dirty set."""
        if self._watcher is None:
            return
        try:
            self._watcher.drain(first, self._dirty)
        except WatchUnavailable as exc:
            self._unwatch(exc)
            return
        if self._watcher.root_lost:  # moved or deleted: at its path now, maybe a new one
            self._rewatch()

    def _rewatch(self) -> None:
        """Look at every path at the next look; a watcher starts over on the root now there."""
        self._dirty.full = True
        if self._watcher is not None:
            old, self._watcher = self._watcher, None  # never a closed one left in place
            old.close()
            try:
                self._watcher = Watcher(self.root, self._ignore)
            except OSError as exc:  # WatchUnavailable, or its scandir out of descriptors
                self._unwatch(exc)

    def _root_moved(self) -> bool:
        """Whether `_check_root` has something to say: a cheap look at every boundary, for a
        watcher bound to the old directory sees nothing of the new one."""
        try:
            return root_ident(self.root) != self._root_ident
        except RootUnusable:
            return True

    def _unstuck(self, changes: dict[str, Item | None]) -> dict[str, Item | None]:
        """`changes` without the paths a failed restore left as they were.

        Those are the restore's debt, not a write of anyone's: recorded, they
        would become the tip's tree, and the start that finishes the restore
        would find nothing left to do. The stuck paths must have been looked
        at (`_look`, or in the dirty set): one that holds anything else now
        (the model's item: the debt paid; or a write, then recorded) is no
        longer stuck.
        """
        if not self._stuck:
            return changes
        self._stuck = {p: i for p, i in self._stuck.items() if p in changes and changes[p] == i}
        return {p: i for p, i in changes.items() if p not in self._stuck}

    def _now(self) -> Scan:
        """What the workspace holds now, for a restore: the model and what changed since."""
        changes, _ = self._look(None)
        return Scan(flat(apply(self._model, changes)))

    def _scan(self) -> Scan:
        """The whole workspace now, the root checked first (worker thread, locked)."""
        self._check_root()
        return scan(self.root, self._ignore, self._cache)

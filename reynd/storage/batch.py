"""The WAL's one write sequence: staged appends written, synced, then committed.

Every append takes the same steps, in this order (docs/durability.md rule 1):
`Store.stage` assigns seqs and encodes frames; `Batch.write` puts the frames
of one or more staged appends in the log; a sync covers them; `Batch.commit`
then makes them visible (index, in-memory state, catalog) in seq order. A
batch refuses a step out of order, so no caller commits what is not durable.

Two callers drive it. `Store.append` (tools, tests, the bench) runs the steps
in a row. The daemon's group commit (daemon/committer.py) only decides who
leads a batch and where its sync runs: on a worker thread (`write_and_sync`),
or in the kernel through AIO (`write`, `start_sync`, then `sync_done` with
the kernel's answer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reynd.core.reconstruct import ReplayPlan
from reynd.protocol.events import Event
from reynd.protocol.state import RuntimeState
from reynd.storage.wal import Placement, Wal

__all__ = ["Batch", "Rebuilt", "Staged"]


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """The state as of `target`, built ahead of the reset record that makes it the tip's."""

    target: int
    plan: ReplayPlan
    state: RuntimeState


@dataclass(slots=True)  # not frozen: one per append, and frozen init costs twice as much
class Staged:
    """Events with their seqs assigned and their frames encoded, not yet durable."""

    events: tuple[Event, ...]
    frames: tuple[tuple[int, bytes], ...]
    rebuilt: Rebuilt | None = None  # the state a reset record among `events` leads to

    @property
    def glued(self) -> frozenset[int]:
        """Seqs that continue an atomic batch: the WAL keeps them in their batch's segment."""
        return frozenset(e.seq + 1 for e in self.events if e.more)


Commit = Callable[[Staged, list[Placement]], None]

# The steps of a batch, in their only order (a sync is started, or run whole from written).
_STEPS = ("staged", "written", "syncing", "durable", "committed")
_STAGED, _WRITTEN, _SYNCING, _DURABLE, _COMMITTED = range(len(_STEPS))


class Batch:
    """Staged appends on their way into the log: written, synced, committed, once each.

    Made by `Store.batch`. `write` and the sync run on one thread at a time
    (the loop, or a worker thread while the loop waits); `commit` on the
    owner's thread, as `Store.commit` requires. A step that fails leaves the
    batch where it was: it is never committed (and the log refuses writes).
    """

    __slots__ = ("_commit", "_fd", "_placements", "_step", "_wal", "staged")

    def __init__(self, wal: Wal, commit: Commit, staged: list[Staged]) -> None:
        self.staged = staged
        self._wal = wal
        self._commit = commit
        self._step = _STAGED
        # Set by `write` and `start_sync`, which come first (`_step` says so).
        self._placements: list[Placement]
        self._fd: int

    def fits(self, max_bytes: int) -> bool:
        """At most `max_bytes`, and no new segment to open (a rotation syncs and creates files)."""
        n = 0
        for staged in self.staged:  # loops, not a generator: once per batch, on the hot path
            for _, frame in staged.frames:
                n += len(frame)
        return n <= max_bytes and self._wal.fits_segment(n)

    def write(self) -> None:
        """Write every frame, in seq order; nothing is durable until the sync."""
        if self._step != _STAGED:
            raise self._out_of_order("write")
        frames = [f for s in self.staged for f in s.frames]
        glued = frozenset(seq for s in self.staged for seq in s.glued)
        self._placements = self._wal.write_batch(frames, glued)
        self._step = _WRITTEN

    def sync(self) -> None:
        """fdatasync what `write` wrote (blocking); a failure raises, and the log refuses writes."""
        if self._step != _WRITTEN:
            raise self._out_of_order("sync")
        self._wal.sync()
        self._step = _DURABLE

    def write_and_sync(self) -> None:
        """`write`, then `sync`: the whole batch on the calling (worker) thread."""
        self.write()
        self.sync()

    def start_sync(self) -> int:
        """The fd to fdatasync, for a caller that runs the sync itself (kernel AIO).

        The caller then reports the outcome to `sync_done`, or calls
        `finish_sync` to run the fdatasync here after all (the kernel refused it).
        """
        if self._step != _WRITTEN:
            raise self._out_of_order("sync")
        self._fd = self._wal.start_sync()
        self._step = _SYNCING
        return self._fd

    def finish_sync(self) -> None:
        """fdatasync the fd `start_sync` gave, here (blocking)."""
        if self._step != _SYNCING:
            raise self._out_of_order("finish the sync of")
        self._wal.finish_sync(self._fd)
        self._step = _DURABLE

    def sync_done(self, error: BaseException | None) -> None:
        """Record the outcome of the sync the caller ran: raises `error`, if any (rule 5)."""
        if self._step != _SYNCING:
            raise self._out_of_order("finish the sync of")
        self._wal.sync_done(error)
        self._step = _DURABLE

    def commit(self) -> list[Event]:
        """Make the durable batch visible, append by append in seq order; all its events."""
        if self._step != _DURABLE:
            raise self._out_of_order("commit")
        self._step = _COMMITTED  # even if a commit fails: the rest are never applied twice
        committed: list[Event] = []
        k = 0
        for staged in self.staged:
            n = len(staged.frames)
            self._commit(staged, self._placements[k : k + n])
            committed.extend(staged.events)
            k += n
        return committed

    def _out_of_order(self, action: str) -> AssertionError:
        # Checked inline by each step: a call fewer on every append's path.
        return AssertionError(f"cannot {action} a batch that is {_STEPS[self._step]}")

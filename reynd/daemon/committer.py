"""Group commit: one writer thread, many trio appenders, no early acknowledgement.

Appenders stage their events on the trio thread (seqs are assigned there, in
queue order) and queue them. The writer thread takes everything queued, writes
it, fdatasyncs once, and hands the batch back to the trio thread, which
commits it (index + state) in seq order and wakes the appenders. A batch forms
by itself while the previous sync runs; there is no timer.

A dedicated thread, not trio.to_thread per sync: a thread hand-off per batch
costs less than the thread-pool round trip, which matters at one writer.

A failed write or sync is fatal (DURABILITY rule 5): every pending append
fails, no later append is accepted, and `failed` is set so the daemon exits
and restarts through recovery. Retrying an fsync can lose data silently.

Once `stop` began, `append` refuses (shutting_down): nothing is queued behind
the writer's last batch. An append still queued when the writer is gone is
failed, never left waiting (an append cannot be cancelled: a caller left
waiting would hold the daemon's shutdown forever).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence

import trio

from reynd.protocol import errors
from reynd.protocol.events import Event
from reynd.storage.store import Rebuilt, Staged, Store
from reynd.storage.wal import Placement

__all__ = ["Committer", "Queued"]

log = logging.getLogger(__name__)


class Queued:
    """Staged events in the writer's queue, and the task to wake once they are durable."""

    __slots__ = ("error", "staged", "task")

    def __init__(self, staged: Staged, task: trio.lowlevel.Task) -> None:
        self.staged = staged
        self.task = task
        self.error: errors.ReyndError | None = None


def _storage_failed(exc: BaseException) -> errors.StorageFailed:
    return errors.StorageFailed(
        "the WAL failed to sync; reynd is stopping and will recover on restart",
        {"reason": str(exc)},
    )


def _stopping() -> errors.ShuttingDown:
    return errors.ShuttingDown(
        "reynd is stopping: the event was not written; retry once it is back"
    )


def _refuse_abort(_: object) -> trio.lowlevel.Abort:
    # Once queued, an append is not cancellable: the caller must learn whether
    # its events were written (the wait is one fsync, a few milliseconds).
    return trio.lowlevel.Abort.FAILED


_STOP = object()


class Committer:
    """The only path by which the daemon writes the WAL."""

    def __init__(self, store: Store, on_commit: Callable[[Sequence[Event]], None]) -> None:
        self._store = store
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[Queued | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.failed = trio.Event()
        self.failure: BaseException | None = None
        self.stopping = False  # stop() began: appends are refused
        self.batches = 0

    def start(self) -> None:
        """Start the writer thread (call from the trio thread)."""
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._writer, name="reynd-wal-writer", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Refuse new appends, let queued ones finish, then stop the thread."""
        self.stopping = True
        if self._thread is None:
            return
        self._queue.put(_STOP)
        thread = self._thread
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(thread.join)
        self._thread = None
        # The writer is gone (after _STOP, or after a failure): nothing queued
        # now will ever be written. Its appenders learn it instead of waiting.
        self._fail_queued(_stopping)

    async def append(
        self, events: Sequence[Event], rebuilt: Rebuilt | None = None, *, atomic: bool = False
    ) -> list[Event]:
        """Append durably; returns the events with their seqs once fsync covered them.

        `rebuilt`: the state a reset record among `events` leads to (Store.stage).
        `atomic`: after a crash, recovery keeps all of `events` or none.
        Not cancellable once queued: a cancelled caller could not tell whether
        its events were written, so it waits the few milliseconds to know.
        """
        return await self.wait(self.enqueue(events, rebuilt, atomic=atomic))

    def enqueue(
        self, events: Sequence[Event], rebuilt: Rebuilt | None = None, *, atomic: bool = False
    ) -> Queued:
        """Stage `events` (seqs assigned, in queue order) and queue them; `wait` for durability.

        For a caller that must stage under a lock it releases before the
        fsync: no checkpoint may come between this call and `wait` (the
        writer wakes the task that enqueued).
        """
        self._check()
        return self._queue_staged(self._store.stage(events, rebuilt, atomic=atomic))

    async def wait(self, queued: Queued) -> list[Event]:
        """Until the events of `queued` are durable (not cancellable); returns them with seqs."""
        await trio.lowlevel.wait_task_rescheduled(_refuse_abort)
        if queued.error is not None:
            raise queued.error
        return list(queued.staged.events)

    async def append_replicated(
        self, frames: Sequence[bytes], rebuilt: Rebuilt | None
    ) -> list[Event]:
        """Append records another daemon wrote, byte for byte (a follower's path).

        `rebuilt`: the state a reset record among them leads to, as in `append`.
        """
        self._check()
        return await self.wait(self._queue_staged(self._store.stage_replicated(frames, rebuilt)))

    def _check(self) -> None:
        if self.failure is not None:
            raise _storage_failed(self.failure)
        if self.stopping:
            raise _stopping()

    def _queue_staged(self, staged: Staged) -> Queued:
        pending = Queued(staged, trio.lowlevel.current_task())
        self._queue.put(pending)  # no await since staging: queue order = seq order
        return pending

    # -- writer thread --------------------------------------------------------------

    def _writer(self) -> None:
        assert self._token is not None
        wal = self._store.wal
        stopping = False
        while not stopping:
            batch: list[Queued] = []
            item = self._queue.get()
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    assert isinstance(item, Queued)
                    batch.append(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if not batch:
                continue
            frames = [f for p in batch for f in p.staged.frames]
            glued = frozenset(s for p in batch for s in p.staged.glued)
            try:
                placements = wal.write_batch(frames, glued)
                wal.sync()
            except BaseException as exc:
                self._token.run_sync_soon(self._fail, batch, exc)
                return
            self._token.run_sync_soon(self._complete, batch, placements)

    # -- back on the trio thread ----------------------------------------------------------

    def _complete(self, batch: list[Queued], placements: list[Placement]) -> None:
        self.batches += 1
        k = 0
        committed: list[Event] = []
        for pending in batch:
            n = len(pending.staged.frames)
            self._store.commit(pending.staged, placements[k : k + n])
            committed.extend(pending.staged.events)
            k += n
        for pending in batch:
            trio.lowlevel.reschedule(pending.task)
        self._on_commit(committed)

    def _fail(self, batch: list[Queued], exc: BaseException) -> None:
        log.critical("WAL write or sync failed: %r; refusing further writes", exc)
        self.failure = exc
        for pending in batch:
            pending.error = _storage_failed(exc)
            trio.lowlevel.reschedule(pending.task)
        # Appends queued behind the failed batch never reach the thread again.
        self._fail_queued(lambda: _storage_failed(exc))
        self.failed.set()

    def _fail_queued(self, error: Callable[[], errors.ReyndError]) -> None:
        """Wake every append still queued with `error` (the writer will not take them)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Queued):
                item.error = error()
                trio.lowlevel.reschedule(item.task)

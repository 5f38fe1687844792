"""Group commit: one writer task, many trio appenders, no early acknowledgement.

Appenders stage their events on the trio thread (seqs are assigned there, in
queue order) and queue them. The writer takes everything queued, writes it,
fdatasyncs once, commits it (index + state) in seq order and wakes the
appenders. A batch forms by itself while the previous sync runs; there is no
timer.

The sync never blocks the event loop, and its end should wake the loop at the
cost of one wake-up: through kernel AIO (storage/kernel_aio.py), a batch is
written on the loop (a few KiB into the page cache) and its fdatasync runs in
the kernel, whose eventfd the loop waits on. A batch that is large or opens a
segment (whose rotation syncs and creates files), and every batch where
kernel AIO is not available or the file calls are simulated (tests), is
written and synced on a worker thread instead.

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
import os
from collections.abc import Callable, Sequence

import trio

from reynd.protocol import errors
from reynd.protocol.events import Event
from reynd.storage import fsops
from reynd.storage.kernel_aio import KernelSync
from reynd.storage.store import Rebuilt, Staged, Store
from reynd.storage.wal import Placement, Wal

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


# Written on the loop up to this size: a memory copy of at most ~0.1 ms.
LOOP_WRITE_MAX = 256 * 1024


class Committer:
    """The only path by which the daemon writes the WAL."""

    def __init__(
        self,
        store: Store,
        on_commit: Callable[[Sequence[Event]], None],
        *,
        kernel_aio: bool = True,
    ) -> None:
        """`kernel_aio=False`: every batch goes through a worker thread (tests, measurements)."""
        self._store = store
        self._on_commit = on_commit
        self._use_aio = kernel_aio
        self._aio: KernelSync | None = None
        self._pending: list[Queued] = []
        self._writer_task: trio.lowlevel.Task | None = None
        self._idle = False  # the writer is parked until an append is queued
        self._started = False
        # Its own: a WAL write never waits behind other work's threads.
        self._thread_limiter = trio.CapacityLimiter(1)
        self._writer_done = trio.Event()
        self.failed = trio.Event()
        self.failure: BaseException | None = None
        self.stopping = False  # stop() began: appends are refused
        self.batches = 0
        self.sync_path = "not started"

    def start(self) -> None:
        """Start the writer (call from the trio thread); it lives until `stop`."""
        if self._use_aio and fsops.fdatasync is os.fdatasync:
            self._aio, self.sync_path = KernelSync.open()
        else:
            self.sync_path = "worker thread"
        self._started = True
        log.info("WAL sync through %s", self.sync_path)
        # A system task, like the thread it replaces: it outlives the daemon's
        # nurseries, so that appends queued while they end are still written.
        trio.lowlevel.spawn_system_task(self._writer, name="reynd-wal-writer")

    async def stop(self) -> None:
        """Refuse new appends, let queued ones finish, then stop the writer."""
        self.stopping = True
        if not self._started:
            self._writer_done.set()
        self._wake_writer()
        with trio.CancelScope(shield=True):
            await self._writer_done.wait()
        # The writer is gone (after the last batch, or after a failure): nothing
        # queued now will ever be written. Its appenders learn it instead of waiting.
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
        if self.stopping or self._writer_done.is_set():
            raise _stopping()

    def _queue_staged(self, staged: Staged) -> Queued:
        pending = Queued(staged, trio.lowlevel.current_task())
        self._pending.append(pending)  # no await since staging: queue order = seq order
        self._wake_writer()
        return pending

    def _wake_writer(self) -> None:
        if self._idle and self._writer_task is not None:
            self._idle = False
            trio.lowlevel.reschedule(self._writer_task)

    # -- the writer -----------------------------------------------------------------

    async def _writer(self) -> None:
        self._writer_task = trio.lowlevel.current_task()
        try:
            while self._pending or not self.stopping:
                if not self._pending:
                    self._idle = True
                    await trio.lowlevel.wait_task_rescheduled(self._abort_idle)
                    continue
                batch, self._pending = self._pending, []
                try:
                    with trio.CancelScope(shield=True):
                        placements = await self._write(batch)
                except BaseException as exc:  # any failure is fatal: rule 5
                    self._fail(batch, exc)
                    return
                self._complete(batch, placements)
        except trio.Cancelled:
            pass  # trio.run is ending (idle writer): queued appends are failed by stop
        finally:
            self._idle = False
            self._writer_task = None
            if self._aio is not None:
                self._aio.close()
                self._aio = None
            self._writer_done.set()

    def _abort_idle(self, _: object) -> trio.lowlevel.Abort:
        self._idle = False
        return trio.lowlevel.Abort.SUCCEEDED

    async def _write(self, batch: list[Queued]) -> list[Placement]:
        """Write the batch and make it durable (raises on any failure)."""
        wal = self._store.wal
        frames = [f for p in batch for f in p.staged.frames]
        glued = frozenset(s for p in batch for s in p.staged.glued)
        nbytes = sum(len(f) for _, f in frames)
        if self._aio is None or nbytes > LOOP_WRITE_MAX or not wal.fits_segment(nbytes):
            return await trio.to_thread.run_sync(
                _write_and_sync, wal, frames, glued, limiter=self._thread_limiter
            )
        placements = wal.write_batch(frames, glued)
        fd = wal.start_sync()
        try:
            self._aio.submit(fd)
        except OSError as exc:
            # Not started, so nothing is lost: sync on a thread from now on.
            log.warning("kernel AIO refused an fdatasync (%s); syncing on a thread", exc)
            self._aio.close()
            self._aio, self.sync_path = None, f"worker thread (AIO refused: {exc})"
            try:
                await trio.to_thread.run_sync(fsops.fdatasync, fd, limiter=self._thread_limiter)
            except BaseException as error:
                wal.sync_done(error)
            wal.sync_done(None)
            return placements
        await trio.lowlevel.wait_readable(self._aio.eventfd)
        wal.sync_done(self._aio.reap())
        return placements

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
        # Appends queued behind the failed batch are never written.
        self._fail_queued(lambda: _storage_failed(exc))
        self.failed.set()

    def _fail_queued(self, error: Callable[[], errors.ReyndError]) -> None:
        """Wake every append still queued with `error` (the writer will not take them)."""
        queued, self._pending = self._pending, []
        for item in queued:
            item.error = error()
            trio.lowlevel.reschedule(item.task)


def _write_and_sync(
    wal: Wal, frames: list[tuple[int, bytes]], glued: frozenset[int]
) -> list[Placement]:
    placements = wal.write_batch(frames, glued)
    wal.sync()
    return placements

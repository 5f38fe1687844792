"""Group commit: many trio appenders, one batch in flight, no early acknowledgement.

Appenders stage their events on the trio thread (seqs are assigned there, in
queue order) and queue them. The first appender to find no batch in flight
leads one: it takes everything queued as one batch (storage/batch.py: the
write sequence itself, write, sync, commit in seq order, is the storage
core's) and wakes the others once it is committed. Whoever queued while it
synced waits; the first of them is woken to lead the next batch. A batch
forms by itself while the previous sync runs; there is no timer. No task of
its own: at one writer, a hand-off to a writer task and back cost two
scheduler passes per append.

What is decided here is where the sync runs. It never blocks the event loop,
and its end wakes the loop at the cost of one wake-up: through kernel AIO
(storage/kernel_aio.py), a batch is written on the loop (at most
LOOP_WRITE_MAX bytes into the page cache) and its fdatasync runs in the
kernel, whose eventfd the loop waits on. A larger batch, one that opens a
segment (a rotation syncs and creates files), and every batch where kernel
AIO is not available or the disk is simulated (tests), is written and synced
on a worker thread instead.

A failed write or sync is fatal (docs/durability.md rule 5): every pending append
fails, no later append is accepted, and `failed` is set so the daemon exits
and restarts through recovery. Retrying an fsync can lose data silently.

Once `stop` began, `append` refuses (shutting_down); `stop` returns once
every append queued before it is written (or failed). An append cannot be
cancelled once queued: its caller must learn whether its events were written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

import trio

from reynd.protocol import errors
from reynd.protocol.events import Event
from reynd.storage import fsops
from reynd.storage.batch import Batch, Rebuilt, Staged
from reynd.storage.kernel_aio import KernelSync
from reynd.storage.store import Store

__all__ = ["Committer", "Queued", "storage_failed"]

# stdlib logging, like the storage core: quiet when used in process (benchmarks).
log = logging.getLogger(__name__)

T = TypeVar("T")


class Queued:
    """Staged events waiting for their sync, and the task to wake once they are durable."""

    __slots__ = ("error", "lead", "staged", "task")

    def __init__(self, staged: Staged, task: trio.lowlevel.Task) -> None:
        self.staged = staged
        self.task = task
        self.error: errors.ReyndError | None = None
        self.lead = False  # woken to write the next batch, not because its own is durable


def storage_failed(exc: BaseException) -> errors.StorageFailed:
    """The error every append gets once the WAL failed with `exc` (the daemon stops)."""
    return errors.StorageFailed(
        "the WAL failed to write, sync or apply an append; "
        "reynd is stopping and will recover on restart",
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
    """The only path by which the daemon writes the WAL (storage/appender.py's protocols)."""

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
        self._leading = False  # a batch is being written (or its leader is being woken)
        self._last_batch = 0
        self._quiet = trio.lowlevel.ParkingLot()  # stop() waits here for the last batch
        # Its own: a WAL write never waits behind other work's threads.
        self._thread_limiter = trio.CapacityLimiter(1)
        self.failed = trio.Event()
        self.failure: BaseException | None = None
        self.stopping = False  # stop() began: appends are refused
        self.batches = 0
        self.sync_path = "not started"

    def start(self) -> None:
        """Choose how batches are synced (call from the trio thread, before any append)."""
        if not self._use_aio:
            self.sync_path = "worker thread"
        elif fsops.simulated():
            # The kernel's sync would bypass the simulated disk's model.
            self.sync_path = "worker thread (simulated disk)"
        else:
            self._aio, why = KernelSync.open()
            self.sync_path = why if self._aio is not None else f"worker thread ({why})"
        log.info("WAL sync through %s", self.sync_path)

    async def stop(self) -> None:
        """Refuse new appends and return once every queued one is written (or failed)."""
        self.stopping = True
        with trio.CancelScope(shield=True):
            while self._leading:
                await self._quiet.park()
        if self._aio is not None:
            self._aio.close()
            self._aio = None

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
        queue's order is the seqs' order, and every queued append's task
        calls `wait`).
        """
        self._check()
        return self._queue_staged(self._store.stage(events, rebuilt, atomic=atomic))

    async def wait(self, queued: Queued) -> list[Event]:
        """Until the events of `queued` are durable (not cancellable); returns them with seqs.

        The first appender to find no batch in flight writes one itself (the
        leader): everything queued, one write, one sync, then it commits and
        wakes the others. Whoever queued meanwhile waits; the first of them
        is woken to lead the next batch.
        """
        if not self._leading:
            await self._lead(queued)
        else:
            await trio.lowlevel.wait_task_rescheduled(_refuse_abort)
            if queued.lead:
                await self._lead(queued)
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
            raise storage_failed(self.failure)
        if self.stopping:
            raise _stopping()

    def _queue_staged(self, staged: Staged) -> Queued:
        pending = Queued(staged, trio.lowlevel.current_task())
        self._pending.append(pending)  # no await since staging: queue order = seq order
        return pending

    # -- the leader -----------------------------------------------------------------

    async def _lead(self, me: Queued) -> None:
        # No shield scope (entering and leaving one costs as much as the rest
        # of an append's bookkeeping): the waits below cannot be cancelled.
        self._leading = True
        try:
            # The appenders the last batch woke are likely to queue again at
            # once: a scheduler pass or two lets them share this batch.
            for _ in range(2):
                if len(self._pending) >= self._last_batch:
                    break
                await trio.lowlevel.cancel_shielded_checkpoint()
            batch, self._pending = self._pending, []
            try:
                written = self._store.batch([p.staged for p in batch])
                await self._write(written)
                committed = written.commit()
            except BaseException as exc:  # any failure is fatal: rule 5
                # (A commit that fails leaves durable records unapplied: the
                # restart's recovery applies them.)
                self._fail(batch, exc, me)
                return
            self.batches += 1
            self._last_batch = len(batch)
            for pending in batch:
                if pending is not me:
                    trio.lowlevel.reschedule(pending.task)
            self._on_commit(committed)
        finally:
            if self._pending:
                # Queued while this batch synced: the first of them leads the next.
                successor = self._pending[0]
                successor.lead = True
                trio.lowlevel.reschedule(successor.task)
            else:
                self._leading = False
                self._quiet.unpark_all()

    async def _write(self, batch: Batch) -> None:
        """Write the batch and make it durable (raises on any failure, never Cancelled)."""
        aio = self._aio
        if aio is None or not batch.fits(LOOP_WRITE_MAX):
            await self._on_thread(batch.write_and_sync)
            return
        batch.write()
        fd = batch.start_sync()
        try:
            aio.submit(fd)
        except OSError as exc:
            # Not started, so nothing is lost: sync on a thread from now on.
            log.warning("kernel AIO refused an fdatasync (%s); syncing on a thread", exc)
            aio.close()
            self._aio, self.sync_path = None, f"worker thread (AIO refused: {exc})"
            await self._on_thread(batch.finish_sync)
            return
        try:
            await trio.lowlevel.wait_readable(aio.eventfd)
        except trio.Cancelled:
            # The leader's request was cancelled: the batch is written all the
            # same (its cancellation reaches it at its next checkpoint).
            with trio.CancelScope(shield=True):
                await trio.lowlevel.wait_readable(aio.eventfd)
        batch.sync_done(aio.reap())

    async def _on_thread(self, fn: Callable[[], T]) -> T:
        with trio.CancelScope(shield=True):
            result = await trio.to_thread.run_sync(fn, limiter=self._thread_limiter)
        return result

    def _fail(self, batch: list[Queued], exc: BaseException, me: Queued) -> None:
        log.critical("WAL write, sync or commit failed: %r; refusing further writes", exc)
        self.failure = exc
        queued, self._pending = [*batch, *self._pending], []
        for pending in queued:
            pending.error = storage_failed(exc)
            if pending is not me:
                trio.lowlevel.reschedule(pending.task)
        self.failed.set()

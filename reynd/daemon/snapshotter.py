"""Full snapshots and segment indexes, cut in the background when the commits make them due.

A snapshot bounds the replay of a restart or a reconstruct
(Store.snapshot_due); a segment index lets a start skip reading what it
covers (Store.index_due). A commit only sets the wake-up (`committed`); the
task encodes on the event loop and writes on a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
import trio

from reynd.daemon.coordinator import Gate
from reynd.protocol.events import Event
from reynd.storage.errors import UnencodableState
from reynd.storage.store import Store

__all__ = ["Snapshotter"]

log = structlog.get_logger("reynd.snapshots")


class Snapshotter:
    """Cuts what the store says is due, one at a time."""

    def __init__(self, store: Store, reads: Gate) -> None:
        """`reads`: the read gate, shared while an index is written (GC waits for it)."""
        self._store = store
        self._reads = reads
        self._due = trio.Event()

    def committed(self, events: Sequence[Event]) -> None:
        """Wake the task once a snapshot or an index is due (a commit hook)."""
        if self._store.snapshot_due() or self._store.index_due():
            self._due.set()

    async def run(self) -> None:
        """Cut full snapshots when the replay distance says so (Store.snapshot_due),
        then write the segment index of what it covers (Store.index_due).

        A state no snapshot can hold (from a record an older version
        acknowledged) is logged and skipped: the WAL still covers it.
        """
        store = self._store
        if store.index_due():  # a start that scanned much: do not wait for a write
            self._due.set()
        while True:
            await self._due.wait()
            self._due = trio.Event()
            if store.snapshot_due():
                await self._snapshot()
            if store.index_due():
                # GC never deletes a segment while its index is being written.
                async with self._reads.shared():
                    pending = store.capture_index()
                    done = await trio.to_thread.run_sync(store.write_index, pending)
                    store.index_written(pending, done)
                log.debug("index.written", segments=done, records=pending.records)

    async def _snapshot(self) -> None:
        store = self._store
        try:
            seq, packed, covered = store.pack_snapshot()
        except UnencodableState as exc:
            store.snapshot_failed()
            log.error("snapshot.skipped", seq=store.state.seq, error=str(exc))  # noqa: TRY400
            return
        size = await trio.to_thread.run_sync(store.snapshots.publish, seq, packed)
        store.snapshot_written(seq, size, covered, len(packed))
        log.debug("snapshot.written", seq=seq, bytes=size)

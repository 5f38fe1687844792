"""Read back, once the daemon serves, the records its start took on trust from segment indexes.

A start reads a segment index instead of the records it describes (restart
bounded by the tail), so bit rot in one of them is not seen at start-up as
docs/durability.md rule 7 asks. This task reads each of them back, checksum and
decoding as a scan would, in small batches on a worker thread, holding a
shared read lock so retention cannot delete a segment under it. Damage it
finds, or that a request finds first (`report`), stops the daemon with exit 3
after leaving the damage mark (reynd/storage/damage.py): the next start then
verifies every record and refuses to start, naming the record and the repair.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
import trio

from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.rpc import Handler
from reynd.protocol import errors
from reynd.storage.damage import mark_damage
from reynd.storage.errors import CorruptionError
from reynd.storage.store import Store
from reynd.storage.wal import Wal

__all__ = ["Scrub", "guarded"]

log = structlog.get_logger("reynd.scrub")

_BATCH = 256  # records per trip to the worker thread: about a millisecond of GIL
# The read-back decodes in Python on its thread, holding the GIL while it
# does: back to back it starves the event loop (a rewind at 10^6 entries
# took 100+ ms instead of ~10 while it ran). It rests IDLE_PER_BUSY times as
# long as each batch took: at most a fifth of the interpreter's time.
_IDLE_PER_BUSY = 4


class Scrub:
    """The read-back of the records an index vouched for; built right after the store opens."""

    def __init__(self, store: Store, reads: Gate) -> None:
        self._store = store
        self._reads = reads
        self._ranges = [
            (seg.first_seq, seg.first_seq + seg.indexed - 1)
            for seg in store.wal.segments
            if seg.indexed
        ]
        self.damage: CorruptionError | None = None
        self._found = trio.Event()
        self.checked = 0

    def report(self, exc: CorruptionError) -> None:
        """A request met damage: mark it, and stop the daemon as the read-back would."""
        if self.damage is None:
            self.damage = exc
            mark_damage(self._store.root / "state", exc)
            log.critical("storage.damage_found", error=str(exc))
            self._found.set()

    async def run(self) -> None:
        """Read back every trusted record; raise the damage (stopping the daemon) if any."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_back)
            await self._found.wait()
            nursery.cancel_scope.cancel()
        assert self.damage is not None
        raise self.damage

    async def _read_back(self) -> None:
        started = time.perf_counter()
        wal = self._store.wal
        for lo, hi in self._ranges:
            seq = lo
            while seq <= hi:
                async with self._reads.shared():  # GC never deletes a file a read is using
                    seq = max(seq, wal.first_seq)  # retention may have dropped some since
                    top = min(hi, seq + _BATCH - 1)
                    if seq > top:
                        break
                    busy = time.perf_counter()
                    try:
                        await trio.to_thread.run_sync(_read, wal, seq, top)
                    except CorruptionError as exc:
                        self.report(exc)
                        return
                    busy = time.perf_counter() - busy
                self.checked += top - seq + 1
                seq = top + 1
                await trio.sleep(busy * _IDLE_PER_BUSY)
        log.info(
            "scrub.done",
            records=self.checked,
            duration_ms=round((time.perf_counter() - started) * 1e3, 1),
        )


def guarded(handler: Handler, scrub: Scrub) -> Handler:
    """`handler`, answering storage_corrupt when it meets a damaged record (and stopping)."""

    async def guard(params: Any, ctx: CallContext) -> Any:
        try:
            return await handler(params, ctx)
        except CorruptionError as exc:
            scrub.report(exc)
            raise errors.StorageCorrupt(
                f"a record this call needed is damaged on disk ({exc.reason}); "
                "the daemon stops: its log and the next start name the record and the repair",
                {"path": str(exc.path), "offset": exc.offset, "seq": exc.seq},
            ) from None

    return guard


def _read(wal: Wal, lo: int, hi: int) -> None:
    for _ in wal.read(lo, hi):  # verifies each record's checksum, decoding and seq
        pass

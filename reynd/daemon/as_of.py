"""The state as of any retained seq, rebuilt from the nearest snapshot without moving the tip.

Planned on the event loop (the lineage and the snapshot list change there),
executed there too when small, else on a worker thread; a damaged snapshot
falls back to an older one (Store.fallback_plan). The read gate is held
throughout: GC never deletes a file a read is using.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from reynd.core.reconstruct import ReplayPlan
from reynd.daemon.coordinator import Gate
from reynd.protocol.state import RuntimeState
from reynd.storage.errors import CorruptionError
from reynd.storage.store import Store

__all__ = ["AsOf", "ReadAsOf"]

# A read of the state as of a seq (the tip when None): AsOf.read.
ReadAsOf = Callable[[int | None], Awaitable[RuntimeState]]

_CHEAP_REPLAY = 128  # records
_CHEAP_SNAPSHOT = 64 * 1024  # bytes


class AsOf:
    """Reconstructs past states for reads."""

    def __init__(self, store: Store, reads: Gate) -> None:
        self._store = store
        self._reads = reads

    async def read(self, seq: int | None) -> RuntimeState:
        """The state as of `seq` (the tip when None), rebuilt off the event loop if costly."""
        store = self._store
        if seq is None or seq == store.head:
            return store.state
        async with self._reads.shared():
            plan = store.plan(seq)
            while True:
                try:
                    if self._cheap(plan):
                        # Well under a millisecond: less than the thread hop itself.
                        return store.execute(plan)
                    return await trio.to_thread.run_sync(store.execute, plan)
                except CorruptionError as exc:
                    plan = store.fallback_plan(plan, exc)

    def _cheap(self, plan: ReplayPlan) -> bool:
        """A reconstruct small enough to run on the event loop without hurting latency."""
        sizes = self._store.snapshots.sizes
        snapshot = sizes.get(plan.snapshot, 0) if plan.snapshot else 0
        return plan.replay_count <= _CHEAP_REPLAY and snapshot <= _CHEAP_SNAPSHOT

"""Retention's collection in the daemon: GC on its schedule and on request.

Planning and applying run on the event loop (they touch in-memory indexes);
the entry snapshots and the trial reconstruct run on a worker thread
(storage/gc.py: plan, prepare, then delete, docs/durability.md rule 10).
Every collection is serialized with rewinds (a rewind must not fork below a
moving floor), and its file deletions wait for the as-of reads in flight,
which might be using them (the read gate).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Awaitable, Callable

import msgspec
import structlog
import trio

from reynd.core.retention import AgeClock
from reynd.daemon.coordinator import Gate
from reynd.daemon.retention_in_force import RetentionInForce
from reynd.protocol import methods as m
from reynd.replication.shipper import Shipper
from reynd.storage.gc import GcPlan, apply_gc, plan_gc, prepare_gc
from reynd.storage.store import Store
from reynd.workspace import Workspace

__all__ = ["Collector", "Serialized", "reason_of"]

log = structlog.get_logger("reynd.gc")

# Runs a job after every rewind queued before it (Coordinator.serialized).
Serialized = Callable[[Callable[[], Awaitable[m.GcResult]]], Awaitable[m.GcResult]]

# Said with every reason: the audit log is often the largest part, and GC never touches it.
_AUDIT_NOTE = (
    "the audit log (events/) is not collected by GC: audit retention keeps it "
    "([audit] max_total_bytes, max_files)"
)


def reason_of(plan: GcPlan) -> str:
    """Why `plan` keeps what it keeps, for the operator."""
    return f"{plan.reason}; {_AUDIT_NOTE}" if plan.reason else _AUDIT_NOTE


class Collector:
    """Collects what the retention policy in force lets go."""

    def __init__(
        self,
        store: Store,
        policy: RetentionInForce,
        clock: AgeClock,
        reads: Gate,
        serialized: Serialized,
        *,
        workspace: Workspace | None,
        shipper: Shipper | None,
    ) -> None:
        """`clock`: ages of what the WAL held when the store opened (AgeClock)."""
        self._store = store
        self._policy = policy
        self._clock = clock
        self._reads = reads
        self._serialized = serialized
        self._workspace = workspace
        self._shipper = shipper
        # The last collection the budget forced into the default horizon (retention.get).
        self.budget_forced: m.BudgetForced | None = None

    def plan(self, *, seen: bool = False) -> GcPlan:
        """The collection the policy asks for now (the owner's thread).

        Aged by the daemon's AgeClock, so a wall clock stepped forward ages
        nothing; `seen`: a collection runs, and the clock keeps what it saw.
        """
        store = self._store
        wall, mono = time.time(), time.monotonic()
        clock = self._clock.saw(store.head, wall, mono, store.floor)
        if seen:
            self._clock = clock
        return plan_gc(
            store,
            self._policy.current,
            clock.now(wall, mono),
            keep_from=self._shipper.keep_from if self._shipper else None,
            ages=lambda segments: clock.segment_ages(segments, wall, mono),
        )

    async def collect(self) -> m.GcResult:
        """One collection, serialized with rewinds."""
        return await self._serialized(self._collect)

    async def run(self) -> None:
        """Collect every `gc_interval_s` (0: only on retention.gc); a policy change re-arms it."""
        while True:
            interval = self._policy.current.gc_interval_s or math.inf
            with trio.move_on_after(interval):
                await self._policy.changed()
                continue
            try:
                await self.collect()
            except Exception:
                # Nothing was deleted unless the trial reconstruct succeeded: log
                # and try again next period rather than take the daemon down.
                log.exception("gc.failed")

    async def _collect(self) -> m.GcResult:
        store = self._store
        workspace, shipper = self._workspace, self._shipper
        keep_from = shipper.keep_from if shipper else None
        plan = self.plan(seen=True)
        if keep_from is not None and plan.floor < keep_from <= store.head:
            log.info("gc.held_for_replication", floor=plan.floor, unshipped_from=keep_from)
        if workspace is not None and plan.drop_segments:
            # Trees that need file records below the new floor are recorded first.
            coarse = (s for s in store.snapshots.seqs if s < plan.floor)
            await workspace.pin([*plan.entries, *coarse])
        await trio.to_thread.run_sync(prepare_gc, store, plan)
        async with self._reads.exclusive():
            report = apply_gc(store, plan)
        if workspace is not None:  # blobs and trees no kept seq resolves to
            await workspace.collect()
        if shipper is not None:  # the replica follows the new floor
            shipper.poke()
        fields = {k: v for k, v in dataclasses.asdict(report).items() if k != "dropped"}
        fields["duration_ms"] = round(report.duration_ms, 3)
        fields["reason"] = reason_of(plan)
        if report.segments_dropped or report.snapshots_dropped:
            log.info("gc", **fields)
        forced = self._forced(plan, report.segments_dropped)
        return m.GcResult(**fields, budget_forced=forced)

    def _forced(self, plan: GcPlan, dropped: int) -> m.BudgetForced | None:
        """Log and keep what the budget forced out of the default horizon (if it went)."""
        if plan.forced is None or not dropped:
            return None
        f = plan.forced
        self.budget_forced = m.BudgetForced(
            dropped_through_seq=f.through_seq,
            bytes=f.bytes,
            segments=f.segments,
            budget_bytes=f.budget,
            at=time.time(),
        )
        log.warning(
            "gc.budget_forced",
            **msgspec.structs.asdict(self.budget_forced),
            why=(
                "the WAL is over the disk budget (budget_bytes, budget_free_pct): checkpoints "
                "inside the default horizon were dropped, oldest first"
            ),
        )
        return self.budget_forced

"""retention.get / set / gc and state.du: the policy in force, its changes, what GC frees."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from reynd.core.retention import horizon_budget
from reynd.daemon.collector import Collector, reason_of
from reynd.daemon.context import CallContext
from reynd.daemon.retention_in_force import RetentionInForce
from reynd.daemon.rpc import Handler
from reynd.protocol import methods as m
from reynd.storage.du import measure
from reynd.storage.gc import free_bytes, reclaimable_snapshots
from reynd.storage.store import Store

__all__ = ["RetentionApi"]

log = structlog.get_logger("reynd.gc")

# Stores changed settings durably, then puts the policy in force (ConfigStore.set_retention).
SetRetention = Callable[[dict[str, Any]], Awaitable[object]]


class RetentionApi:
    def __init__(
        self,
        store: Store,
        policy: RetentionInForce,
        collector: Collector,
        set_retention: SetRetention,
        state_dir: Path,
    ) -> None:
        self._store = store
        self._policy = policy
        self._collector = collector
        self._set_retention = set_retention
        self._state_dir = state_dir

    def handlers(self) -> dict[str, Handler]:
        return {
            "retention.get": self._get,
            "retention.set": self._set,
            "retention.gc": self._gc,
            "state.du": self._du,
        }

    def _info(self) -> m.RetentionInfo:
        store = self._store
        floor = store.floor
        wal_bytes = sum(s.size for s in store.wal.segments)
        budget = horizon_budget(self._policy.current, free_bytes(store.root), wal_bytes)
        return m.RetentionInfo(
            policy=msgspec.convert(
                msgspec.to_builtins(self._policy.current), m.RetentionPolicyInfo
            ),
            floor=floor,
            head=store.head,
            wal_bytes=wal_bytes,
            segments=len(store.wal.segments),
            snapshots=len(store.snapshots.seqs),
            coarse=[s for s in store.snapshots.seqs if s < floor],
            horizon_budget_bytes=budget,
            budget_forced=self._collector.budget_forced,
        )

    async def _get(self, p: m.RetentionGetParams, ctx: CallContext) -> m.RetentionInfo:
        return self._info()

    async def _set(self, p: m.RetentionSetParams, ctx: CallContext) -> m.RetentionInfo:
        changes = {k: v for k, v in msgspec.structs.asdict(p).items() if v is not None}
        # Durable in state/config/config.db first (it outlives restarts; operator
        # policy, a rewind leaves it as it is), then in force; it overrides
        # reynd.toml's [retention] key by key.
        await self._set_retention(changes)
        log.info("retention.set", **changes)
        return self._info()

    async def _gc(self, p: m.RetentionGcParams, ctx: CallContext) -> m.GcResult:
        return await self._collector.collect()

    async def _du(self, p: m.DuParams, ctx: CallContext) -> m.DiskUsage:
        usage = await trio.to_thread.run_sync(measure, self._state_dir)
        plan = self._collector.plan()  # after the walk: what GC could free as of this answer
        gone = reclaimable_snapshots(self._store, plan)
        sizes = self._store.snapshots.sizes
        parts = sorted(
            (
                m.DiskPart(
                    name=name, path=u.path, bytes=u.bytes, disk_bytes=u.disk_bytes, files=u.files
                )
                for name, u in usage.items()
            ),
            key=lambda part: (-part.bytes, part.name),
        )
        return m.DiskUsage(
            state_dir=str(self._state_dir),
            total_bytes=sum(u.bytes for u in usage.values()),
            total_disk_bytes=sum(u.disk_bytes for u in usage.values()),
            parts=parts,
            gc=m.GcFree(
                bytes=plan.drop_bytes + sum(sizes.get(s, 0) for s in gone),
                segments=plan.drop_segments,
                snapshots=len(gone),
                floor=plan.floor,
                reason=reason_of(plan),
            ),
        )

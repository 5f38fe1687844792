"""Retention in the daemon: the GC schedule and retention.get / set / gc."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

import msgspec
import structlog
import trio

from reynd.daemon.context import CallContext
from reynd.protocol import methods as m
from reynd.storage.du import measure
from reynd.storage.gc import GcPlan, apply_gc, plan_gc, prepare_gc, reclaimable_snapshots

if TYPE_CHECKING:
    from reynd.core.retention import RetentionPolicy
    from reynd.daemon.app import App
    from reynd.daemon.rpc import Handler

__all__ = ["RetentionApi", "collect_now", "gc_loop", "use_retention"]

log = structlog.get_logger("reynd.gc")

# Said with every reason: the audit log is often the largest part, and GC never touches it.
_AUDIT_NOTE = (
    "the audit log (events/) is not collected by GC: audit retention keeps it "
    "([audit] max_total_bytes, max_files)"
)


def _reason(plan: GcPlan) -> str:
    return f"{plan.reason}; {_AUDIT_NOTE}" if plan.reason else _AUDIT_NOTE


def _plan(app: App, *, seen: bool = False) -> GcPlan:
    """The collection the policy asks for now (the owner's thread).

    Aged by the daemon's AgeClock, so a wall clock stepped forward ages
    nothing; `seen`: a collection runs, and the clock keeps what it saw.
    """
    store = app.store
    wall, mono = time.time(), time.monotonic()
    clock = app.age_clock.saw(store.head, wall, mono, store.floor)
    if seen:
        app.age_clock = clock
    return plan_gc(
        store,
        app.retention,
        clock.now(wall, mono),
        keep_from=app.shipper.keep_from if app.shipper else None,
        ages=lambda segments: clock.segment_ages(segments, wall, mono),
    )


async def collect_now(app: App) -> m.GcResult:
    """One collection, serialized with rewinds (a rewind must not fork below a moving floor).

    Planning and applying run on the event loop (they touch in-memory indexes);
    the entry snapshots and the trial reconstruct run on a worker thread. File
    deletions wait for as-of reads in flight, which might be using them.
    """

    async def work() -> m.GcResult:
        store = app.store
        keep_from = app.shipper.keep_from if app.shipper else None
        plan = _plan(app, seen=True)
        if keep_from is not None and plan.floor < keep_from <= store.head:
            log.info("gc.held_for_replication", floor=plan.floor, unshipped_from=keep_from)
        if app.workspace is not None and plan.drop_segments:
            # Trees that need file records below the new floor are recorded first.
            coarse = (s for s in store.snapshots.seqs if s < plan.floor)
            await app.workspace.pin([*plan.entries, *coarse])
        await trio.to_thread.run_sync(prepare_gc, store, plan)
        async with app.reads.exclusive():
            report = apply_gc(store, plan)
        if app.workspace is not None:  # blobs and trees no kept seq resolves to
            await app.workspace.collect()
        if app.shipper is not None:  # the replica follows the new floor
            app.shipper.poke()
        fields = {k: v for k, v in dataclasses.asdict(report).items() if k != "dropped"}
        fields["duration_ms"] = round(report.duration_ms, 3)
        fields["reason"] = _reason(plan)
        if report.segments_dropped or report.snapshots_dropped:
            log.info("gc", **fields)
        return m.GcResult(**fields)

    return await app.coordinator.serialized(work)


def use_retention(app: App, policy: RetentionPolicy) -> None:
    """Put `policy` in force and re-arm the GC schedule (the config store calls this)."""
    app.retention = policy
    app.retention_changed.set()
    app.retention_changed = trio.Event()


async def gc_loop(app: App) -> None:
    """Collect every `gc_interval_s` (0: only on retention.gc); a policy change re-arms it."""
    while True:
        changed = app.retention_changed
        interval = app.retention.gc_interval_s or math.inf
        with trio.move_on_after(interval):
            await changed.wait()
            continue
        try:
            await collect_now(app)
        except Exception:
            # Nothing was deleted unless the trial reconstruct succeeded: log
            # and try again next period rather than take the daemon down.
            log.exception("gc.failed")


class RetentionApi:
    def __init__(self, app: App) -> None:
        self._app = app

    def handlers(self) -> dict[str, Handler]:
        return {
            "retention.get": self._get,
            "retention.set": self._set,
            "retention.gc": self._gc,
            "state.du": self._du,
        }

    def _info(self) -> m.RetentionInfo:
        store = self._app.store
        floor = store.floor
        return m.RetentionInfo(
            policy=msgspec.convert(msgspec.to_builtins(self._app.retention), m.RetentionPolicyInfo),
            floor=floor,
            head=store.head,
            wal_bytes=sum(s.size for s in store.wal.segments),
            segments=len(store.wal.segments),
            snapshots=len(store.snapshots.seqs),
            coarse=[s for s in store.snapshots.seqs if s < floor],
        )

    async def _get(self, p: m.RetentionGetParams, ctx: CallContext) -> m.RetentionInfo:
        return self._info()

    async def _set(self, p: m.RetentionSetParams, ctx: CallContext) -> m.RetentionInfo:
        changes = {k: v for k, v in msgspec.structs.asdict(p).items() if v is not None}
        # Durable in state/config/config.db first (it outlives restarts and follows
        # rewinds), then in force; it overrides reynd.toml's [retention] key by key.
        await self._app.config.set_retention(changes)
        log.info("retention.set", **changes)
        return self._info()

    async def _gc(self, p: m.RetentionGcParams, ctx: CallContext) -> m.GcResult:
        return await collect_now(self._app)

    async def _du(self, p: m.DuParams, ctx: CallContext) -> m.DiskUsage:
        app = self._app
        usage = await trio.to_thread.run_sync(measure, app.state_dir)
        plan = _plan(app)  # after the walk: what GC could free as of this answer
        gone = reclaimable_snapshots(app.store, plan)
        sizes = app.store.snapshots.sizes
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
            state_dir=str(app.state_dir),
            total_bytes=sum(u.bytes for u in usage.values()),
            total_disk_bytes=sum(u.disk_bytes for u in usage.values()),
            parts=parts,
            gc=m.GcFree(
                bytes=plan.drop_bytes + sum(sizes.get(s, 0) for s in gone),
                segments=plan.drop_segments,
                snapshots=len(gone),
                floor=plan.floor,
                reason=_reason(plan),
            ),
        )

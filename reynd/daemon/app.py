"""The daemon's application: storage, group commit, coordinator, method handlers."""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec
import structlog
import trio

from reynd import __version__
from reynd.audit.options import AuditOptions
from reynd.audit.store import EventStore
from reynd.config_store.substrate import ConfigStore
from reynd.core.diff import diff_values
from reynd.core.reconstruct import ReplayPlan
from reynd.core.retention import AgeClock, RetentionPolicy, Sighting
from reynd.daemon.appends import batch_events, check_applies, check_batch, event_of
from reynd.daemon.audit_api import AuditApi
from reynd.daemon.committer import Committer, storage_failed
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator, Gate
from reynd.daemon.retention_api import RetentionApi, gc_loop, use_retention
from reynd.daemon.rpc import Handler, always_quick
from reynd.daemon.runtime_api import RuntimeApi
from reynd.daemon.scrub import Scrub
from reynd.daemon.tipreply import TipReply
from reynd.daemon.wal_read import WalReadApi
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.events import (
    AgentCreated,
    AgentEvent,
    Event,
    MessageReceived,
    Rewind,
    StepCommitted,
    boundary_kind,
    kind_of,
)
from reynd.protocol.state import RuntimeState
from reynd.replication.config import ReplicateConfig
from reynd.replication.follower import Follower
from reynd.replication.objects import Location
from reynd.replication.shipper import Shipper
from reynd.runtime import clean_stop
from reynd.runtime.agent import turn_id_for
from reynd.runtime.procs import ProcessGroups
from reynd.runtime.registry import AgentRegistry
from reynd.storage.errors import CorruptionError, UnencodableState
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store
from reynd.workspace import Workspace, WorkspaceConfig

__all__ = ["App"]

log = structlog.get_logger("reynd.app")

Publish = Callable[[str, int, dict[str, Any]], None]

# What a read-only replica refuses: every method that writes the WAL or the config.
WRITES: Final = frozenset(
    (
        "wal.append",
        "wal.append_batch",
        "rewind",
        "checkout",
        "act_turn.rewind",
        "agents.create",
        "agents.configure",
        "agents.send",
        "agents.cancel",
        "agents.resolve",
        "interventions.answer",
        "retention.set",
        "retention.gc",
    )
)


async def _read_only(source: Location, params: object, ctx: CallContext) -> object:
    raise errors.ReadOnlyReplica(
        f"this daemon is a read-only replica of {source}: send writes to the daemon that "
        "ships there (reads, subscriptions and as-of queries work here)",
        {"source": str(source)},
    )


class App:
    """Owns the state directory for the daemon's life.

    `run` opens storage, starts the writer thread, the coordinator and the
    snapshotter, calls task_status.started(), and runs until cancelled; then
    it drains queued appends and closes storage (final sync shielded). It
    calls `on_fatal` when a write or fsync failed, so the daemon exits
    non-zero and restarts through recovery; likewise when one of its tasks
    died after start-up (`failure`: a bug, an I/O error outside the WAL),
    once the committer refuses appends, so that none waits for a writer
    that is going away and the server answers what is in flight first.
    """

    def __init__(
        self,
        state_dir: Path,
        publish: Publish,
        options: StorageOptions | None = None,
        retention: RetentionPolicy | None = None,
        workspace: WorkspaceConfig | None = None,
        *,
        audit: AuditOptions | None = None,
        replicate: ReplicateConfig | None = None,
        follow: Location | None = None,
        on_fatal: Callable[[], None],
    ) -> None:
        self.state_dir = state_dir
        self._on_fatal = on_fatal
        self._publish = publish
        self._options = options or StorageOptions()
        self.store: Store
        self.age_clock: AgeClock  # ages for retention (set once the store is open)
        self.committer: Committer
        self.coordinator: Coordinator
        self.registry: AgentRegistry
        self.config: ConfigStore  # runtime settings + agent configs, in SQLite
        self.gate = Gate()  # writes share it; a rewind holds it alone
        self.reads = Gate()  # as-of reads share it; GC holds it while it deletes files
        self._tip_state = TipReply()  # state.get at the tip, encoded once per head
        self._pid = os.getpid()  # daemon.status: a system call less per call
        self.retention = retention or RetentionPolicy()
        self.retention_changed = trio.Event()
        self._snapshot_due = trio.Event()
        # Boundary seqs for the substrates to capture, in order (unbounded: a
        # slow capture must never block a commit).
        self._boundaries, self._boundaries_out = trio.open_memory_channel[int](math.inf)
        self._agent_locks: dict[str, trio.Lock] = {}
        self._audit_options = audit or AuditOptions()
        self.audit: EventStore  # the audit log of this run (never read by recovery)
        self._workspace_config = workspace or WorkspaceConfig()
        self.workspace: Workspace | None = None  # workspace rewind, when enabled
        self._replicate = replicate or ReplicateConfig()
        self.shipper: Shipper | None = None  # [replicate], when a url is set
        self._follow = follow
        self.follower: Follower | None = None  # a read-only replica of `follow`
        self.failure: Exception | None = None  # one of our tasks died after start-up

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._open_storage()
        await self._assemble()
        self.committer.start()
        serving = False  # once started, a task that dies stops the daemon (exit 3)
        try:
            try:
                async with trio.open_nursery() as nursery:
                    await self._start_tasks(nursery)
                    task_status.started()
                    serving = True
                    await self.committer.failed.wait()
                    # Let the daemon stop as on SIGTERM: requests in flight get their
                    # storage_failed answers instead of a dropped connection.
                    log.critical("storage.failed", error=repr(self.committer.failure))
                    # `send --wait` callers first: their turns will never end now.
                    assert self.committer.failure is not None
                    self.registry.fail_waiters(storage_failed(self.committer.failure))
                    self._on_fatal()
                    await trio.sleep_forever()
            except Exception as exc:
                if not serving:
                    raise  # start-up failed: the daemon exits with this error
                await self._task_died(exc)
        finally:
            with trio.CancelScope(shield=True):
                await self._close()

    async def _open_storage(self) -> None:
        """Open the store (recovery) and this run's audit log."""
        started = time.perf_counter()
        self.store = await trio.to_thread.run_sync(Store.open, self.state_dir, self._options)
        store = self.store
        # What the WAL holds now is aged from this moment by the monotonic clock.
        self.age_clock = AgeClock(Sighting(store.head, time.time(), time.monotonic()))
        rec = store.recovery
        log.info(
            "storage.open",
            state_dir=str(self.state_dir),
            head=store.head,
            records=rec.records,
            indexed=rec.indexed,  # taken from segment indexes (state/index/)
            scanned=rec.scanned,  # read and verified one by one
            segments=rec.segments,
            snapshots=len(store.snapshots.seqs),
            torn_bytes=rec.torn_bytes,
            duration_ms=round((time.perf_counter() - started) * 1e3, 1),
        )
        self.scrub = Scrub(store, self.reads)
        self.audit = await trio.to_thread.run_sync(
            lambda: EventStore.open(
                self.state_dir / "events",
                self._audit_options,
                head=store.head,
                branch=store.lineage.branch_of(store.head),
                floor=store.floor,
            )
        )

    async def _assemble(self) -> None:
        """Reap a previous daemon's executors, then build the parts that serve the store."""
        store = self.store
        # Holding the lock: every recorded executor process is a previous
        # daemon's. Kill the ones still alive before any agent runs a step.
        groups = ProcessGroups(self.state_dir / "state" / "procs")
        await trio.to_thread.run_sync(groups.reap_orphans)
        self.committer = Committer(store, self._on_commit)
        self.registry = AgentRegistry(store, self.append, self._publish, groups)
        self.coordinator = Coordinator(
            store,
            self.committer,
            self.gate,
            self.registry.cancel_all,
            self._on_reset,
            on_abort=self.registry.restart,
        )
        self.config = ConfigStore(
            self.state_dir, store, self.retention, lambda p: use_retention(self, p)
        )
        self.coordinator.substrates.append(self.config)
        if self._workspace_config.enabled and self._follow is not None:
            # A replica runs no agent and restores nothing: its files are its own.
            log.warning("workspace.ignored_on_replica", reason="a replica never rewinds files")
        elif self._workspace_config.enabled:
            self.workspace = Workspace(self._workspace_config, self.state_dir, store)
            self.coordinator.substrates.append(self.workspace)
        location = self._replicate.location()
        if self._follow is not None:
            self.follower = Follower(
                self._replicate, self._follow, store, self.committer, self._replicated_reset
            )
        elif location is not None:
            self.shipper = Shipper(self._replicate, location, store)
            await self.shipper.open()  # ReplicaRefused: the operator must act

    async def _start_tasks(self, nursery: trio.Nursery) -> None:
        """Start the daemon's tasks in `nursery`: substrates before any agent runs."""
        store = self.store
        await nursery.start(self.coordinator.run)
        nursery.start_soon(self._snapshotter)
        nursery.start_soon(self.audit.run)
        nursery.start_soon(self.scrub.run)
        # Substrates first: a restore a crash interrupted must finish
        # before any agent runs a turn against the workspace.
        for substrate in self.coordinator.substrates:
            await substrate.start(store.head)
        if self.follower is not None:
            # A replica runs no agent and keeps all it pulls.
            nursery.start_soon(self.follower.run)
        else:
            # Steps a clean stop cut run again; the file is gone (durably)
            # before they do, so a crash in the re-run leaves them ambiguous.
            resume = await trio.to_thread.run_sync(
                clean_stop.take, self.state_dir / "state", store.head, store.state
            )
            await nursery.start(partial(self.registry.run, resume=resume))
            nursery.start_soon(gc_loop, self)
        nursery.start_soon(self._capture_generations)
        nursery.start_soon(self.config.run)
        if self.workspace is not None:
            nursery.start_soon(self.workspace.run)
        if self.shipper is not None:
            nursery.start_soon(self.shipper.run)

    async def _close(self) -> None:
        """Stop the committer, ship and close the logs, and close the store (shielded)."""
        store = self.store
        await self.committer.stop()
        if self.shipper is not None and self.committer.failure is None:
            # Every append is durable now: ship the last of them.
            await self.shipper.flush(self._replicate.timeout_s)
        await self.audit.aclose(store.head, store.lineage.branch_of(store.head))
        if self.committer.failure is None:
            if self.failure is None:
                # Holding the lock, which close releases. Not after a task
                # died: what the runners were doing is not known for sure,
                # so the steps they cut stay ambiguous, as after a crash.
                await self._save_clean_stop()
            # Every append is durable: the extent file records the head.
            await trio.to_thread.run_sync(partial(store.close, record_head=True))
        self.config.close()
        if self.workspace is not None:
            self.workspace.close()
        log.info("storage.closed", head=store.head)

    async def _task_died(self, exc: Exception) -> None:
        """One of our tasks died (the others are cancelled): stop as on SIGTERM, then exit 3.

        The committer refuses appends first (a queued one is still written or
        failed): an append cannot be cancelled, so one queued behind the
        writer's last batch would hold the shutdown forever.
        """
        self.failure = exc
        log.critical("app.task_failed", error=repr(exc), exc_info=exc)
        await self.committer.stop()
        self._on_fatal()
        await trio.sleep_forever()  # until the daemon, its server stopped, cancels us

    async def _save_clean_stop(self) -> None:
        """List the open steps the daemon cancelled, for the next start to re-run.

        After the committer drained (every append durable, none to come): the
        head is final. If this fails, those steps are merely ambiguous at the
        next start.
        """
        steps = self.registry.cut_steps()
        head = self.store.head
        try:
            await trio.to_thread.run_sync(clean_stop.save, self.state_dir / "state", head, steps)
        except OSError as exc:
            log.warning("clean_stop.not_saved", error=str(exc), steps=len(steps))
        else:
            if steps:
                log.info("clean_stop.saved", head=head, steps=len(steps))

    async def append(self, events: Sequence[Event], *, files: bool = True) -> list[Event]:
        """The runtime's path to the WAL: shares the write gate with wal.append.

        `files=False`: without the workspace's changes, which stay pending for
        the next record (the end of a turn whose files could not be stored).
        """
        async with self.gate.shared():
            if not files:
                return await self.committer.append(events)
            return await self._commit(events)

    async def _commit(self, events: Sequence[Event], *, atomic: bool = False) -> list[Event]:
        """Append `events` durably; with workspace rewind on, a step's commit or a boundary
        takes the workspace's changes with it (a `workspace.files` record just before,
        inside the batch: `atomic` covers it too).

        Returns `events` with their seqs.
        """
        if self.workspace is not None and any(records_files(e) for e in events):
            return await self.workspace.record(self.committer, events, atomic=atomic)
        return await self.committer.append(events, atomic=atomic)

    def handlers(self) -> dict[str, Handler]:
        """Handlers for every method of METHODS except the transport's own."""
        handlers = {name: self._guard(h) for name, h in self._all_handlers().items()}
        if self._follow is not None:
            for method in WRITES:
                handlers[method] = partial(_read_only, self._follow)
        return handlers

    def quick_calls(self) -> dict[str, Callable[[Any], bool]]:
        """Methods answered without waiting for anything, when their params pass the test.

        The server may run these in a connection's reader (rpc.Dispatcher.quick_call).
        """
        return {
            "daemon.status": always_quick,
            # At the tip: the reply encoded once per head (TipReply), no reconstruct.
            "state.get": lambda p: p.agent is None and p.seq in (None, self.store.head),
        }

    def _guard(self, handler: Handler) -> Handler:
        """`handler`, answering storage_corrupt when it meets a damaged record (and stopping)."""

        async def guarded(params: Any, ctx: CallContext) -> Any:
            try:
                return await handler(params, ctx)
            except CorruptionError as exc:
                self.scrub.report(exc)
                raise errors.StorageCorrupt(
                    f"a record this call needed is damaged on disk ({exc.reason}); "
                    "the daemon stops: its log and the next start name the record and the repair",
                    {"path": str(exc.path), "offset": exc.offset, "seq": exc.seq},
                ) from None

        return guarded

    def _all_handlers(self) -> dict[str, Handler]:
        return {
            **RuntimeApi(self).handlers(),
            **RetentionApi(self).handlers(),
            **AuditApi(self).handlers(),
            **WalReadApi(self).handlers(),
            "daemon.status": self._status,
            "generations.list": self._generations,
            "rewind": self._rewind,
            "checkout": self._checkout,
            "branches.list": self._branches,
            "state.get": self._state_get,
            "state.diff": self._state_diff,
            "wal.append": self._wal_append,
            "wal.append_batch": self._wal_append_batch,
        }

    # -- hooks -------------------------------------------------------------------------

    def _on_commit(self, events: Sequence[Event]) -> None:
        lineage = self.store.lineage
        for event in events:
            agent = event.agent if isinstance(event, AgentEvent) else None
            branch = lineage.branch_of(event.seq)
            self._publish("records", event.seq, _record_brief(event, agent, branch))
            kind = boundary_kind(event)
            if kind is not None and self.coordinator.substrates:
                self._boundaries.send_nowait(event.seq)
            if kind is not None:
                entry = self.store.catalog.at(event.seq)
                self._publish(
                    "generations",
                    event.seq,
                    {
                        "kind": kind,
                        "agent": agent,
                        "branch": branch,
                        "label": entry.label if entry else "",
                        "created_at": event.ts,
                    },
                )
            if isinstance(event, AgentCreated):
                self._publish("agents", event.seq, {"agent": event.agent, "status": "created"})
        self.audit.record(events, lineage)
        self.config.observe(events)
        if self.workspace is not None:
            self.workspace.committed(events)
        self.registry.on_commit(events)
        if self.store.snapshot_due() or self.store.index_due():
            self._snapshot_due.set()
        if self.shipper is not None:
            self.shipper.poke()

    def _on_reset(self, result: m.RewindResult) -> None:
        self.audit.reset_done(result)
        self.registry.restart()
        self._publish("rewinds", result.reset_seq, msgspec.to_builtins(result))

    def _replicated_reset(self, record: Rewind, target_was_active: bool) -> None:
        """A follower applied a reset record: tell `rewinds` subscribers, as the primary did."""
        result = m.RewindResult(
            mode="undo" if target_was_active else "fork_switch",
            reset_seq=record.seq,
            target=record.target_n,
            branch=self.store.lineage.branch_of(record.seq),
            cancelled=[],
            duration_ms=0.0,
        )
        self._publish("rewinds", record.seq, msgspec.to_builtins(result))

    async def _capture_generations(self) -> None:
        """Let every substrate capture each new generation, in seq order."""
        async for seq in self._boundaries_out:
            for substrate in self.coordinator.substrates:
                await substrate.on_generation(seq)

    async def _snapshotter(self) -> None:
        """Cut full snapshots when the replay distance says so (Store.snapshot_due),
        then write the segment index of what it covers (Store.index_due).

        A state no snapshot can hold (from a record an older version
        acknowledged) is logged and skipped: the WAL still covers it.
        """
        store = self.store
        if store.index_due():  # a start that scanned much: do not wait for a write
            self._snapshot_due.set()
        while True:
            await self._snapshot_due.wait()
            self._snapshot_due = trio.Event()
            if store.snapshot_due():
                await self._snapshot()
            if store.index_due():
                # GC never deletes a segment while its index is being written.
                async with self.reads.shared():
                    pending = store.capture_index()
                    done = await trio.to_thread.run_sync(store.write_index, pending)
                    store.index_written(pending, done)
                log.debug("index.written", segments=done, records=pending.records)

    async def _snapshot(self) -> None:
        store = self.store
        try:
            seq, data, covered = store.encode_snapshot()
        except UnencodableState as exc:
            store.snapshot_failed()
            log.error("snapshot.skipped", seq=store.state.seq, error=str(exc))  # noqa: TRY400
            return
        await trio.to_thread.run_sync(store.snapshots.write, data, seq)
        store.snapshot_written(seq, len(data), covered)
        log.debug("snapshot.written", seq=seq, bytes=len(data))

    # -- reads ---------------------------------------------------------------------------

    async def _status(self, params: m.StatusParams, ctx: CallContext) -> m.StatusResult:
        store = self.store
        return m.StatusResult(
            head=store.head,
            branch=store.lineage.branch_of(store.head),
            version=__version__,
            pid=self._pid,
            floor=store.floor,
            state_dir=str(self.state_dir),
            socket=str(ctx.server.socket or ""),
            agents=len(store.state.agents),
            generations=len(store.catalog),
            connections=ctx.server.connections,
            max_connections=ctx.server.max_connections,
            subscriptions=ctx.server.subscriptions,
            # Monotonic: a wall clock stepped back never makes it negative.
            uptime_s=round(time.monotonic() - ctx.server.started_monotonic, 3),
            log=ctx.server.log,
            ambiguous=self.registry.ambiguous(),
            replication=self.shipper.info() if self.shipper else None,
            follow=self.follower.info() if self.follower else None,
            workspace=self.workspace.info() if self.workspace else None,
        )

    async def _generations(self, p: m.GenerationsParams, ctx: CallContext) -> m.GenerationsResult:
        store = self.store
        if (
            p.agent is not None
            and p.agent not in store.state.agents
            and not store.catalog.knows_agent(p.agent)
        ):
            raise errors.UnknownAgent(
                f"no agent {p.agent!r}: see `reynctl show` for agents", {"agent": p.agent}
            )
        out: list[m.Generation] = []
        next_cursor: int | None = None
        it = store.generations(
            agent=p.agent, kind=p.kind, all_branches=p.all_branches, cursor=p.cursor
        )
        for entry, active, branch in it:
            if len(out) == p.limit:
                next_cursor = out[-1].seq
                break
            out.append(
                m.Generation(
                    seq=entry.seq,
                    kind=entry.kind,
                    agent=entry.agent,
                    active=active,
                    branch=branch,
                    created_at=entry.created_at,
                    label=entry.label,
                )
            )
        return m.GenerationsResult(generations=out, next_cursor=next_cursor)

    async def _branches(self, params: m.BranchesParams, ctx: CallContext) -> m.BranchesResult:
        lineage = self.store.lineage
        return m.BranchesResult(
            branches=[
                m.BranchInfo(
                    id=b.id, origin_seq=b.origin_seq, parent=b.parent, tip=b.tip, active=b.active
                )
                for b in lineage.branches()
            ],
            head=lineage.head,
        )

    async def as_of(self, seq: int | None) -> RuntimeState:
        """The state as of `seq` (the tip when None), rebuilt off the event loop if costly."""
        store = self.store
        if seq is None or seq == store.head:
            return store.state
        async with self.reads.shared():  # GC never deletes a file a read is using
            while True:
                plan = store.plan(seq)
                try:
                    if _cheap(plan, store):
                        # Well under a millisecond: less than the thread hop itself.
                        return store.execute(plan)
                    return await trio.to_thread.run_sync(store.execute, plan)
                except CorruptionError as exc:
                    if not plan.snapshot or exc.path != store.snapshots.path(plan.snapshot):
                        raise
                    store.snapshots.discard(plan.snapshot, exc.reason)

    async def _state_get(self, p: m.StateParams, ctx: CallContext) -> m.StateResult | msgspec.Raw:
        head = self.store.head
        if p.agent is None and (p.seq is None or p.seq == head):
            # The hot read (a UI polling the tip): encoded once per head.
            return self._tip_state.get(head, lambda: self._state_result(head, self.store.state))
        seq = head if p.seq is None else p.seq
        state = await self.as_of(seq)
        agents = state.agents
        if p.agent is not None:
            if p.agent not in agents:
                raise errors.UnknownAgent(
                    f"no agent {p.agent!r} as of seq {seq}", {"agent": p.agent, "seq": seq}
                )
            agents = {p.agent: agents[p.agent]}
        return self._state_result(seq, state, agents)

    def _state_result(
        self, seq: int, state: RuntimeState, agents: dict[str, Any] | None = None
    ) -> m.StateResult:
        lineage = self.store.lineage
        return m.StateResult(
            seq=seq,
            active=lineage.is_active(seq),
            branch=lineage.branch_of(seq),
            agents=state.agents if agents is None else agents,
        )

    async def _state_diff(self, p: m.DiffParams, ctx: CallContext) -> m.DiffResult:
        before_state = await self.as_of(p.from_seq)
        after_state = await self.as_of(p.to_seq)
        before = msgspec.to_builtins(before_state.agents)
        after = msgspec.to_builtins(after_state.agents)
        if p.agent is not None:
            if p.agent not in before and p.agent not in after:
                raise errors.UnknownAgent(
                    f"no agent {p.agent!r} as of seq {p.from_seq} or {p.to_seq}", {"agent": p.agent}
                )
            before = {p.agent: before.get(p.agent)} if p.agent in before else {}
            after = {p.agent: after.get(p.agent)} if p.agent in after else {}
        agents: dict[str, list[m.Change]] = {}
        for name in sorted(before.keys() | after.keys()):
            if name not in before:  # born between the two seqs
                changes = [("", "add", None, after[name])]
            elif name not in after:  # not yet born as of to_seq (a diff backwards)
                changes = [("", "remove", before[name], None)]
            else:
                changes = diff_values(before[name], after[name])
            if changes:
                agents[name] = [
                    m.Change(path=path or "/", op=op, before=b, after=a)  # type: ignore[arg-type]
                    for path, op, b, a in changes
                ]
        return m.DiffResult(from_seq=p.from_seq, to_seq=p.to_seq, agents=agents)

    # -- writes --------------------------------------------------------------------------

    async def _rewind(self, p: m.RewindParams, ctx: CallContext) -> m.RewindResult:
        return await self.coordinator.request("rewind", p.seq)

    async def _checkout(self, p: m.CheckoutParams, ctx: CallContext) -> m.RewindResult:
        return await self.coordinator.request("checkout", p.seq, force=p.force)

    async def _wal_append(self, p: m.WalAppendParams, ctx: CallContext) -> m.WalAppendResult:
        event = event_of(p)
        async with self._fenced(p.agent, p.based_on) as store:
            check_applies(store.state, event)
            (durable,) = await self._commit([event])
        return m.WalAppendResult(seq=durable.seq, branch=store.lineage.branch_of(durable.seq))

    async def _wal_append_batch(
        self, p: m.WalAppendBatchParams, ctx: CallContext
    ) -> m.WalAppendBatchResult:
        events = batch_events(p)
        async with self._fenced(p.agent, p.based_on) as store:
            check_batch(store.state, events)
            # One staging, so consecutive seqs (no await between them), one
            # fsync; `atomic` lets recovery drop a batch the crash cut short.
            durable = await self._commit(events, atomic=True)
        seqs = [e.seq for e in durable]
        return m.WalAppendBatchResult(seqs=seqs, branch=store.lineage.branch_of(seqs[-1]))

    @asynccontextmanager
    async def _fenced(self, agent: str, based_on: int | None) -> AsyncIterator[Store]:
        """Hold the write gate and `agent`'s lock, once `based_on` passed the fence."""
        lock = self._agent_locks.setdefault(agent, trio.Lock())
        async with self.gate.shared(), lock:
            self._fence(based_on)
            yield self.store

    def _fence(self, based_on: int | None) -> None:
        """Refuse a write based on a seq a rewind abandoned (stale_branch), or above the tip."""
        if based_on is None:
            return
        store = self.store
        if based_on > store.head:
            raise errors.SeqOutOfRange(
                f"based_on {based_on} is above the tip {store.head}",
                {"based_on": based_on, "head": store.head},
            )
        if not store.lineage.is_active(based_on):
            raise errors.StaleBranch(
                f"based_on seq {based_on} was abandoned by a rewind "
                f"(branch {store.lineage.branch_of(based_on)}); the tip is now "
                f"{store.head} on branch {store.lineage.branch_of(store.head)}: "
                "re-read the state and retry on the new branch",
                {
                    "based_on": based_on,
                    "head": store.head,
                    "branch": store.lineage.branch_of(store.head),
                },
            )


def _record_brief(event: Event, agent: str | None, branch: int) -> dict[str, Any]:
    """The data of a `records` notification: enough to follow a turn without reading it."""
    brief: dict[str, Any] = {"kind": kind_of(event), "agent": agent, "branch": branch}
    turn_id = turn_id_for(event.seq) if isinstance(event, MessageReceived) else None
    turn_id = getattr(event, "turn_id", turn_id)
    if turn_id is not None:
        brief["turn_id"] = turn_id
    step = getattr(event, "step", None)
    if step is not None:
        brief["step"] = step
    return brief


def records_files(event: Event) -> bool:
    """True for the records the workspace's changes go with: a step's commit, a boundary."""
    return isinstance(event, StepCommitted) or boundary_kind(event) is not None


_CHEAP_REPLAY = 128  # records
_CHEAP_SNAPSHOT = 64 * 1024  # bytes


def _cheap(plan: ReplayPlan, store: Store) -> bool:
    """A reconstruct small enough to run on the event loop without hurting latency."""
    snapshot = store.snapshots.sizes.get(plan.snapshot, 0) if plan.snapshot else 0
    return plan.replay_count <= _CHEAP_REPLAY and snapshot <= _CHEAP_SNAPSHOT

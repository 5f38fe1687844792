"""The daemon's composition root: builds the parts that serve the state directory and runs them.

Every part takes the few others it uses (the store, the gates, the
committer, the registry...), never the App: the method handlers live in
their own modules (`*_api.py`, `wal_append.py`, `wal_read.py`), what a
commit sets off is a list of named hooks (commit_hooks.py), and the
background tasks are parts of their own (snapshotter, capture, collector).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import structlog
import trio

from reynd.audit.options import AuditOptions
from reynd.audit.store import EventStore
from reynd.config_store.substrate import ConfigStore
from reynd.core.retention import AgeClock, RetentionPolicy, Sighting
from reynd.daemon.addresses import Addresses
from reynd.daemon.as_of import AsOf
from reynd.daemon.audit_api import AuditApi
from reynd.daemon.capture import GenerationCapture
from reynd.daemon.collector import Collector
from reynd.daemon.commit_hooks import Hooks
from reynd.daemon.committer import Committer, storage_failed
from reynd.daemon.coordinator import Coordinator, Gate
from reynd.daemon.follow import Follow
from reynd.daemon.history_api import HistoryApi
from reynd.daemon.preview import Preview
from reynd.daemon.publisher import Publish, Publisher
from reynd.daemon.read_only import refuse_writes
from reynd.daemon.reflog_api import ReflogApi
from reynd.daemon.reset_api import ResetApi
from reynd.daemon.retention_api import RetentionApi
from reynd.daemon.retention_in_force import RetentionInForce
from reynd.daemon.rpc import Handler
from reynd.daemon.runtime_api import RuntimeApi
from reynd.daemon.scrub import Scrub, guarded
from reynd.daemon.snapshotter import Snapshotter
from reynd.daemon.state_api import StateApi
from reynd.daemon.status_api import StatusApi
from reynd.daemon.tags_api import TagsApi
from reynd.daemon.wal_append import WalAppendApi
from reynd.daemon.wal_read import WalReadApi
from reynd.daemon.workspace_api import WorkspaceApi
from reynd.daemon.writer import Writer
from reynd.protocol import methods as m
from reynd.protocol.events import Event
from reynd.replication.config import ReplicateConfig
from reynd.replication.follower import Follower
from reynd.replication.objects import Location
from reynd.replication.shipper import Shipper
from reynd.runtime import clean_stop
from reynd.runtime.procs import ProcessGroups
from reynd.runtime.registry import AgentRegistry
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store
from reynd.workspace import Workspace, WorkspaceConfig

__all__ = ["App"]

log = structlog.get_logger("reynd.app")


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
        listens: Callable[[str], bool] | None = None,
    ) -> None:
        self._state_dir = state_dir
        self._on_fatal = on_fatal
        self._publish = publish
        self._listens = listens  # Hub.listens: a notice nobody reads is not built
        self._options = options or StorageOptions()
        self._audit_options = audit or AuditOptions()
        self._workspace_config = workspace or WorkspaceConfig()
        self._replicate = replicate or ReplicateConfig()
        self._follow = follow  # a read-only replica of this location
        self._retention = RetentionInForce(retention or RetentionPolicy())
        self._gate = Gate()  # writes share it; a rewind holds it alone
        self._reads = Gate()  # as-of reads share it; GC holds it while it deletes files
        self.store: Store
        self.committer: Committer
        self.failure: Exception | None = None  # one of our tasks died after start-up
        self.shipper: Shipper | None = None  # [replicate], when a url is set
        self.follower: Follower | None = None  # a read-only replica of `follow`
        # Built by _open_storage and _assemble.
        self._scrub: Scrub
        self._audit: EventStore  # the audit log of this run (never read by recovery)
        self._workspace: Workspace | None = None  # workspace rewind, when enabled
        self._handlers: dict[str, Handler]
        self._registry: AgentRegistry
        self._coordinator: Coordinator
        self._config: ConfigStore  # runtime settings + agent configs, in SQLite
        self._snapshotter: Snapshotter
        self._as_of: AsOf
        self._capture: GenerationCapture
        self._collector: Collector

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        clock = await self._open_storage()
        await self._assemble(clock)
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
                    self._registry.fail_waiters(storage_failed(self.committer.failure))
                    self._on_fatal()
                    await trio.sleep_forever()
            except Exception as exc:
                if not serving:
                    raise  # start-up failed: the daemon exits with this error
                await self._task_died(exc)
        finally:
            with trio.CancelScope(shield=True):
                await self._close()

    def handlers(self) -> dict[str, Handler]:
        """Handlers for every method of METHODS except the transport's own (once started)."""
        return self._handlers

    async def _open_storage(self) -> AgeClock:
        """Open the store (recovery) and this run's audit log; the ages for retention."""
        started = time.perf_counter()
        self.store = await trio.to_thread.run_sync(Store.open, self._state_dir, self._options)
        store = self.store
        # What the WAL holds now is aged from this moment by the monotonic clock.
        clock = AgeClock(Sighting(store.head, time.time(), time.monotonic()))
        rec = store.recovery
        log.info(
            "storage.open",
            state_dir=str(self._state_dir),
            head=store.head,
            records=rec.records,
            indexed=rec.indexed,  # taken from segment indexes (state/index/)
            scanned=rec.scanned,  # read and verified one by one
            segments=rec.segments,
            snapshots=len(store.snapshots.seqs),
            torn_bytes=rec.torn_bytes,
            duration_ms=round((time.perf_counter() - started) * 1e3, 1),
        )
        self._scrub = Scrub(store, self._reads)
        self._audit = await trio.to_thread.run_sync(
            lambda: EventStore.open(
                self._state_dir / "events",
                self._audit_options,
                head=store.head,
                branch=store.lineage.branch_of(store.head),
                floor=store.floor,
            )
        )
        return clock

    async def _assemble(self, clock: AgeClock) -> None:
        """Reap a previous daemon's executors, then build the parts that serve the store.

        `clock`: the ages of what the WAL held when the store opened (for GC).
        """
        store = self.store
        # Holding the lock: every recorded executor process is a previous
        # daemon's. Kill the ones still alive before any agent runs a step.
        groups = ProcessGroups(self._state_dir / "state" / "procs")
        await trio.to_thread.run_sync(groups.reap_orphans)
        # What a commit and a reset set off, each hook on its own (filled by _hook).
        on_commit = Hooks[Sequence[Event]]("commit")
        on_reset = Hooks[m.RewindResult]("reset")
        self.committer = Committer(store, on_commit)
        if self._workspace_config.enabled and self._follow is not None:
            # A replica runs no agent and restores nothing: its files are its own.
            log.warning("workspace.ignored_on_replica", reason="a replica never rewinds files")
        elif self._workspace_config.enabled:
            self._workspace = Workspace(self._workspace_config, self._state_dir, store)
        writer = Writer(self.committer, self._gate, self._workspace)
        self._registry = registry = AgentRegistry(store, writer.append, self._publish, groups)
        files = None if self._workspace is None else self._workspace.restoring
        self._coordinator = Coordinator(
            store,
            self.committer,
            self._gate,
            registry.cancel_all,
            on_reset,
            on_abort=registry.restart,
            preview=Preview(store, registry.in_flight, files),
        )
        self._config = ConfigStore(
            self._state_dir, store, self._retention.current, self._retention.use
        )
        substrates = self._coordinator.substrates
        substrates.append(self._config)
        if self._workspace is not None:
            substrates.append(self._workspace)
            self._coordinator.restores_files = True
        publisher = Publisher(store, self._publish, self._listens)
        location = self._replicate.location()
        if self._follow is not None:
            self.follower = Follower(
                self._replicate, self._follow, store, self.committer, publisher.replicated_reset
            )
        elif location is not None:
            self.shipper = Shipper(self._replicate, location, store)
            await self.shipper.open()  # ReplicaRefused: the operator must act
        self._snapshotter = Snapshotter(store, self._reads)
        self._as_of = AsOf(store, self._reads)  # past states for reads, some kept in memory
        self._capture = GenerationCapture(substrates)
        self._collector = Collector(
            store,
            self._retention,
            clock,
            self._reads,
            self._coordinator.serialized,
            workspace=self._workspace,
            shipper=self.shipper,
        )
        self._hook(publisher, on_commit, on_reset)
        self._handlers = self._serve(writer)

    def _hook(
        self,
        publisher: Publisher,
        on_commit: Hooks[Sequence[Event]],
        on_reset: Hooks[m.RewindResult],
    ) -> None:
        """Register what a commit and a reset set off, in the order it runs."""
        store, audit, registry = self.store, self._audit, self._registry
        on_commit.add("publish", publisher.committed)
        on_commit.add("capture", self._capture.committed)  # boundaries to the substrates
        on_commit.add("audit", lambda events: audit.record(events, store.lineage))
        on_commit.add("config", self._config.observe)
        if self._workspace is not None:
            on_commit.add("workspace", self._workspace.committed)
        on_commit.add("registry", registry.on_commit)
        on_commit.add("snapshots", self._snapshotter.committed)
        on_commit.add("as_of", self._as_of.committed)  # a fork of the tip, now and then
        if self.shipper is not None:
            shipper = self.shipper
            on_commit.add("shipper", lambda events: shipper.poke())
        on_reset.add("audit", audit.reset_done)
        on_reset.add("registry", lambda result: registry.restart())
        on_reset.add("publish", publisher.reset)

    def _serve(self, writer: Writer) -> dict[str, Handler]:
        """The method handlers, built once (wal.append's per-agent locks are theirs).

        Each answers storage_corrupt when it meets a damaged record (Scrub);
        a replica's writes are refused (read_only.py).
        """
        store, reads, registry, coordinator = (
            self.store,
            self._reads,
            self._registry,
            self._coordinator,
        )
        as_of = self._as_of.read
        addresses = Addresses(store)  # tags, times and counts back, for moves and reads
        workspace = WorkspaceApi(store, self._workspace, reads, addresses)
        status = StatusApi(
            store,
            self._state_dir,
            registry,
            shipper=self.shipper,
            follower=self.follower,
            workspace=self._workspace,
        )
        retention = RetentionApi(
            store, self._retention, self._collector, self._config.set_retention, self._state_dir
        )
        handlers = {
            **RuntimeApi(registry, store, as_of, coordinator).handlers(),
            **retention.handlers(),
            **AuditApi(self._audit, lambda: store.head).handlers(),
            **WalReadApi(store, reads).handlers(),
            **status.handlers(),
            **HistoryApi(store, addresses).handlers(),
            **ResetApi(coordinator, addresses, partial(Follow, store, registry)).handlers(),
            **ReflogApi(store, reads).handlers(),
            **TagsApi(store, self._gate, writer.commit).handlers(),
            **StateApi(store, as_of, addresses, workspace.files_diff).handlers(),
            **workspace.handlers(),
            **WalAppendApi(store, self._gate, writer.commit).handlers(),
        }
        handlers = {name: guarded(handler, self._scrub) for name, handler in handlers.items()}
        return handlers if self._follow is None else refuse_writes(handlers, self._follow)

    async def _start_tasks(self, nursery: trio.Nursery) -> None:
        """Start the daemon's tasks in `nursery`: substrates before any agent runs."""
        store = self.store
        await nursery.start(self._coordinator.run)
        nursery.start_soon(self._snapshotter.run)
        nursery.start_soon(self._audit.run)
        nursery.start_soon(self._scrub.run)
        # Substrates first: a restore a crash interrupted must finish
        # before any agent runs a turn against the workspace.
        for substrate in self._coordinator.substrates:
            await substrate.start(store.head)
        if self.follower is not None:
            # A replica runs no agent and keeps all it pulls.
            nursery.start_soon(self.follower.run)
        else:
            # Steps a clean stop cut run again; the file is gone (durably)
            # before they do, so a crash in the re-run leaves them ambiguous.
            resume = await trio.to_thread.run_sync(
                clean_stop.take, self._state_dir / "state", store.head, store.state
            )
            await nursery.start(partial(self._registry.run, resume=resume))
            nursery.start_soon(self._collector.run)
        nursery.start_soon(self._capture.run)
        nursery.start_soon(self._config.run)
        if self._workspace is not None:
            nursery.start_soon(self._workspace.run)
        if self.shipper is not None:
            nursery.start_soon(self.shipper.run)

    async def _close(self) -> None:
        """Stop the committer, ship and close the logs, and close the store (shielded)."""
        store = self.store
        await self.committer.stop()
        if self.shipper is not None and self.committer.failure is None:
            # Every append is durable now: ship the last of them.
            await self.shipper.flush(self._replicate.timeout_s)
        await self._audit.aclose(store.head, store.lineage.branch_of(store.head))
        if self.committer.failure is None:
            if self.failure is None:
                # Holding the lock, which close releases. Not after a task
                # died: what the runners were doing is not known for sure,
                # so the steps they cut stay ambiguous, as after a crash.
                await self._save_clean_stop()
            # Every append is durable: the extent file records the head.
            await trio.to_thread.run_sync(partial(store.close, record_head=True))
        self._config.close()
        if self._workspace is not None:
            self._workspace.close()
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
        steps = self._registry.cut_steps()
        head = self.store.head
        try:
            await trio.to_thread.run_sync(clean_stop.save, self._state_dir / "state", head, steps)
        except OSError as exc:
            log.warning("clean_stop.not_saved", error=str(exc), steps=len(steps))
        else:
            if steps:
                log.info("clean_stop.saved", head=head, steps=len(steps))

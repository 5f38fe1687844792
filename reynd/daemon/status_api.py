"""`daemon.status`: the tip, the daemon's figures, and how its optional parts fare."""

from __future__ import annotations

import os
import time
from pathlib import Path

from reynd import __version__
from reynd.daemon.context import CallContext
from reynd.daemon.rpc import Handler
from reynd.protocol import methods as m
from reynd.replication.follower import Follower
from reynd.replication.shipper import Shipper
from reynd.runtime.registry import AgentRegistry
from reynd.storage.store import Store
from reynd.workspace import Workspace

__all__ = ["StatusApi"]


class StatusApi:
    def __init__(
        self,
        store: Store,
        state_dir: Path,
        registry: AgentRegistry,
        *,
        shipper: Shipper | None,
        follower: Follower | None,
        workspace: Workspace | None,
    ) -> None:
        self._store = store
        self._state_dir = state_dir
        self._registry = registry
        self._shipper = shipper
        self._follower = follower
        self._workspace = workspace
        self._pid = os.getpid()  # a system call less per call

    def handlers(self) -> dict[str, Handler]:
        return {"daemon.status": self._status}

    async def _status(self, params: m.StatusParams, ctx: CallContext) -> m.StatusResult:
        store = self._store
        server = ctx.server
        return m.StatusResult(
            head=store.head,
            branch=store.lineage.branch_of(store.head),
            version=__version__,
            pid=self._pid,
            floor=store.floor,
            state_dir=str(self._state_dir),
            socket=str(server.socket or ""),
            agents=len(store.state.agents),
            generations=len(store.catalog),
            connections=server.connections,
            max_connections=server.max_connections,
            subscriptions=server.subscriptions,
            # Monotonic: a wall clock stepped back never makes it negative.
            uptime_s=round(time.monotonic() - server.started_monotonic, 3),
            log=server.log,
            ambiguous=self._registry.ambiguous(),
            replication=self._shipper.info() if self._shipper else None,
            follow=self._follower.info() if self._follower else None,
            workspace=self._workspace.info() if self._workspace else None,
        )

"""The daemon's application: storage, coordinator and the method handlers.

(Stand-in: only daemon.status is wired until the storage core lands.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from reynd import __version__
from reynd.daemon.context import CallContext
from reynd.protocol import methods as m

__all__ = ["App", "Handler"]

Handler = Callable[[Any, CallContext], Awaitable[Any]]


class App:
    """Owns the state directory for the daemon's life.

    `run` opens storage, starts the internal tasks (group-commit writer,
    rewind coordinator), calls task_status.started(), and runs until cancelled;
    on cancellation it closes storage with the last sync shielded.
    """

    def __init__(self, state_dir: Path, publish: Callable[[str, int, dict[str, Any]], None]):
        self.state_dir = state_dir
        self._publish = publish

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    def handlers(self) -> dict[str, Handler]:
        """Handlers for every method of METHODS except the transport's own."""
        return {"daemon.status": self._status}

    async def _status(self, params: m.StatusParams, ctx: CallContext) -> m.StatusResult:
        return m.StatusResult(
            head=0,
            branch=0,
            version=__version__,
            pid=os.getpid(),
            state_dir=str(self.state_dir),
            socket=str(ctx.server.socket or ""),
            connections=ctx.server.connections,
            uptime_s=time.time() - ctx.server.started_at,
        )

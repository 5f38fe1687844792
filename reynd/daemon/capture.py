"""Hands each new generation to the substrates to capture, in seq order, off the commit path.

A boundary record's commit only queues its seq (unbounded: a slow capture
must never block a commit); one task feeds the substrates (daemon/hooks.py:
`on_generation`), one seq at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import trio

from reynd.daemon.hooks import Substrate
from reynd.protocol.events import Event, boundary_kind

__all__ = ["GenerationCapture"]


class GenerationCapture:
    """The queue of boundary seqs between the commit path and the substrates."""

    def __init__(self, substrates: Sequence[Substrate]) -> None:
        """`substrates`: read at each commit and each capture (the daemon fills it at start)."""
        self._substrates = substrates
        self._send, self._receive = trio.open_memory_channel[int](math.inf)

    def committed(self, events: Sequence[Event]) -> None:
        """Queue the boundary records among `events` (a commit hook)."""
        if not self._substrates:
            return
        for event in events:
            if boundary_kind(event) is not None:
                self._send.send_nowait(event.seq)

    async def run(self) -> None:
        """Let every substrate capture each queued generation, in seq order."""
        async for seq in self._receive:
            for substrate in self._substrates:
                await substrate.on_generation(seq)

"""`wal.read`: one agent's records on the active lineage, above what a reader already holds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import trio

from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.rpc import Handler
from reynd.protocol import errors
from reynd.protocol.events import AgentEvent
from reynd.protocol.read_methods import WalReadParams, WalReadResult
from reynd.storage.store import Store

__all__ = ["WalReadApi"]

# Below this many records to scan the read runs on the event loop (cheaper than the thread hop).
_CHEAP = 256


class WalReadApi:
    def __init__(self, store: Store, reads: Gate) -> None:
        """`reads`: the read gate, shared while segments are read (GC deletes under it alone)."""
        self._store = store
        self._reads = reads

    def handlers(self) -> dict[str, Handler]:
        return {"wal.read": self._read}

    async def _read(self, p: WalReadParams, ctx: CallContext) -> WalReadResult:
        store = self._store
        head = store.head
        if p.since > head:
            raise errors.SeqOutOfRange(
                f"since {p.since} is above the tip {head}", {"since": p.since, "head": head}
            )
        lineage = store.lineage
        common = lineage.common(head, p.since)
        agent = store.state.agents.get(p.agent)
        # No agent at the tip: none of its records is on the active lineage. An
        # agent is created once per lineage, so nothing of it lies below that.
        lo = head + 1 if agent is None else max(common + 1, agent.created_seq, store.floor)
        # Ascending, clipped: the active lineage is fixed for this call (captured on the loop).
        spans = [(max(a, lo), b) for a, b in lineage.active_intervals() if b >= lo]
        async with self._reads.shared():  # GC never deletes a segment a read uses
            if sum(b - a + 1 for a, b in spans) <= _CHEAP:
                events, upto, more = _collect(store, spans, p.agent, p.limit, head)
            else:
                events, upto, more = await trio.to_thread.run_sync(
                    _collect, store, spans, p.agent, p.limit, head
                )
        return WalReadResult(
            head=head,
            branch=lineage.branch_of(head),
            common=common,
            upto=upto,
            events=events,
            more=more,
        )


def _collect(
    store: Store, spans: list[tuple[int, int]], agent: str, limit: int, head: int
) -> tuple[list[dict[str, Any]], int, bool]:
    """The agent's records in `spans`, at most `limit`: (events, last seq covered, more)."""
    out: list[dict[str, Any]] = []
    for event in _records(store, spans):
        if isinstance(event, AgentEvent) and event.agent == agent:
            if len(out) == limit:
                return out, out[-1]["seq"], True
            out.append(msgspec.to_builtins(event))
    return out, head, False


def _records(store: Store, spans: list[tuple[int, int]]) -> Iterator[Any]:
    for a, b in spans:
        if a <= b:
            yield from store.wal.read(a, b)

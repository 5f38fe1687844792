"""`wal.read`: one agent's records on the active lineage, above what a reader already holds;
`wal.get`: some of them, by seq."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import msgspec
import trio

from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.rpc import Handler
from reynd.protocol import errors
from reynd.protocol.events import AgentEvent
from reynd.protocol.read_methods import WalGetParams, WalGetResult, WalReadParams, WalReadResult
from reynd.storage.store import Store

__all__ = ["WalReadApi"]

# Below this many records to scan the read runs on the event loop (cheaper than the thread hop).
_CHEAP = 256
# Below this many bytes to search, a `having` read runs on the event loop too (a short
# thread's search takes well under a millisecond; the hop to a worker and back costs
# two wake-ups, several milliseconds on a loaded machine).
_CHEAP_SEARCH = 1 << 20


class WalReadApi:
    def __init__(self, store: Store, reads: Gate) -> None:
        """`reads`: the read gate, shared while segments are read (GC deletes under it alone)."""
        self._store = store
        self._reads = reads

    def handlers(self) -> dict[str, Handler]:
        return {"wal.read": self._read, "wal.get": self._get}

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
        if p.turn is not None and agent is not None:
            chain = next((c for c in agent.pending_chains if c.turn_id == p.turn), None)
            lo = head + 1 if chain is None else max(lo, chain.started_seq)
        # Ascending, clipped: the active lineage is fixed for this call (captured on the loop).
        spans = [(max(a, lo), b) for a, b in lineage.active_intervals() if b >= lo]
        async with self._reads.shared():  # GC never deletes a segment a read uses
            needles = [msgspec.json.encode(n) for n in p.having]
            collect = partial(_collect, store, spans, p.agent, p.limit, head, needles=needles)
            # A search costs its bytes (a scan in C), a plain read its records (each decoded).
            if (
                sum(store.wal.span_bytes(a, b) for a, b in spans if a <= b) <= _CHEAP_SEARCH
                if needles
                else sum(b - a + 1 for a, b in spans) <= _CHEAP
            ):
                events, upto, more = collect()
            else:
                events, upto, more = await trio.to_thread.run_sync(collect)
        return WalReadResult(
            head=head,
            branch=lineage.branch_of(head),
            common=common,
            upto=upto,
            events=events,
            more=more,
        )

    async def _get(self, p: WalGetParams, ctx: CallContext) -> WalGetResult:
        store = self._store
        head = store.head
        if p.seqs and max(p.seqs) > head:
            raise errors.SeqOutOfRange(
                f"seq {max(p.seqs)} is above the tip {head}", {"seq": max(p.seqs), "head": head}
            )
        agent = store.state.agents.get(p.agent)
        lo = head + 1 if agent is None else max(agent.created_seq, store.floor)
        # The wanted seqs on the active lineage, as runs of consecutive seqs (one read each).
        active = store.lineage.active_intervals()
        wanted = sorted({s for s in p.seqs if s >= lo and any(a <= s <= b for a, b in active)})
        spans: list[tuple[int, int]] = []
        for s in wanted:
            if spans and spans[-1][1] == s - 1:
                spans[-1] = (spans[-1][0], s)
            else:
                spans.append((s, s))
        collect = partial(_collect, store, spans, p.agent, len(wanted) + 1, head)
        async with self._reads.shared():
            if len(wanted) <= _CHEAP:
                events, _, _ = collect()
            else:
                events, _, _ = await trio.to_thread.run_sync(collect)
        return WalGetResult(head=head, events=events)


def _collect(
    store: Store,
    spans: list[tuple[int, int]],
    agent: str,
    limit: int,
    head: int,
    *,
    needles: Sequence[bytes] = (),
) -> tuple[list[dict[str, Any]], int, bool]:
    """The agent's records in `spans` (those holding a needle, when there are any), at most
    `limit`: (events, last seq covered, more)."""
    out: list[dict[str, Any]] = []
    for event in _records(store, spans, needles):
        if isinstance(event, AgentEvent) and event.agent == agent:
            if len(out) == limit:
                return out, out[-1]["seq"], True
            out.append(msgspec.to_builtins(event))
    return out, head, False


def _records(store: Store, spans: list[tuple[int, int]], needles: Sequence[bytes]) -> Iterator[Any]:
    for a, b in spans:
        if a <= b:
            yield from store.wal.read_having(a, b, needles) if needles else store.wal.read(a, b)

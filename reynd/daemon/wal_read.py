"""`wal.read`: one agent's records on the active lineage, above what a reader already holds;
`wal.get`: some of them, by seq."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any, NamedTuple

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

# A read within both runs on the event loop: cheaper than the hop to a worker thread and
# back (two wake-ups, milliseconds on a loaded machine). A read decodes each record of its
# spans; a search scans their bytes in C (a short thread's in well under a millisecond)
# and decodes only what it finds.
_CHEAP_RECORDS = 256
_CHEAP_BYTES = 1 << 20


class _Where(NamedTuple):
    """Where an agent's records may be, captured on the event loop: a read on a worker
    thread never looks at the store's live lineage (a rewind may change it meanwhile)."""

    lo: int  # its creation, or the WAL's floor
    head: int
    active: list[tuple[int, int]]  # the active lineage, ascending


def _where(store: Store, agent: str, head: int) -> _Where:
    # No agent at the tip: none of its records is on the active lineage (lo is past the
    # tip). An agent is created once per lineage, so nothing of it lies below that.
    state = store.state.agents.get(agent)
    lo = head + 1 if state is None else max(state.created_seq, store.floor)
    return _Where(lo, head, store.lineage.active_intervals())


def _cheap(store: Store, spans: list[tuple[int, int]], *, search: bool = False) -> bool:
    """Whether reading `spans` (searching them, with `search`) may run on the event loop."""
    if not search and sum(b - a + 1 for a, b in spans) > _CHEAP_RECORDS:
        return False
    return sum(store.wal.span_bytes(a, b) for a, b in spans if a <= b) <= _CHEAP_BYTES


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
        where = _where(store, p.agent, head)
        lo = max(common + 1, where.lo)
        agent = store.state.agents.get(p.agent)
        if p.turn is not None and agent is not None:
            chain = next((c for c in agent.pending_chains if c.turn_id == p.turn), None)
            lo = head + 1 if chain is None else max(lo, chain.started_seq)
            if p.since and (chain is None or chain.started_seq > p.since):
                # What the reader holds is of a life of the turn that has ended since
                # (closed, or closed and opened again between two pages): it drops it all.
                common = 0
        # Ascending, clipped: the active lineage is fixed for this call (captured on the loop).
        spans = [(max(a, lo), b) for a, b in where.active if b >= lo]
        async with self._reads.shared():  # GC never deletes a segment a read uses
            needles = [msgspec.json.encode(n) for n in p.having]

            def run(on_loop: bool) -> tuple[list[dict[str, Any]], int, bool, list[dict[str, Any]]]:
                events, upto, more = _collect(store, spans, p.agent, p.limit, head, needles=needles)
                needed = (
                    _needed(store, p.agent, events, where, limit=p.limit, on_loop=on_loop)
                    if p.need
                    else []
                )
                return events, upto, more, needed

            if _cheap(store, spans, search=bool(needles)):
                events, upto, more, needed = run(True)
            else:
                events, upto, more, needed = await trio.to_thread.run_sync(run, False)
        return WalReadResult(
            head=head,
            branch=lineage.branch_of(head),
            common=common,
            upto=upto,
            events=events,
            more=more,
            needed=needed,
        )

    async def _get(self, p: WalGetParams, ctx: CallContext) -> WalGetResult:
        store = self._store
        head = store.head
        if p.seqs and max(p.seqs) > head:
            raise errors.SeqOutOfRange(
                f"seq {max(p.seqs)} is above the tip {head}", {"seq": max(p.seqs), "head": head}
            )
        spans, count = _seq_spans(_where(store, p.agent, head), p.seqs)
        collect = partial(_collect, store, spans, p.agent, count + 1, head)
        async with self._reads.shared():
            if _cheap(store, spans):
                events, _, _ = collect()
            else:
                events, _, _ = await trio.to_thread.run_sync(collect)
        return WalGetResult(head=head, events=events)


def _seq_spans(where: _Where, seqs: Iterable[int]) -> tuple[list[tuple[int, int]], int]:
    """The wanted seqs that may be the agent's on the active lineage, as runs of consecutive
    seqs (one read each), and how many they are."""
    active = where.active
    wanted = sorted(
        {s for s in seqs if where.lo <= s <= where.head and any(a <= s <= b for a, b in active)}
    )
    spans: list[tuple[int, int]] = []
    for s in wanted:
        if spans and spans[-1][1] == s - 1:
            spans[-1] = (spans[-1][0], s)
        else:
            spans.append((s, s))
    return spans, len(wanted)


def _needed(
    store: Store,
    agent: str,
    events: list[dict[str, Any]],
    where: _Where,
    *,
    limit: int,
    on_loop: bool,
) -> list[dict[str, Any]]:
    """The records `events` say they need (wal.read's `need`), not among them. On the event
    loop (`on_loop`), only those that are cheap to read there: the reader fetches the rest
    with wal.get, which goes to a worker thread."""
    have = {e["seq"]: e for e in events}
    refs = {r for e in events if isinstance(r := (e.get("input") or {}).get("need_of"), int)}
    fetch = partial(_by_seqs, store, agent, where, limit=limit, on_loop=on_loop)
    fetched = fetch(refs - have.keys())
    want: set[int] = set()
    for e in [*events, *(fetched.get(r) or have.get(r) or {} for r in refs)]:
        want.update(_listed(e))
    fetched.update(fetch(want - have.keys() - fetched.keys()))
    return [fetched[s] for s in sorted(fetched)][:limit]


def _by_seqs(
    store: Store,
    agent: str,
    where: _Where,
    seqs: Iterable[int],
    *,
    limit: int,
    on_loop: bool,
) -> dict[int, dict[str, Any]]:
    spans, _ = _seq_spans(where, seqs)
    if on_loop and not _cheap(store, spans):
        return {}
    got, _, _ = _collect(store, spans, agent, limit, where.head)
    return {e["seq"]: e for e in got}


def _listed(event: dict[str, Any]) -> list[int]:
    """The seqs a record's `input.need` lists (gaps undone); none when it lists none."""
    need = (event.get("input") or {}).get("need")
    if not isinstance(need, list) or not all(type(n) is int for n in need):
        return []
    return list(itertools.accumulate(need))


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

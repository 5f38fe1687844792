"""`reflog.list`: every move of the tip, newest first, read from its reset record (issue 24).

Derived from the WAL, never from the audit log (which is not synced): the
lineage lists the reset records, and each one on this page is read back by
its seq. A record retention collected is told from what `state/retained`
keeps of it (seq and target), marked `collected`.
"""

from __future__ import annotations

import trio

from reynd.core import reflog
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.rpc import Handler
from reynd.protocol import events as ev
from reynd.protocol.moves import ReflogEntry, ReflogParams, ReflogResult
from reynd.storage.store import Store

__all__ = ["ReflogApi"]


class ReflogApi:
    def __init__(self, store: Store, reads: Gate) -> None:
        """`reads`: the read gate, shared while records are read (GC deletes under it alone)."""
        self._store = store
        self._reads = reads

    def handlers(self) -> dict[str, Handler]:
        return {"reflog.list": self._list}

    async def _list(self, p: ReflogParams, ctx: CallContext) -> ReflogResult:
        store = self._store
        # One more than a page says whether there is a next one.
        page = store.lineage.newest_resets(p.cursor, p.limit + 1)
        more = len(page) > p.limit
        page = page[: p.limit]
        async with self._reads.shared():
            entries = await trio.to_thread.run_sync(_entries, store, page)
        return ReflogResult(entries=entries, next_cursor=page[-1][0] if more else None)


def _entries(store: Store, page: list[tuple[int, int]]) -> list[ReflogEntry]:
    """The entries of reset records `page` (seq, target), newest first (blocking reads)."""
    lineage, floor = store.lineage, store.floor
    out = []
    for seq, target in page:
        if seq < floor:
            out.append(reflog.collected_entry(lineage, seq, target))
            continue
        (record,) = store.wal.read(seq, seq)
        assert isinstance(record, ev.Rewind)
        out.append(reflog.entry_of(lineage, record))
    return out

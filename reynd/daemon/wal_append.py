"""`wal.append` and `wal.append_batch`: an outside runtime's records, fenced against the tip.

Each append holds the write gate (shared) and its agent's lock while it
checks `based_on` (the fence), checks that the records apply to the tip's
state, and appends: a reset record cannot slip in between (docs/design.md,
Gates), nor another append of the same agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from reynd.daemon.appends import batch_events, check_applies, check_batch, event_of
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.keyed_lock import KeyedLock
from reynd.daemon.rpc import Handler
from reynd.daemon.writer import Commit
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.storage.store import Store

__all__ = ["WalAppendApi"]


class WalAppendApi:
    def __init__(self, store: Store, gate: Gate, commit: Commit) -> None:
        """`commit`: appends durably under the write gate (Writer.commit)."""
        self._store = store
        self._gate = gate
        self._commit = commit
        self._agent_locks = KeyedLock()

    def handlers(self) -> dict[str, Handler]:
        return {"wal.append": self._append, "wal.append_batch": self._append_batch}

    async def _append(self, p: m.WalAppendParams, ctx: CallContext) -> m.WalAppendResult:
        event = event_of(p)
        # What `_fenced` does, spelled out: the one append per request of a
        # writer runs it, and its context managers cost more than the checks.
        store = self._store
        await self._gate.enter_shared()
        try:
            await self._agent_locks.acquire(p.agent)
            try:
                self._fence(p.based_on)
                check_applies(store.state, event)
                (durable,) = await self._commit([event])
            finally:
                self._agent_locks.release(p.agent)
        finally:
            self._gate.leave_shared()
        return m.WalAppendResult(seq=durable.seq, branch=store.lineage.branch_of(durable.seq))

    async def _append_batch(
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
        async with self._gate.shared():
            await self._agent_locks.acquire(agent)
            try:
                self._fence(based_on)
                yield self._store
            finally:
                self._agent_locks.release(agent)

    def _fence(self, based_on: int | None) -> None:
        """Refuse a write based on a seq a rewind abandoned (stale_branch), or above the tip."""
        if based_on is None:
            return
        store = self._store
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

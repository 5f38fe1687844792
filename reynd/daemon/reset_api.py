"""`rewind`, `checkout` and `undo`: queued to the coordinator, which runs one reset at a time."""

from __future__ import annotations

from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator
from reynd.daemon.rpc import Handler
from reynd.daemon.tags_api import seq_or_tag
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.moves import UndoParams
from reynd.storage.store import ResetNote, Store

__all__ = ["ResetApi", "reset_note"]


def reset_note(ctx: CallContext, reason: str) -> ResetNote:
    """What the reset record keeps of the call: its reason, and who made it (issue 24)."""
    peer = ctx.peer
    return ResetNote(
        reason=reason,
        uid=None if peer is None else peer.uid,
        pid=None if peer is None else peer.pid,
        client=ctx.client,
    )


def _target(store: Store | None, seq: int | None, tag: str | None) -> int:
    """The seq a move goes to: `seq`, or what `tag` names (exactly one of them)."""
    if store is None or tag is None:
        if seq is None:
            why = "`seq` is required (or `tag`, naming it): where to go"
            raise errors.InvalidParams(why, {"field": "seq", "reason": why})
        return seq
    target = seq_or_tag(store, seq, tag)
    assert target is not None
    return target


class ResetApi:
    def __init__(self, coordinator: Coordinator, store: Store | None = None) -> None:
        """`store`: where `tag` params are resolved (None: the methods take seqs only)."""
        self._coordinator = coordinator
        self._store = store

    def handlers(self) -> dict[str, Handler]:
        return {"rewind": self._rewind, "checkout": self._checkout, "undo": self._undo}

    async def _rewind(self, p: m.RewindParams, ctx: CallContext) -> m.RewindResult:
        target = _target(self._store, p.seq, p.tag)
        return await self._coordinator.request("rewind", target, note=reset_note(ctx, p.reason))

    async def _checkout(self, p: m.CheckoutParams, ctx: CallContext) -> m.RewindResult:
        target = _target(self._store, p.seq, p.tag)
        note = reset_note(ctx, p.reason)
        return await self._coordinator.request("checkout", target, force=p.force, note=note)

    async def _undo(self, p: UndoParams, ctx: CallContext) -> m.RewindResult:
        return await self._coordinator.undo(p.steps, reset_note(ctx, p.reason))

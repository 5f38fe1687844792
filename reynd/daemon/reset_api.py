"""`rewind`, `checkout` and `undo`: queued to the coordinator, which runs one reset at a time."""

from __future__ import annotations

from reynd.daemon.addresses import Addresses
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator
from reynd.daemon.rpc import Handler
from reynd.protocol import methods as m
from reynd.protocol.moves import UndoParams
from reynd.storage.store import ResetNote

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


class ResetApi:
    def __init__(self, coordinator: Coordinator, addresses: Addresses) -> None:
        self._coordinator = coordinator
        self._addresses = addresses

    def handlers(self) -> dict[str, Handler]:
        return {"rewind": self._rewind, "checkout": self._checkout, "undo": self._undo}

    async def _rewind(self, p: m.RewindParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.rewind(p)
        note = reset_note(ctx, p.reason)
        return await self._coordinator.request("rewind", address, note=note)

    async def _checkout(self, p: m.CheckoutParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.checkout(p)
        note = reset_note(ctx, p.reason)
        return await self._coordinator.request("checkout", address, force=p.force, note=note)

    async def _undo(self, p: UndoParams, ctx: CallContext) -> m.RewindResult:
        return await self._coordinator.undo(p.steps, reset_note(ctx, p.reason))

"""`rewind`, `checkout` and `undo`: queued to the coordinator, which runs one reset at a time."""

from __future__ import annotations

from collections.abc import Callable

from reynd.daemon.addresses import Address, Addresses
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator
from reynd.daemon.follow import Follow
from reynd.daemon.rpc import Handler
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.moves import UndoParams
from reynd.storage.store import ResetNote, ResetOp

__all__ = ["FollowMaker", "ResetApi", "reset_note"]

FollowMaker = Callable[[a.AgentsSendParams | None, m.Reapply | None, int | None], Follow]


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
    def __init__(self, coordinator: Coordinator, addresses: Addresses, follow: FollowMaker) -> None:
        """`follow`: makes what a move appends after its reset record (`then`, `reapply`)."""
        self._coordinator = coordinator
        self._addresses = addresses
        self._follow = follow

    def handlers(self) -> dict[str, Handler]:
        return {"rewind": self._rewind, "checkout": self._checkout, "undo": self._undo}

    async def _rewind(self, p: m.RewindParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.rewind(p)
        return await self._move("rewind", address, p, ctx)

    async def _checkout(self, p: m.CheckoutParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.checkout(p)
        return await self._move("checkout", address, p, ctx, force=p.force)

    async def _move(
        self,
        op: ResetOp,
        address: Address,
        p: m.RewindParams | m.CheckoutParams,
        ctx: CallContext,
        *,
        force: bool = False,
    ) -> m.RewindResult:
        follow = None
        if p.then is not None or p.reapply is not None:
            follow = self._follow(p.then, p.reapply, p.replaces)
        result = await self._coordinator.request(
            op,
            address,
            force=force,
            note=reset_note(ctx, p.reason),
            then=follow,
            dry_run=p.dry_run,
            only=p.only,
        )
        return result if follow is None else await follow.answer(result)

    async def _undo(self, p: UndoParams, ctx: CallContext) -> m.RewindResult:
        follow = None if p.then is None else self._follow(p.then, None, None)
        note = reset_note(ctx, p.reason)
        result = await self._coordinator.undo(p.steps, note, then=follow, dry_run=p.dry_run)
        return result if follow is None else await follow.answer(result)

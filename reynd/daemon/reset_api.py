"""`rewind`, `checkout` and `undo`: queued to the coordinator, which runs one reset at a time."""

from __future__ import annotations

import msgspec

from reynd.daemon.addresses import Address, Addresses
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator
from reynd.daemon.rpc import Handler
from reynd.protocol import agent_methods as a
from reynd.protocol import events as ev
from reynd.protocol import methods as m
from reynd.protocol.moves import UndoParams
from reynd.protocol.state import RuntimeState
from reynd.runtime.registry import AgentRegistry
from reynd.storage.store import ResetNote, ResetOp

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


class _Then:
    """A move's `then` (issue 25): the message delivered right after the reset record.

    Made in the coordinator for the state as of the target (an agent that does
    not exist there is refused, before anything is written), appended in the
    reset record's atomic batch, then answered as agents.send answers.
    """

    def __init__(self, registry: AgentRegistry, p: a.AgentsSendParams) -> None:
        self._registry = registry
        self._p = p
        self._record: ev.MessageReceived | None = None

    def records(self, state: RuntimeState) -> list[ev.Event]:
        self._record = self._registry.message(self._p.agent, self._p.text, state)
        return [self._record]

    async def answer(self, result: m.RewindResult) -> m.RewindResult:
        assert self._record is not None  # the reset is durable, so its batch was made
        # Staged right after the reset record, in one staging: the next seq.
        durable = msgspec.structs.replace(self._record, seq=result.reset_seq + 1)
        result.sent = await self._registry.delivered(
            durable, wait=self._p.wait, wait_seconds=self._p.timeout
        )
        return result


class ResetApi:
    def __init__(
        self, coordinator: Coordinator, addresses: Addresses, registry: AgentRegistry
    ) -> None:
        self._coordinator = coordinator
        self._addresses = addresses
        self._registry = registry

    def handlers(self) -> dict[str, Handler]:
        return {"rewind": self._rewind, "checkout": self._checkout, "undo": self._undo}

    async def _rewind(self, p: m.RewindParams, ctx: CallContext) -> m.RewindResult:
        return await self._move("rewind", self._addresses.rewind(p), p.then, ctx, p.reason)

    async def _checkout(self, p: m.CheckoutParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.checkout(p)
        return await self._move("checkout", address, p.then, ctx, p.reason, force=p.force)

    async def _move(
        self,
        op: ResetOp,
        address: Address,
        then: a.AgentsSendParams | None,
        ctx: CallContext,
        reason: str,
        *,
        force: bool = False,
    ) -> m.RewindResult:
        follow = None if then is None else _Then(self._registry, then)
        result = await self._coordinator.request(
            op,
            address,
            force=force,
            note=reset_note(ctx, reason),
            then=None if follow is None else follow.records,
        )
        return result if follow is None else await follow.answer(result)

    async def _undo(self, p: UndoParams, ctx: CallContext) -> m.RewindResult:
        return await self._coordinator.undo(p.steps, reset_note(ctx, p.reason))

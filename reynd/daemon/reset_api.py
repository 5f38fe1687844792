"""`rewind` and `checkout`: queued to the coordinator, which runs one reset at a time."""

from __future__ import annotations

from reynd.daemon.addresses import Addresses
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator
from reynd.daemon.rpc import Handler
from reynd.protocol import methods as m

__all__ = ["ResetApi"]


class ResetApi:
    def __init__(self, coordinator: Coordinator, addresses: Addresses) -> None:
        self._coordinator = coordinator
        self._addresses = addresses

    def handlers(self) -> dict[str, Handler]:
        return {"rewind": self._rewind, "checkout": self._checkout}

    async def _rewind(self, p: m.RewindParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.rewind(p)
        return address.stamp(await self._coordinator.request("rewind", address.resolve))

    async def _checkout(self, p: m.CheckoutParams, ctx: CallContext) -> m.RewindResult:
        address = self._addresses.checkout(p)
        result = await self._coordinator.request("checkout", address.resolve, force=p.force)
        return address.stamp(result)

"""What a move appends right after its reset record, in the same atomic batch (issue 25).

`then`: a new message (edit and retry). `reapply` "messages": every message
received on the branch the move abandons (lineage(head) above its common
ancestor with the target), delivered again in their order, with the same
id, text and sender, but the one `then` replaces (`replaces`, an edit).
Both are made in the coordinator, for the state as of the target, before any
turn is cancelled: a message to an agent that does not exist there is
refused with nothing written. Their seqs follow the reset record's, in this
order: `then`'s first, then the reapplied ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import trio

from reynd.daemon.preview import records_in
from reynd.protocol import agent_methods as a
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol import methods as m
from reynd.runtime.registry import AgentRegistry
from reynd.storage.batch import Rebuilt
from reynd.storage.store import Store

__all__ = ["Follow"]


class Follow:
    """The records after a reset record, and the result fields that say where they went."""

    def __init__(
        self,
        store: Store,
        registry: AgentRegistry,
        then: a.AgentsSendParams | None,
        reapply: m.Reapply | None,
        replaces: int | None = None,
    ) -> None:
        """`replaces`: the seq of the message `then` supersedes (an edit): not reapplied."""
        self._store = store
        self._registry = registry
        self._then = then
        self._reapply = reapply
        self._replaces = replaces
        self._sent: ev.MessageReceived | None = None
        self._old: list[ev.MessageReceived] = []

    async def records(self, rebuilt: Rebuilt) -> Sequence[ev.Event]:
        """The records to stage after the reset record to `rebuilt.target`."""
        out: list[ev.Event] = []
        if self._then is not None:
            self._sent = self._registry.message(self._then.agent, self._then.text, rebuilt.state)
            out.append(self._sent)
        if self._replaces is not None:
            await trio.to_thread.run_sync(self._check_replaced, self._replaces)
        if self._reapply == "messages":
            # Reads the log: off the event loop (the write gate is held, the log stands still).
            abandoned = await trio.to_thread.run_sync(self._abandoned_messages, rebuilt.target)
            # The edit supersedes the message it replaces: not delivered again.
            self._old = [o for o in abandoned if o.seq != self._replaces]
            out.extend(self._registry.redelivery(old, rebuilt.state) for old in self._old)
        return out

    def _check_replaced(self, seq: int) -> None:
        """Refuse a `replaces` that names no received message (a typo must not pass silently)."""
        wal = self._store.wal
        found = wal.read(seq, seq) if wal.first_seq <= seq <= self._store.head else []
        if not any(isinstance(e, ev.MessageReceived) for e in found):
            raise errors.InvalidParams(
                f"`replaces` names seq {seq}, which is not a received message "
                "(a message.received record still kept): give the seq of the message "
                "`then` supersedes, or leave `replaces` out",
                {"replaces": seq},
            )

    def _abandoned_messages(self, target: int) -> list[ev.MessageReceived]:
        leaving = self._store.lineage.leaving(target)
        found = records_in(self._store, leaving, {"message.received"})
        return [e for e in found if isinstance(e, ev.MessageReceived)]

    def stamp(self, result: m.RewindResult) -> None:
        """`result`'s `sent` (not waited for yet) and `reapplied`, before subscribers hear of it."""
        first = result.reset_seq + 1  # staged right after the reset record, in one staging
        if self._sent is not None:
            self._sent = msgspec.structs.replace(self._sent, seq=first)
            result.sent = self._registry.delivery(self._sent)
        start = first if self._sent is None else first + 1
        result.reapplied = [
            m.Redelivered(agent=o.agent, message_id=o.message_id, from_seq=o.seq, seq=start + i)
            for i, o in enumerate(self._old)
        ]

    async def answer(self, result: m.RewindResult) -> m.RewindResult:
        """`result` once `then`'s turn ended, with `then.wait` (as agents.send waits)."""
        if self._then is not None and self._then.wait and self._sent is not None:
            result.sent = await self._registry.delivered(
                self._sent, wait=True, wait_seconds=self._then.timeout
            )
        return result

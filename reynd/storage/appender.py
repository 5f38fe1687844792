"""What the parts above storage need of the daemon's group commit, as protocols.

In a running daemon every append goes through one committer
(daemon/committer.py; docs/durability.md rule 6). The workspace substrate and
the replication follower append through it too, but they sit below the
daemon in the order of imports (docs/design.md): they take these protocols,
which the Committer satisfies, and import nothing of `reynd.daemon`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from reynd.protocol.events import Event
from reynd.storage.batch import Rebuilt, Staged

__all__ = ["Appender", "ReplicaAppender", "Ticket", "TicketT"]


class Ticket(Protocol):
    """An append staged (seqs assigned) and queued, not yet durable."""

    @property
    def staged(self) -> Staged: ...


TicketT = TypeVar("TicketT", bound=Ticket)


class Appender(Protocol[TicketT]):
    """Stage and queue an append now, wait for its durability later."""

    def enqueue(
        self, events: Sequence[Event], rebuilt: Rebuilt | None = None, *, atomic: bool = False
    ) -> TicketT:
        """Stage `events` (seqs assigned in queue order) and queue them.

        No checkpoint may come between this call and `wait`: the queue's order
        is the seqs' order.
        """
        ...

    async def wait(self, queued: TicketT) -> list[Event]:
        """Until the events of `queued` are durable; returns them with their seqs."""
        ...


class ReplicaAppender(Protocol):
    """Append records another daemon wrote, byte for byte (a follower's path)."""

    async def append_replicated(
        self, frames: Sequence[bytes], rebuilt: Rebuilt | None
    ) -> list[Event]:
        """Append `frames` durably; `rebuilt`: the state a reset record among them leads to."""
        ...

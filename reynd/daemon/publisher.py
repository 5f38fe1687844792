"""What subscribers are told of the log: topics `records`, `generations`, `agents`, `rewinds`.

Called on the commit path (a commit hook) and after each reset; the hub
queues each notice without waiting (daemon/hub.py), so a slow subscriber
never holds a commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from reynd.core.reflog import by_of
from reynd.protocol import methods as m
from reynd.protocol.events import (
    AgentCreated,
    AgentEvent,
    Event,
    MessageReceived,
    Rewind,
    boundary_kind,
    kind_of,
)
from reynd.runtime.agent import turn_id_for
from reynd.storage.store import Store

__all__ = ["Publish", "Publisher"]

# Hub.publish: topic, seq, data.
Publish = Callable[[str, int, dict[str, Any]], None]
# What `committed` may publish.
_COMMIT_TOPICS = ("records", "generations", "agents")


class Publisher:
    """Turns durable records and resets into notifications."""

    def __init__(
        self, store: Store, publish: Publish, listens: Callable[[str], bool] | None = None
    ) -> None:
        """`listens(topic)`: someone is subscribed to it (None: assume so)."""
        self._store = store
        self._publish = publish
        self._listens = listens

    def committed(self, events: Sequence[Event]) -> None:
        """`records` for each record; `generations` for a boundary; `agents` for a creation."""
        listens = self._listens
        if listens is not None and not any(map(listens, _COMMIT_TOPICS)):
            return  # nobody to tell: no notice built (a commit hook, on every batch)
        lineage = self._store.lineage
        for event in events:
            agent = event.agent if isinstance(event, AgentEvent) else None
            branch = lineage.branch_of(event.seq)
            self._publish("records", event.seq, _record_brief(event, agent, branch))
            kind = boundary_kind(event)
            if kind is not None:
                entry = self._store.catalog.at(event.seq)
                self._publish(
                    "generations",
                    event.seq,
                    {
                        "kind": kind,
                        "agent": agent,
                        "branch": branch,
                        "label": entry.label if entry else "",
                        "created_at": event.ts,
                    },
                )
            if isinstance(event, AgentCreated):
                self._publish("agents", event.seq, {"agent": event.agent, "status": "created"})

    def reset(self, result: m.RewindResult) -> None:
        """`rewinds`: a rewind or checkout of this daemon is done."""
        self._publish("rewinds", result.reset_seq, msgspec.to_builtins(result))

    def replicated_reset(self, record: Rewind, target_was_active: bool) -> None:
        """`rewinds`: a follower applied a reset record, told as the primary told it."""
        self.reset(
            m.RewindResult(
                mode="undo" if target_was_active else "fork_switch",
                reset_seq=record.seq,
                target=record.target_n,
                branch=self._store.lineage.branch_of(record.seq),
                cancelled=[m.CancelledChain(agent=a, turn_id=t) for a, t in record.cancelled],
                duration_ms=0.0,
                reason=record.reason,
                by=by_of(record),
            )
        )


def _record_brief(event: Event, agent: str | None, branch: int) -> dict[str, Any]:
    """The data of a `records` notification: enough to follow a turn without reading it."""
    brief: dict[str, Any] = {"kind": kind_of(event), "agent": agent, "branch": branch}
    turn_id = turn_id_for(event.seq) if isinstance(event, MessageReceived) else None
    turn_id = getattr(event, "turn_id", turn_id)
    if turn_id is not None:
        brief["turn_id"] = turn_id
    step = getattr(event, "step", None)
    if step is not None:
        brief["step"] = step
    return brief

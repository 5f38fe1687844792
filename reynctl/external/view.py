"""The lifecycle of one external agent's records, replayed (pure).

Its records, on the active lineage: `agent.created` (the object's id in its
options), then `message.received` + `turn.started` of the kind's turn: the
agent is open. The turn in flight is what keeps its records from retention:
reynd's WAL floor never rises above a turn in flight (core/retention.py).
`skill.started` of the kind's run, whose `skill.phase` records are the
agent's generations. `step.started` of the turn: one framework operation
each, its `input` what the framework's view indexes (`_step`). `turn.ended`
closes the agent: everything before it is gone from its view.

reynd's state keeps only the last `step.started` input of the open turn, so
the daemon's memory and snapshots do not grow with the object. A rewind cuts
records off the active lineage: `rebuild` replays what is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["AgentView"]


@dataclass
class AgentView:
    """An external agent as of the records applied; subclasses index its steps."""

    TURN: ClassVar[str]  # the kind's turn id

    events: list[dict[str, Any]] = field(default_factory=list)
    exists: bool = False  # the agent exists on this lineage
    open: bool = False  # its turn is in flight
    phases: bool = False  # its skill run is active (its phases are generations)

    def apply(self, event: dict[str, Any]) -> None:
        """Apply one record (as wal.read returns it) and keep it for a later rebuild."""
        self.events.append(event)
        self._apply(event)

    def rebuild(self, common: int) -> None:
        """Forget every record above `common` (a rewind abandoned them) and replay the rest."""
        if not self.events or self.events[-1]["seq"] <= common:
            return
        kept = [e for e in self.events if e["seq"] <= common]
        self.__init__()  # type: ignore[misc]
        for event in kept:
            self.apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "agent.created":
            self.exists = True
            self._created(event.get("options") or {})
        elif kind in ("skill.started", "skill.ended") and event.get("run_id") == self.TURN:
            self.phases = kind == "skill.started"
        elif kind == "turn.started" and event.get("turn_id") == self.TURN:
            self.open = True
        elif kind == "turn.ended" and event.get("turn_id") == self.TURN:
            self.open = False
            self._clear()
        elif kind == "step.started" and event.get("turn_id") == self.TURN:
            self._step(event["seq"], event.get("input") or {})
        elif kind == "skill.phase" and event.get("run_id") == self.TURN:
            self._phase(event)

    def _created(self, options: dict[str, Any]) -> None:
        """The agent's options, as created."""

    def _clear(self) -> None:
        """The agent was closed: forget what its steps held."""

    def _step(self, seq: int, data: dict[str, Any]) -> None:
        """One step record's `input`, at `seq`."""

    def _phase(self, event: dict[str, Any]) -> None:
        """One generation of the agent."""

"""One SDK session as reynd holds it: the agent's records replayed into its items (pure).

A session is one external agent (see `names`), its lifecycle as every
external agent's (`reynctl.external.view`): open while turn `oa` is in
flight, with skill run `oa` active. Its `step.started` records of turn `oa`,
their `input` one of:

- `{"oa": "add", "items": [...]}`: items appended, in order. With `"turn": N`
  its first item is the user message that starts turn N; the `skill.phase`
  just before it (`turn N: <the message>`) is that turn's generation: the
  session as the turns before it left it. An item too large for one request
  is null in `items`, its JSON in `part` records before it (`"parts": {index:
  ref}`).
- `{"oa": "pop"}`: the newest item is gone (pop_item).
- `{"oa": "clear"}`: every item is gone, and the turns with them (clear_session).
- `{"oa": "usage", "turn": N, "usage": {...}}`: the tokens of turn N's run.
- `{"oa": "part", "ref": ..., "b": ...}`: a piece of an item's JSON.

Nothing is deleted: a pop or a clear is a record, undone by rewinding to
before it, like any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from reynctl.external.records import unpack
from reynctl.external.view import AgentView
from reynctl.openai_agents.names import KIND

__all__ = ["Item", "SessionView", "Turn", "is_user_message", "message_text"]


@dataclass(slots=True)
class Item:
    seq: int  # of the record that added it
    turn: int  # the turn it belongs to (0: before the first user message)
    value: dict[str, Any]


@dataclass(slots=True)
class Turn:
    number: int
    seq: int  # its generation (the phase record): rewinding to it branches from its message
    message: str  # the user message's text
    usage: dict[str, int] | None = None


@dataclass
class SessionView(AgentView):
    """The session's items and turns as of the records applied."""

    TURN: ClassVar[str] = KIND.turn

    items: list[Item] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    phase_seq: int = 0  # the last generation: the next turn's, when its record follows
    parts: dict[str, list[str]] = field(default_factory=dict)

    def _clear(self) -> None:
        self.items.clear()
        self.turns.clear()
        self.parts.clear()

    def _phase(self, event: dict[str, Any]) -> None:
        self.phase_seq = event["seq"]

    def _step(self, seq: int, data: dict[str, Any]) -> None:
        op = data.get("oa")
        if op == "add":
            self._add(seq, data)
        elif op == "pop":
            self._pop()
        elif op == "clear":
            self._clear()
        elif op == "usage":
            turn = self.turn(data.get("turn", 0))
            if turn is not None:
                turn.usage = data.get("usage")
        elif op == "part":
            self.parts.setdefault(data["ref"], []).append(data["b"])

    def _add(self, seq: int, data: dict[str, Any]) -> None:
        items: list[Any] = list(data.get("items", ()))
        for index, ref in (data.get("parts") or {}).items():
            items[int(index)] = msgspec.json.decode(unpack("".join(self.parts.pop(ref, []))))
        number = data.get("turn")
        if number is not None:
            self.turns.append(Turn(number, self.phase_seq, message_text(items[0])))
        current = self.turns[-1].number if self.turns else 0
        self.items.extend(Item(seq, current, item) for item in items)

    def _pop(self) -> None:
        if not self.items:
            return
        gone = self.items.pop()
        last = self.turns[-1].number if self.turns else None
        if gone.turn == last and (not self.items or self.items[-1].turn != last):
            self.turns.pop()  # its user message was popped: the turn is gone

    # -- queries -------------------------------------------------------------------------

    def turn(self, number: int) -> Turn | None:
        """Turn `number` as the active lineage has it, if it does."""
        return next((t for t in self.turns if t.number == number), None)

    def next_turn(self) -> int:
        return self.turns[-1].number + 1 if self.turns else 1


def is_user_message(item: dict[str, Any]) -> bool:
    """A message the user sent: it starts a turn (as AdvancedSQLiteSession counts them)."""
    return item.get("role") == "user" and item.get("type", "message") == "message"


def message_text(item: dict[str, Any]) -> str:
    """The text of a message item: its content, or its text parts joined."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""

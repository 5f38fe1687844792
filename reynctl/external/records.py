"""The records an external agent's write appends, and the requests they go in (pure).

The records that open the agent and close it (see `view`), a step of its
turn, and the split of a write's records into requests the daemon takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import msgspec

from reynctl.external.kind import Kind
from reynctl.external.view import AgentView
from reynd.protocol import limits

__all__ = [
    "BATCH_BYTES",
    "MAX_BATCH",
    "PART",
    "Build",
    "Event",
    "batches",
    "constant",
    "pack",
    "unpack",
    "ending",
    "opening",
    "since_opened",
    "step",
]

Event = tuple[str, dict[str, Any]]
# What a write appends, built against the agent's name and view (the view as the
# writer last read it, or as a fresh read has it when the write is tried again).
Build = Callable[[str, Any], "list[Event]"]

# A value larger than this (packed) goes in `part` records of its own: one
# request may not exceed the daemon's max_message_bytes.
PART: Final = limits.MAX_MESSAGE_BYTES // 4
MAX_BATCH: Final = limits.MAX_APPEND_EVENTS  # events per wal.append_batch
BATCH_BYTES: Final = 3 * PART  # per request: a quarter of max_message_bytes left for framing


def pack(data: bytes) -> str:
    """Serialized bytes as a JSON string, one character per byte (latin-1).

    JSON escapes only quotes, backslashes and control bytes, so msgpack text
    grows by about 15% where base64 would add 33%; reading it back is exact.
    """
    return data.decode("latin-1")


def unpack(text: str) -> bytes:
    return text.encode("latin-1")


def step(turn: str, data: dict[str, Any]) -> Event:
    """A step of turn `turn`: one framework operation (`data` is its `input`)."""
    return ("step.started", {"turn_id": turn, "step": 0, "input": data})


def constant(events: list[Event]) -> Build:
    """A write of `events` as they are, whatever the view."""
    return lambda name, view: events


def opening(kind: Kind, ident: str, view: AgentView, *, phases: bool) -> list[Event]:
    """The records that make the agent writable: the agent, then its open turn."""
    events: list[Event] = []
    if not view.exists:
        events.append(
            ("agent.created", {"session": kind.session, "options": {kind.id_option: ident}})
        )
    if not view.open:
        text = f"{kind.title} {ident}"
        events.append(("message.received", {"message_id": kind.turn, "text": text}))
        events.append(("turn.started", {"turn_id": kind.turn, "message_id": kind.turn}))
    if phases and not (view.open and view.phases):
        events.append(("skill.started", {"run_id": kind.turn, "skill": kind.skill}))
    return events


def ending(kind: Kind, view: AgentView, label: str) -> list[Event]:
    """The records that close an open agent: its skill run (which also holds the floor), its
    turn. None when it is not open."""
    if not view.open:
        return []
    events: list[Event] = []
    if view.phases:
        events.append(("skill.ended", {"run_id": kind.turn, "outcome": label}))
    events.append(("turn.ended", {"turn_id": kind.turn, "outcome": "aborted", "label": label}))
    return events


def since_opened(turn: str, view: AgentView) -> list[dict[str, Any]]:
    """The agent's step records since its turn `turn` last started (what is live)."""
    out: list[dict[str, Any]] = []
    for event in view.events:
        if event["kind"] == "turn.started" and event.get("turn_id") == turn:
            out = []
        elif event["kind"] == "step.started" and event.get("turn_id") == turn:
            out.append(event)
    return out


def batches(events: Sequence[Event]) -> Iterator[Sequence[Event]]:
    """`events` in requests the daemon takes: at most MAX_BATCH events and BATCH_BYTES.

    Only a write with values split in `part` records (or, for a session, an
    add_items larger than a request) needs more than one; its parts then go
    first, and a crash between the two leaves only unused parts.
    """
    start, size = 0, 0
    for i, (_, data) in enumerate(events):
        n = len(msgspec.json.encode(data))
        if i > start and (i - start >= MAX_BATCH or size + n > BATCH_BYTES):
            yield events[start:i]
            start, size = i, 0
        size += n
    if start < len(events):
        yield events[start:]

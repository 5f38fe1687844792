"""The records a ReyndSaver write appends, and the requests they go in (pure).

What each record holds is described in `view`; this module builds them: the
records that open a thread and close it, a step of turn `lg`, a checkpoint's
generation label, and the split of a write's records into requests the daemon
takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import msgspec

from reynctl.langgraph.names import SESSION
from reynctl.langgraph.view import TURN, ThreadView
from reynd.protocol import limits
from reynd.protocol.names import CONTROL_CHARS, IDENT_MAX

__all__ = [
    "BATCH_BYTES",
    "MAX_BATCH",
    "PART",
    "Build",
    "Event",
    "batches",
    "constant",
    "ending",
    "opening",
    "phase",
    "since_opened",
    "step",
]

Event = tuple[str, dict[str, Any]]
# What a write appends, built against the thread's agent name and view (the view as
# the saver last read it, or as a fresh read has it when the write is tried again).
Build = Callable[[str, ThreadView], "list[Event]"]

# A value larger than this (packed) goes in `part` records of its own: one
# request may not exceed the daemon's max_message_bytes.
PART: Final = limits.MAX_MESSAGE_BYTES // 4
MAX_BATCH: Final = limits.MAX_APPEND_EVENTS  # events per wal.append_batch
BATCH_BYTES: Final = 3 * PART  # per request: a quarter of max_message_bytes left for framing
_CONTROL: Final = re.compile(f"[{CONTROL_CHARS}]")  # refused in an identifier


def step(data: dict[str, Any]) -> Event:
    """A step of the thread's turn: one saver operation (`data` is its `input`)."""
    return ("step.started", {"turn_id": TURN, "step": 0, "input": data})


def constant(events: list[Event]) -> Build:
    """A write of `events` as they are, whatever the view."""
    return lambda name, view: events


def opening(tid: str, view: ThreadView, *, phases: bool) -> list[Event]:
    """The records that make the thread writable: its agent, then its open turn."""
    events: list[Event] = []
    if not view.exists:
        events.append(("agent.created", {"session": SESSION, "options": {"thread_id": tid}}))
    if not view.open:
        text = f"LangGraph thread {tid}"
        events.append(("message.received", {"message_id": TURN, "text": text}))
        events.append(("turn.started", {"turn_id": TURN, "message_id": TURN}))
    if phases and not (view.open and view.phases):
        events.append(("skill.started", {"run_id": TURN, "skill": "langgraph"}))
    return events


def ending(view: ThreadView, label: str) -> list[Event]:
    """The records that close an open thread: its skill run (which also holds the floor), its
    turn. None when it is not open."""
    if not view.open:
        return []
    events: list[Event] = []
    if view.phases:
        events.append(("skill.ended", {"run_id": TURN, "outcome": label}))
    events.append(("turn.ended", {"turn_id": TURN, "outcome": "aborted", "label": label}))
    return events


def since_opened(view: ThreadView) -> list[dict[str, Any]]:
    """The thread's step records since its turn last started (what is live)."""
    out: list[dict[str, Any]] = []
    for event in view.events:
        if event["kind"] == "turn.started" and event.get("turn_id") == TURN:
            out = []
        elif event["kind"] == "step.started" and event.get("turn_id") == TURN:
            out.append(event)
    return out


def phase(ns: str, metadata: Mapping[str, object]) -> str:
    """The generation label of a checkpoint: `loop step 3` (and its namespace, if any)."""
    text = f"{metadata.get('source', 'checkpoint')} step {metadata.get('step', '?')}"
    if ns:
        text += f" in {ns}"
    return re.sub(_CONTROL, "?", text)[:IDENT_MAX]


def batches(events: Sequence[Event]) -> Iterator[Sequence[Event]]:
    """`events` in requests the daemon takes: at most MAX_BATCH events and BATCH_BYTES.

    Only a put with values split in `part` records needs more than one; its
    parts then go first, and a crash between the two leaves only unused parts.
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

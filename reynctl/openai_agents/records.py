"""The records a ReyndSession write appends (pure); what each holds is described in `view`."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from reynctl.external import records
from reynctl.external.records import PART, Event, pack
from reynctl.openai_agents.names import KIND
from reynctl.openai_agents.view import SessionView, is_user_message, message_text
from reynd.protocol.names import CONTROL_CHARS, IDENT_MAX

__all__ = ["added", "step", "usage"]

_CONTROL: Final = re.compile(f"[{CONTROL_CHARS}]")  # refused in an identifier
USAGE_FIELDS: Final = ("requests", "input_tokens", "output_tokens", "total_tokens")


def step(data: dict[str, Any]) -> Event:
    """A step of the session's turn: one session operation (`data` is its `input`)."""
    return records.step(KIND.turn, data)


def added(view: SessionView, items: Sequence[dict[str, Any]]) -> list[Event]:
    """The records of one add_items: an `add` per run of items a user message starts, each
    after that turn's generation (`skill.phase`). An item too large for one record goes
    first, in parts; a run too large for one record, in several `add` records."""
    events: list[Event] = []
    number = view.next_turn()
    runs: list[tuple[int | None, list[dict[str, Any]]]] = []
    for item in items:
        if is_user_message(item):
            runs.append((number, []))
            number += 1
        elif not runs:
            runs.append((None, []))
        runs[-1][1].append(item)
    for turn, run in runs:
        if turn is not None:
            events.append(("skill.phase", {"run_id": KIND.turn, "phase": _label(turn, run[0])}))
        data: dict[str, Any] = {"oa": "add", "items": []}
        if turn is not None:
            data["turn"] = turn
        size = 0
        for item in run:
            raw = msgspec.json.encode(item)
            whole = len(raw) <= PART
            if whole and size and size + len(raw) > PART:
                events.append(step(data))
                data, size = {"oa": "add", "items": []}, 0
            if not whole:
                ref = uuid.uuid4().hex
                # Packed as LangGraph values are (one char per byte): JSON text escapes
                # at most `"` and `\\` in it, so a part's record stays under PART bytes.
                events.extend(
                    step({"oa": "part", "ref": ref, "b": pack(raw[j : j + PART // 2])})
                    for j in range(0, len(raw), PART // 2)
                )
                data.setdefault("parts", {})[str(len(data["items"]))] = ref
                data["items"].append(None)
                continue
            data["items"].append(item)
            size += len(raw)
        events.append(step(data))
    return events


def usage(turn: int, totals: dict[str, int]) -> Event:
    """The tokens of turn `turn`'s run."""
    return step({"oa": "usage", "turn": turn, "usage": totals})


def _label(turn: int, message: dict[str, Any]) -> str:
    """The generation label of a turn: `turn 3: <its user message>`, one line."""
    return re.sub(_CONTROL, " ", f"turn {turn}: {message_text(message)}")[:IDENT_MAX]

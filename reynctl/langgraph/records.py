"""The records of a ReyndSaver write that are LangGraph's own (pure).

What each record holds is described in `view`; the records that open and
close a thread, and the split of a write into requests, are every external
agent's (`reynctl.external.records`). Here: a step of turn `lg`, a
checkpoint's generation label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from reynctl.external import records
from reynctl.external.records import Event
from reynctl.langgraph.names import KIND
from reynd.protocol.names import CONTROL_CHARS, IDENT_MAX

__all__ = ["phase", "step"]

_CONTROL: Final = re.compile(f"[{CONTROL_CHARS}]")  # refused in an identifier


def step(data: dict[str, Any]) -> Event:
    """A step of the thread's turn: one saver operation (`data` is its `input`)."""
    return records.step(KIND.turn, data)


def phase(ns: str, metadata: Mapping[str, object]) -> str:
    """The generation label of a checkpoint: `loop step 3` (and its namespace, if any)."""
    text = f"{metadata.get('source', 'checkpoint')} step {metadata.get('step', '?')}"
    if ns:
        text += f" in {ns}"
    return re.sub(_CONTROL, "?", text)[:IDENT_MAX]

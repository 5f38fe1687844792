"""The reynd agent that holds a LangGraph thread."""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["SESSION", "agent_name"]

SESSION: Final = "langgraph"  # the session of every thread's agent (agents.list filters on it)
_PLAIN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,60}")


def agent_name(thread_id: str) -> str:
    """`lg-<thread id>` when the id is a valid agent name within 64 characters, else
    `lgx-<sha256 of it, 32 hex digits>` (the two forms never collide). The id itself
    is kept in the agent's options (`thread_id`)."""
    if _PLAIN.fullmatch(thread_id):
        return f"lg-{thread_id}"
    return "lgx-" + hashlib.sha256(thread_id.encode()).hexdigest()[:32]

"""The reynd agent that holds a LangGraph thread."""

from __future__ import annotations

import hashlib
import re
from typing import Final

from reynd.protocol.names import AGENT_NAME_MAX, AGENT_NAME_PATTERN

__all__ = ["SESSION", "agent_name"]

SESSION: Final = "langgraph"  # the session of every thread's agent (agents.list filters on it)
PLAIN: Final = "lg-"  # + the thread id, when it is an agent name itself
HASHED: Final = "lgx-"  # + a hash of the thread id, otherwise (the two never collide)
# A thread id that fits after PLAIN within the daemon's agent names (AgentName).
_PLAIN_ID: Final = re.compile(AGENT_NAME_PATTERN)
_PLAIN_ID_MAX: Final = AGENT_NAME_MAX - len(PLAIN)


def agent_name(thread_id: str) -> str:
    """`lg-<thread id>` when the id is a valid agent name that fits in one with the prefix,
    else `lgx-<sha256 of it, 32 hex digits>`. The id itself is kept in the agent's options
    (`thread_id`)."""
    if len(thread_id) <= _PLAIN_ID_MAX and _PLAIN_ID.match(thread_id):
        return PLAIN + thread_id
    return HASHED + hashlib.sha256(thread_id.encode()).hexdigest()[:32]

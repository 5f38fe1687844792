"""The reynd agent that holds a LangGraph thread."""

from __future__ import annotations

from typing import Final

from reynctl.external.kind import Kind

__all__ = ["KIND", "SESSION", "agent_name"]

KIND: Final = Kind(
    session="langgraph",
    plain="lg-",
    hashed="lgx-",
    turn="lg",
    skill="langgraph",
    id_option="thread_id",
    title="LangGraph thread",
)
SESSION: Final = KIND.session  # the session of every thread's agent (agents.list filters on it)


def agent_name(thread_id: str) -> str:
    """`lg-<thread id>` when the id is a valid agent name that fits in one with the prefix,
    else `lgx-<sha256 of it, 32 hex digits>`. The id itself is kept in the agent's options
    (`thread_id`)."""
    return KIND.agent_name(thread_id)

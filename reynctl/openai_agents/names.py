"""The reynd agent that holds an OpenAI Agents SDK session."""

from __future__ import annotations

from typing import Final

from reynctl.external.kind import Kind

__all__ = ["KIND"]

# `oa-<session id>` (or `oax-` and a hash), session `openai-agents`, the id in its options.
KIND: Final = Kind(
    session="openai-agents",
    plain="oa-",
    hashed="oax-",
    turn="oa",
    skill="openai-agents",
    id_option="session_id",
    title="OpenAI Agents session",
)

"""How one framework's objects are named and opened as reynd agents (pure)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from reynd.protocol.names import AGENT_NAME_MAX, AGENT_NAME_PATTERN

__all__ = ["Kind"]

_PLAIN_ID: Final = re.compile(AGENT_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class Kind:
    """One framework's agents: their session, names, open turn and skill run."""

    session: str  # the session of every such agent (agents.list filters on it)
    plain: str  # + the object's id, when it is an agent name itself
    hashed: str  # + a hash of the id, otherwise (the two never collide)
    turn: str  # the turn id (and message id, skill run id) that holds the agent open
    skill: str  # the skill run's name: its phases are the agent's generations
    id_option: str  # the agent option that keeps the object's id
    title: str  # the opening message's text, before the id

    def agent_name(self, ident: str) -> str:
        """`<plain><id>` when the id is a valid agent name that fits in one with the prefix,
        else `<hashed><sha256 of it, 32 hex digits>`. The id itself is kept in the agent's
        options (`id_option`)."""
        if len(ident) <= AGENT_NAME_MAX - len(self.plain) and _PLAIN_ID.match(ident):
            return self.plain + ident
        return self.hashed + hashlib.sha256(ident.encode()).hexdigest()[:32]

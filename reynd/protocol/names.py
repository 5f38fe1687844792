"""What a name or identifier may be, wherever a request brings one in.

One definition for every door: the params of each method that names an agent,
and the fields of events an external runtime writes with `wal.append` (see
`appendable`). The daemon validates with these types and `rpc.discover`
shows their patterns, so a client can check before it sends.

Never applied to records read back from the WAL: an older log may hold names
these rules refuse, and a record that was acknowledged must always load.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

__all__ = [
    "AGENT_NAME_MAX",
    "AGENT_NAME_PATTERN",
    "CONTROL_CHARS",
    "IDENT_MAX",
    "LINE_MAX",
    "NO_CONTROLS_PATTERN",
    "REASON_MAX",
    "TAG_NAME_PATTERN",
    "AgentName",
    "AgentRef",
    "ClientName",
    "Ident",
    "Line",
    "Reason",
    "TagName",
]

# Python's `$` also matches before a final newline (`"a\n"` would pass); the
# lookahead makes it mean end-of-string, as `$` already does in ECMA-262
# regexes (what readers of the OpenRPC document use).
_END = r"$(?!\n)"

AGENT_NAME_MAX: Final = 64
AGENT_NAME_PATTERN: Final = rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{AGENT_NAME_MAX - 1}}}{_END}"

# Characters that reach a terminal as commands, not text: C0 controls (newline,
# CR, ESC, NUL...), DEL, C1 controls, the Unicode line and paragraph separators,
# and the bidirectional embeddings, overrides and isolates (they reorder what is
# shown). The body of a regex character class: Python's `re` and ECMA-262 both
# read these \x and \u escapes. reynctl escapes the same set when it prints.
CONTROL_CHARS: Final = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
NO_CONTROLS_PATTERN: Final = rf"^[^{CONTROL_CHARS}]*{_END}"

# A tag name follows the agent-name rules, and is not all digits: `reynctl rewind 42`
# means seq 42, and any other argument is a tag name.
TAG_NAME_PATTERN: Final = rf"^(?![0-9]+{_END})" + AGENT_NAME_PATTERN.removeprefix("^")

_AGENT_RULE: Final = (
    f"1-{AGENT_NAME_MAX} ASCII letters, digits, `_`, `.`, `-`; the first a letter or digit"
)
_TAG_RULE: Final = f"{_AGENT_RULE}; not all digits (those are seqs)"
# What a name that fails its pattern must be, in words (protocol/validation.py says it so).
PATTERN_RULES: Final = {
    AGENT_NAME_PATTERN: _AGENT_RULE,
    TAG_NAME_PATTERN: _TAG_RULE,
    NO_CONTROLS_PATTERN: "free of control characters (C0, C1, line and paragraph "
    "separators, bidirectional controls)",
}

IDENT_MAX: Final = 128
LINE_MAX: Final = 256
REASON_MAX: Final = 256  # a reset's reason: kept in its WAL record, shown in one table row

AgentName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=AGENT_NAME_MAX,
        pattern=AGENT_NAME_PATTERN,
        description=f"An agent name: {_AGENT_RULE}.",
    ),
]
"""A new agent's name, as `agents.create` and `wal.append` of `agent.created` accept it."""

AgentRef = Annotated[
    str,
    msgspec.Meta(
        description="The name of an existing agent. New names follow AgentName; "
        "this also reaches agents older releases created under laxer rules.",
    ),
]
"""A name that looks an agent up: any string, as an older log may hold
names AgentName refuses, and such an agent must stay reachable. A name that is
not in the state is answered with agent_not_found."""

Ident = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=IDENT_MAX,
        pattern=NO_CONTROLS_PATTERN,
        description="An identifier: 1-128 characters, no control characters.",
    ),
]
"""An identifier a writer chooses (turn, message, plan, run, intervention ids, a session...)."""

Line = Annotated[
    str,
    msgspec.Meta(
        max_length=LINE_MAX,
        pattern=NO_CONTROLS_PATTERN,
        description="One line of text: at most 256 characters, no control characters.",
    ),
]
"""A short line of text shown in tables (a generation label, a plan step's title)."""

Reason = Annotated[
    str,
    msgspec.Meta(
        max_length=REASON_MAX,
        pattern=NO_CONTROLS_PATTERN,
        description="Why the tip moves: at most 256 characters, no control characters; "
        "kept in the reset record.",
    ),
]
"""The reason a rewind, checkout, act-turn rewind or undo gives; kept in its reset record."""

ClientName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=IDENT_MAX,
        pattern=NO_CONTROLS_PATTERN,
        description="A client program's name (`reynctl`): 1-128 characters, no control characters.",
    ),
]
"""What a client calls itself in `session.hello`; reset records keep it as who moved the tip."""

TagName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=AGENT_NAME_MAX,
        pattern=TAG_NAME_PATTERN,
        description=f"A tag name: {_TAG_RULE}.",
    ),
]
"""A name for a seq (`tags.set`), and wherever a seq may be given by its tag."""

"""What an executor is asked and what it answers, for one act-step.

This is also the wire contract of the `command` executor: the daemon writes
one StepRequest as JSON on the program's stdin and reads one StepResult as
JSON from its stdout.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reynd.protocol.events import Message

__all__ = ["StepRequest", "StepResult"]


class StepRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One act-step's input.

    `history` never holds half a tool cycle: an assistant message's tool calls
    and their results are passed together or not at all. The one exception is
    this turn's own open cycle at the very end: the tool calls its previous
    step made, which this step is expected to answer.
    """

    agent: str
    turn_id: str
    step: int
    text: str
    history: list[Message]
    previous: list[dict[str, Any]] = []  # outputs of this turn's committed steps
    answers: dict[str, str] = {}  # operator answers to this turn's questions
    options: dict[str, Any] = {}


class StepResult(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One act-step's output, committed to the WAL as its memo.

    `done` ends the turn. The optional directives become their own events:
    `ask` an intervention (the turn waits for the answer), `plan` a plan,
    `plan_step_done` a finished plan step, `skill` / `phase` / `skill_end` a
    skill run and its phases.
    """

    messages: list[Message] = []
    done: bool = False
    reply: str | None = None
    label: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    ask: str | None = None
    plan: list[str] | None = None
    plan_step_done: int | None = None
    skill: str | None = None
    phase: str | None = None
    skill_end: bool = False

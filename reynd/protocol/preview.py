"""What a move changes, and what it cannot undo (issue 25).

`rewind`, `checkout` and `act_turn.rewind` take `dry_run`: nothing is
written and nothing cancelled, and the result says what the move would do
(`MovePreview`) and which external effects of the future it abandons no
rewind undoes (`Effects`). A real move's result carries its `Effects` too.
Lists are capped at MAX_LISTED entries; the counts are always whole.
"""

from __future__ import annotations

from typing import Final

from reynd.protocol.base import Result

__all__ = [
    "MAX_LISTED",
    "CommandRun",
    "Effects",
    "MovePreview",
    "TurnRef",
    "effects_line",
    "effects_parts",
]

MAX_LISTED: Final = 100  # entries of a list in a preview; its count says how many in all


class CommandRun(Result, kw_only=True):
    """A program a `command` executor ran for one step: `exit_code` None when it never
    exited by itself (killed, timed out, could not start). `seq`: the record that ended
    the step (its memo, or the turn end of the turn it failed); `step` None when the
    step started before the records looked at."""

    agent: str
    turn_id: str
    step: int | None
    seq: int
    argv: list[str]
    exit_code: int | None = None


class Effects(Result, kw_only=True):
    """The effects outside reynd of the act-steps on the branch a move abandons.

    A rewind forgets them in reynd's state but undoes none of them. `steps`:
    the steps whose effects are known (counted below); `unknown_steps`: steps
    that ended with no record of what they did (written by an older reynd or
    an external runtime, cancelled, or an executor's bug): they may have done
    anything, and are not counted as nothing. `commands` lists the first
    MAX_LISTED of `command_count` program runs; `tools` counts tool runs by
    name. `files_outside`: files written outside the workspace, None as long
    as no executor reports them (not known, which is not none).
    """

    steps: int = 0
    unknown_steps: int = 0
    commands: list[CommandRun] = []
    command_count: int = 0
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tools: dict[str, int] = {}
    files_outside: list[str] | None = None


class TurnRef(Result, kw_only=True):
    """A turn, by agent and id; `seq` is its `turn.started` record."""

    agent: str
    turn_id: str
    seq: int


class MovePreview(Result, kw_only=True):
    """What a move would change (a dry run's result; the turns it would cancel are
    the result's `cancelled`). `abandoned_*`: started or created on the branch it
    leaves (above the common ancestor of the tip and the target); `restored_*`: on
    the branch it lands on (a checkout of an abandoned branch). Each list holds
    at most MAX_LISTED entries, its `*_count` how many in all. `files`: the
    workspace paths the restore would write or remove, as recorded (None when
    workspace rewind is off). `unrecorded`: the workspace's changes reynd did not
    record, found by a scan for the dry run (None when there are none, or no files
    are restored): while there are any the move is refused (`workspace_dirty`)
    unless it is a checkout with `force`, which records them first."""

    abandoned_turns: list[TurnRef] = []
    abandoned_turn_count: int = 0
    restored_turns: list[TurnRef] = []
    restored_turn_count: int = 0
    abandoned_agents: list[str] = []
    restored_agents: list[str] = []
    files: list[str] | None = None
    file_count: int = 0
    unrecorded: list[str] | None = None
    unrecorded_count: int = 0


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _tokens(n: int) -> str:
    return f"{n / 1000:.3g}k" if n >= 1000 else str(n)


def effects_parts(effects: Effects) -> list[str]:
    """What `effects_line` lists: empty when nothing outside reynd is known or unknown."""
    parts = []
    if effects.command_count:
        parts.append(_count(effects.command_count, "command") + " ran")
    if effects.model_calls:
        parts.append(_count(effects.model_calls, "model call"))
    tokens = effects.tokens_in + effects.tokens_out
    if tokens:
        parts.append(f"{_tokens(tokens)} tokens")
    tools = sum(effects.tools.values())
    if tools:
        parts.append(_count(tools, "tool call"))
    if effects.unknown_steps:
        parts.append(_count(effects.unknown_steps, "step") + " with unknown effects")
    return parts


def effects_line(effects: Effects) -> str:
    """One line for a prompt: `not undone: 3 commands ran, 5 model calls, 12k tokens`."""
    parts = effects_parts(effects)
    if not parts:
        return "not undone: nothing (no command, model or tool call on the branch left)"
    return "not undone: " + ", ".join(parts)

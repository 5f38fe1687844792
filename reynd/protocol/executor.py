"""The executors' contract: their names, their options, and what one act-step asks and answers.

`ExecutorName` is the one list of the executors the daemon runs: the params
types, the daemon's checks, the runtime's dispatch (on the options type the
name maps to) and reynctl's choices all derive from it and EXECUTOR_OPTIONS.
The options are what `agents.create`/`agents.configure` take per executor
(the OpenRPC document shows them from these types). StepRequest/StepResult
are also the wire contract of the `command` executor: the daemon writes one
StepRequest as JSON on the program's stdin and reads one StepResult as JSON
from its stdout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, TypeGuard, get_args

import msgspec

from reynd.protocol.events import Message
from reynd.protocol.schema import inline_schema

__all__ = [
    "AGENT_EXECUTORS",
    "DEFAULT_EXECUTOR",
    "EXECUTOR_NAMES",
    "EXECUTOR_OPTIONS",
    "EXTERNAL",
    "OPTIONS_SCHEMA",
    "AnyOptions",
    "BuiltinOptions",
    "CommandOptions",
    "ExecutorName",
    "OpenAIOptions",
    "StepRequest",
    "StepResult",
    "is_executor",
]

ExecutorName = Literal["builtin", "command", "openai"]
"""An executor the daemon runs itself (`agents.create`, `agents.configure`)."""
EXECUTOR_NAMES: Final[tuple[ExecutorName, ...]] = get_args(ExecutorName)
DEFAULT_EXECUTOR: Final[ExecutorName] = "builtin"  # an agent created without one
EXTERNAL: Final = "external"
"""The executor of an agent an outside runtime drives (`wal.append`): the daemon never runs it."""
AGENT_EXECUTORS: Final = (*EXECUTOR_NAMES, EXTERNAL)
"""What an agent's `agent.created` or `agent.configured` record may name."""


def is_executor(name: str) -> TypeGuard[ExecutorName]:
    """True when the daemon runs an executor of this name itself."""
    return name in EXECUTOR_NAMES


class BuiltinOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The deterministic demo executor: `delay` seconds of pretend work per step."""

    delay: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 0.0


class CommandOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A program run once per step: StepRequest on its stdin, StepResult on its stdout."""

    argv: Annotated[list[str], msgspec.Meta(min_length=1)]
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    env: dict[str, str] = {}
    cwd: str | None = None


# Declared once, enforced at decode and shown by the document; __post_init__ then
# checks the rest of the URL (a host, characters a URL may hold).
_HttpUrl = Annotated[str, msgspec.Meta(pattern="^[Hh][Tt][Tt][Pp][Ss]?://")]


class OpenAIOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """An OpenAI-compatible chat completions endpoint; the key is read from `api_key_env`."""

    base_url: _HttpUrl = "http://127.0.0.1:8080/v1"
    model: str = "default"
    api_key_env: str = "OPENAI_API_KEY"
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 120.0
    temperature: float | None = None
    system: str | None = None
    tools: bool = True

    def __post_init__(self) -> None:
        # Refused at agents.create, not at the first step (msgspec reports it as invalid).
        import httpx  # the daemon's; clients never decode options

        try:
            url = httpx.URL(self.base_url)
        except (httpx.InvalidURL, UnicodeError) as exc:
            raise ValueError(f"base_url {self.base_url!r} is not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url {self.base_url!r} must be an http:// or https:// URL")


AnyOptions = BuiltinOptions | CommandOptions | OpenAIOptions

# Each name with its options type, in EXECUTOR_NAMES' order (a test holds them equal).
EXECUTOR_OPTIONS: Final[Mapping[ExecutorName, type[AnyOptions]]] = {
    "builtin": BuiltinOptions,
    "command": CommandOptions,
    "openai": OpenAIOptions,
}

_BY_EXECUTOR: Final = {name: inline_schema(t) for name, t in EXECUTOR_OPTIONS.items()}

OPTIONS_SCHEMA: Final[dict[str, Any]] = {
    "description": "The executor's options: see x-options-by-executor.",
    "anyOf": list(_BY_EXECUTOR.values()),
    "x-options-by-executor": _BY_EXECUTOR,
}
"""JSON Schema of an `options` param (msgspec validates it per executor at the door)."""


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

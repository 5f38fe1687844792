"""Params and results of the agent runtime's methods (registered in methods.METHODS)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from reynd.protocol import errors
from reynd.protocol.base import SEQ_RANGE_ERRORS, MethodDef, Params, Result
from reynd.protocol.executor import DEFAULT_EXECUTOR, OPTIONS_SCHEMA, ExecutorName
from reynd.protocol.names import AgentName, AgentRef, Ident, Reason
from reynd.protocol.preview import Effects, MovePreview

__all__ = [
    "DEFS",
    "ActTurnRewindParams",
    "ActTurnRewindResult",
    "AgentInfo",
    "AgentName",
    "AgentsCancelParams",
    "AgentsCancelResult",
    "AgentsConfigureParams",
    "AgentsCreateParams",
    "AgentsGetParams",
    "AgentsListParams",
    "AgentsListResult",
    "AgentsResolveParams",
    "AgentsSendParams",
    "AgentsSendResult",
    "AmbiguousStep",
    "InterventionInfo",
    "InterventionsAnswerParams",
    "InterventionsAnswerResult",
    "InterventionsListParams",
    "InterventionsListResult",
]

# Checked against the executor's options type (reynd.protocol.executor) by the daemon.
ExecutorOptions = Annotated[dict[str, Any], msgspec.Meta(extra_json_schema=OPTIONS_SCHEMA)]
AgentStatus = Literal["idle", "running", "waiting", "ambiguous", "failed"]


class AmbiguousStep(Result, kw_only=True):
    """A step that started before a crash and has no committed result.

    Its executor call may or may not have had effects: the operator decides
    (`agents.resolve`: retry, skip or abort).
    """

    agent: str
    turn_id: str
    step: int
    input: dict[str, Any]
    started_seq: int


class AgentInfo(Result, kw_only=True):
    name: str
    session: str
    executor: str
    options: dict[str, Any]
    status: AgentStatus
    created_seq: int
    applied_seq: int
    inbox: int
    turn_id: str | None = None
    step: int | None = None
    turns_completed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    ambiguous: AmbiguousStep | None = None
    waiting_for: str | None = None  # intervention id
    last_error: str | None = None
    executor_calls: int = 0  # since the daemon started
    ghost_replayed: int = 0  # steps replayed from memos since the daemon started


class AgentsCreateParams(Params, kw_only=True):
    name: AgentName
    executor: ExecutorName = DEFAULT_EXECUTOR
    options: ExecutorOptions = {}
    session: Ident = "default"


class AgentsConfigureParams(Params, kw_only=True):
    agent: AgentRef
    executor: ExecutorName | None = None
    options: ExecutorOptions | None = None


class AgentsListParams(Params, kw_only=True):
    session: Ident | None = None


class AgentsListResult(Result, kw_only=True):
    agents: list[AgentInfo]


class AgentsGetParams(Params, kw_only=True):
    agent: AgentRef


class AgentsSendParams(Params, kw_only=True):
    """Put a message in an agent's inbox; with `wait`, return when its turn ends
    or asks the operator a question (`timeout`: seconds to wait at most)."""

    agent: AgentRef
    text: Annotated[str, msgspec.Meta(min_length=1)]
    wait: bool = False
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 300.0


class AgentsSendResult(Result, kw_only=True):
    """`turn_id` is known at once; `boundary_seq` (the turn.ended seq) once it completed.

    `outcome` is the turn's outcome, or `abandoned` when a rewind abandoned
    the message before its turn ended, or `redelivered` when the rewind that
    abandoned it delivered it again (`reapply`): at `redelivered_seq`, its
    turn `t<redelivered_seq>`; None while the turn is in flight: the
    wait timed out, or the turn asked a question (`intervention_id`,
    `question`: answer it with interventions.answer and the turn goes on).
    """

    message_id: str
    seq: int
    turn_id: str
    boundary_seq: int | None = None
    outcome: str | None = None
    reply: str | None = None
    intervention_id: str | None = None
    question: str | None = None
    redelivered_seq: int | None = None


class AgentsCancelParams(Params, kw_only=True):
    agent: AgentRef


class AgentsCancelResult(Result, kw_only=True):
    cancelled: list[dict[str, str]]


class AgentsResolveParams(Params, kw_only=True):
    agent: AgentRef
    action: Literal["retry", "skip", "abort"]


class InterventionInfo(Result, kw_only=True):
    agent: str
    intervention_id: str
    question: str
    asked_seq: int
    turn_id: str | None = None


class InterventionsListParams(Params, kw_only=True):
    agent: AgentRef | None = None


class InterventionsListResult(Result, kw_only=True):
    interventions: list[InterventionInfo]


class InterventionsAnswerParams(Params, kw_only=True):
    """Answer a question; an answer to a question not asked yet is buffered."""

    agent: AgentRef
    intervention_id: Ident
    answer: str


class InterventionsAnswerResult(Result, kw_only=True):
    seq: int
    buffered: bool


class ActTurnRewindParams(Params, kw_only=True):
    """Rewind to a seq inside one of `agent`'s turns, between two act-steps.

    `then`: deliver a message right after the reset record, in its atomic batch,
    as rewind's `then` (issue 25); it waits in the inbox behind the resumed turn."""

    agent: AgentRef
    seq: Annotated[int, msgspec.Meta(ge=0)]
    reason: Reason = ""
    dry_run: bool = False  # write nothing, cancel nothing: say what it would do (issue 25)
    then: AgentsSendParams | None = None

    def __post_init__(self) -> None:
        if self.dry_run and self.then is not None:
            raise ValueError(
                "field `then` conflicts with `dry_run`: a dry run previews the move alone; "
                "preview without `then`, then make the move with it"
            )


class ActTurnRewindResult(Result, kw_only=True):
    reset_seq: int
    target: int
    branch: int
    turn_id: str
    ghost_replayed: int  # committed steps replayed from memos: 0 executor calls
    rerun: int  # steps that had run after the target and will run again
    cancelled: list[dict[str, str]] = []
    duration_ms: float = 0.0
    reason: str = ""
    # Issue 25, as RewindResult's: what no rewind undoes, and with `dry_run` the preview.
    effects: Effects | None = None
    dry_run: bool = False
    preview: MovePreview | None = None
    sent: AgentsSendResult | None = None  # `then`'s message, as rewind's `sent`


_UNKNOWN = (errors.UnknownAgent,)
DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "agents.create",
        AgentsCreateParams,
        AgentInfo,
        "Create an agent with its executor (builtin, command or openai).",
        (errors.AgentExists,),
        mutating=True,
    ),
    MethodDef(
        "agents.configure",
        AgentsConfigureParams,
        AgentInfo,
        "Change an agent's executor or options (recorded in the WAL).",
        _UNKNOWN,
        mutating=True,
    ),
    MethodDef(
        "agents.list",
        AgentsListParams,
        AgentsListResult,
        "Every agent with its runtime status.",
    ),
    MethodDef(
        "agents.get",
        AgentsGetParams,
        AgentInfo,
        "One agent's runtime status, including an ambiguous step.",
        _UNKNOWN,
    ),
    MethodDef(
        "agents.send",
        AgentsSendParams,
        AgentsSendResult,
        "Put a message in an agent's inbox; its turn runs in the daemon.",
        _UNKNOWN,
        mutating=True,
    ),
    MethodDef(
        "agents.cancel",
        AgentsCancelParams,
        AgentsCancelResult,
        "Hard-cancel the agent's turn in flight (its step is not committed).",
        _UNKNOWN,
        mutating=True,
    ),
    MethodDef(
        "agents.resolve",
        AgentsResolveParams,
        AgentInfo,
        "Resolve an ambiguous step after a crash: retry, skip or abort.",
        (errors.UnknownAgent, errors.NothingToDo),
        mutating=True,
    ),
    MethodDef(
        "interventions.list",
        InterventionsListParams,
        InterventionsListResult,
        "Questions agents are waiting on.",
    ),
    MethodDef(
        "interventions.answer",
        InterventionsAnswerParams,
        InterventionsAnswerResult,
        "Answer a question (an early answer is buffered).",
        _UNKNOWN,
        mutating=True,
    ),
    MethodDef(
        "act_turn.rewind",
        ActTurnRewindParams,
        ActTurnRewindResult,
        "Rewind inside a turn: earlier steps replay from memos, later ones run again.",
        (errors.UnknownAgent, errors.NotActive, errors.InvalidEvent, *SEQ_RANGE_ERRORS),
        mutating=True,
    ),
)

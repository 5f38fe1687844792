"""Params and results of every JSON-RPC method, and the table that names them.

The daemon validates params with these types, the client decodes results with
them, and `rpc.discover` renders the OpenRPC document from `METHODS`: one
definition, three uses. Field names are part of the contract: add, never rename.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

import msgspec

from reynd.protocol import agent_methods, audit_methods, errors
from reynd.protocol.base import Params, Result
from reynd.protocol.events import GenerationKind
from reynd.protocol.state import AgentState

__all__ = [
    "METHODS",
    "PROTOCOL_VERSION",
    "BranchInfo",
    "BranchesParams",
    "BranchesResult",
    "CancelledChain",
    "Change",
    "CheckoutParams",
    "DiffParams",
    "DiffResult",
    "Generation",
    "GenerationsParams",
    "GenerationsResult",
    "MethodDef",
    "Notification",
    "OkResult",
    "RewindParams",
    "RewindResult",
    "ShutdownParams",
    "StateParams",
    "StateResult",
    "StatusParams",
    "StatusResult",
    "SubscribeParams",
    "SubscribeResult",
    "Topic",
    "UnsubscribeParams",
    "GcResult",
    "RetentionGcParams",
    "RetentionGetParams",
    "RetentionInfo",
    "RetentionPolicyInfo",
    "RetentionSetParams",
    "WalAppendParams",
    "WalAppendResult",
]

PROTOCOL_VERSION: Final = 1

Seq = int
NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class OkResult(Result, kw_only=True):
    ok: bool = True


# -- daemon.* ---------------------------------------------------------------


class StatusParams(Params, kw_only=True):
    pass


class StatusResult(Result, kw_only=True):
    """`ambiguous` lists steps left without a result by a crash (see agents.resolve)."""

    head: Seq
    branch: int
    version: str
    pid: int
    protocol: int = PROTOCOL_VERSION
    floor: Seq = 0
    state_dir: str = ""
    socket: str = ""
    agents: int = 0
    generations: int = 0
    connections: int = 0
    uptime_s: float = 0.0
    ambiguous: list[agent_methods.AmbiguousStep] = []


class ShutdownParams(Params, kw_only=True):
    pass


# -- generations.list ------------------------------------------------------


class GenerationsParams(Params, kw_only=True):
    agent: str | None = None
    kind: GenerationKind | None = None
    all_branches: bool = False
    cursor: NonNegative | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 50


class Generation(Result, kw_only=True):
    """A user-facing checkpoint: a turn, plan-step or phase boundary."""

    seq: Seq
    kind: GenerationKind
    agent: str
    active: bool
    branch: int
    created_at: float
    label: str = ""


class GenerationsResult(Result, kw_only=True):
    """Newest first; pass `next_cursor` back as `cursor` for the next page."""

    generations: list[Generation]
    next_cursor: Seq | None = None


# -- rewind / checkout ------------------------------------------------------


class RewindParams(Params, kw_only=True):
    seq: NonNegative


class CheckoutParams(Params, kw_only=True):
    """`force`: restore the workspace (when workspace rewind is on) even over changes
    reynd did not record; the overwritten content is kept and can be brought back."""

    seq: NonNegative
    force: bool = False


class CancelledChain(Result, kw_only=True):
    agent: str
    turn_id: str


class RewindResult(Result, kw_only=True):
    mode: Literal["undo", "fork_switch"]
    reset_seq: Seq
    target: Seq
    branch: int
    cancelled: list[CancelledChain] = []
    duration_ms: float = 0.0


# -- branches.list ----------------------------------------------------------


class BranchesParams(Params, kw_only=True):
    pass


class BranchInfo(Result, kw_only=True):
    id: int
    origin_seq: Seq
    parent: int | None
    tip: Seq
    active: bool


class BranchesResult(Result, kw_only=True):
    branches: list[BranchInfo]
    head: Seq


# -- state.get / state.diff ------------------------------------------------


class StateParams(Params, kw_only=True):
    seq: NonNegative | None = None
    agent: str | None = None


class StateResult(Result, kw_only=True):
    seq: Seq
    active: bool
    branch: int
    agents: dict[str, AgentState]


class DiffParams(Params, kw_only=True):
    from_seq: NonNegative
    to_seq: NonNegative
    agent: str | None = None


class Change(Result, kw_only=True):
    """One difference: `path` is a JSON pointer inside the agent's state."""

    path: str
    op: Literal["add", "remove", "change"]
    before: Any = None
    after: Any = None


class DiffResult(Result, kw_only=True):
    from_seq: Seq
    to_seq: Seq
    agents: dict[str, list[Change]]


# -- subscribe -------------------------------------------------------------

Topic = Literal["records", "generations", "rewinds", "agents"]


class SubscribeParams(Params, kw_only=True):
    topics: list[Topic] = msgspec.field(
        default_factory=lambda: ["records", "generations", "rewinds", "agents"]
    )


class SubscribeResult(Result, kw_only=True):
    subscription: str
    head: Seq


class UnsubscribeParams(Params, kw_only=True):
    subscription: str


class Notification(Result, kw_only=True):
    """Params of a server-to-client `notify` message.

    `seq` orders notifications: a subscriber that sees a gap in `records` seqs
    resyncs with state.get. `lagged` notices use method `lagged` instead.
    """

    subscription: str
    topic: Topic
    seq: Seq
    data: dict[str, Any]


class RpcDiscoverParams(Params, kw_only=True):
    pass


# -- wal.append ------------------------------------------------------------


class WalAppendParams(Params, kw_only=True):
    """An event written by an external runtime that drives an agent itself.

    `kind` and `data` form one event of reynd.protocol.events (minus seq/ts).
    `based_on` is the tip seq the writer last saw: the append is refused with
    stale_branch when that seq is no longer on the active lineage.
    """

    agent: str
    kind: str
    data: dict[str, Any] = {}
    based_on: NonNegative | None = None


class WalAppendResult(Result, kw_only=True):
    seq: Seq
    branch: int


# -- retention ---------------------------------------------------------------


class RetentionPolicyInfo(Result, kw_only=True):
    """The policy in force (see docs/operations.md#retention)."""

    wal_keep_records: int
    wal_keep_age_s: float
    wal_keep_bytes: int
    snapshot_keep: int
    snapshot_keep_age_s: float
    gc_interval_s: float


class RetentionGetParams(Params, kw_only=True):
    pass


class RetentionInfo(Result, kw_only=True):
    """`floor`: the lowest seq still in the WAL; `coarse`: snapshot seqs kept below it."""

    policy: RetentionPolicyInfo
    floor: Seq
    head: Seq
    wal_bytes: int
    segments: int
    snapshots: int
    coarse: list[Seq]


class RetentionSetParams(Params, kw_only=True):
    """Change the policy in force; persisted, it overrides reynd.toml and follows rewinds.

    Fields left out keep their value.
    """

    wal_keep_records: NonNegative | None = None
    wal_keep_age_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    wal_keep_bytes: NonNegative | None = None
    snapshot_keep: NonNegative | None = None
    snapshot_keep_age_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    gc_interval_s: Annotated[float, msgspec.Meta(ge=0)] | None = None


class RetentionGcParams(Params, kw_only=True):
    pass


class GcResult(Result, kw_only=True):
    floor_before: Seq
    floor: Seq
    segments_dropped: int
    bytes_dropped: int
    snapshots_dropped: int
    snapshots_written: int
    duration_ms: float


def _retention_methods() -> tuple[MethodDef, ...]:
    return (
        MethodDef(
            "retention.get",
            RetentionGetParams,
            RetentionInfo,
            "The retention policy, the WAL floor and what is kept.",
        ),
        MethodDef(
            "retention.set",
            RetentionSetParams,
            RetentionInfo,
            "Change the retention policy (persisted in state/config/config.db).",
            mutating=True,
        ),
        MethodDef(
            "retention.gc",
            RetentionGcParams,
            GcResult,
            "Collect now what the policy no longer keeps.",
            mutating=True,
        ),
    )


def _agent_methods() -> tuple[MethodDef, ...]:
    a = agent_methods
    unknown = (errors.UnknownAgent,)
    return (
        MethodDef(
            "agents.create",
            a.AgentsCreateParams,
            a.AgentInfo,
            "Create an agent with its executor (builtin, command or openai).",
            (errors.AgentExists,),
            mutating=True,
        ),
        MethodDef(
            "agents.configure",
            a.AgentsConfigureParams,
            a.AgentInfo,
            "Change an agent's executor or options (recorded in the WAL).",
            unknown,
            mutating=True,
        ),
        MethodDef(
            "agents.list",
            a.AgentsListParams,
            a.AgentsListResult,
            "Every agent with its runtime status.",
        ),
        MethodDef(
            "agents.get",
            a.AgentsGetParams,
            a.AgentInfo,
            "One agent's runtime status, including an ambiguous step.",
            unknown,
        ),
        MethodDef(
            "agents.send",
            a.AgentsSendParams,
            a.AgentsSendResult,
            "Put a message in an agent's inbox; its turn runs in the daemon.",
            unknown,
            mutating=True,
        ),
        MethodDef(
            "agents.cancel",
            a.AgentsCancelParams,
            a.AgentsCancelResult,
            "Hard-cancel the agent's turn in flight (its step is not committed).",
            unknown,
            mutating=True,
        ),
        MethodDef(
            "agents.resolve",
            a.AgentsResolveParams,
            a.AgentInfo,
            "Resolve an ambiguous step after a crash: retry, skip or abort.",
            (errors.UnknownAgent, errors.NothingToDo),
            mutating=True,
        ),
        MethodDef(
            "interventions.list",
            a.InterventionsListParams,
            a.InterventionsListResult,
            "Questions agents are waiting on.",
        ),
        MethodDef(
            "interventions.answer",
            a.InterventionsAnswerParams,
            a.InterventionsAnswerResult,
            "Answer a question (an early answer is buffered).",
            unknown,
            mutating=True,
        ),
        MethodDef(
            "act_turn.rewind",
            a.ActTurnRewindParams,
            a.ActTurnRewindResult,
            "Rewind inside a turn: earlier steps replay from memos, later ones run again.",
            (errors.UnknownAgent, errors.NotActive, errors.InvalidEvent, *_RANGE),
            mutating=True,
        ),
    )


def _audit_methods() -> tuple[MethodDef, ...]:
    au = audit_methods
    run = (errors.UnknownRun,)
    found = (errors.UnknownRun, errors.EventNotFound, errors.SeqOutOfRange)
    return (
        MethodDef(
            "events.runs",
            au.EventsRunsParams,
            au.EventsRunsResult,
            "The daemon runs in the audit log, oldest first.",
        ),
        MethodDef(
            "events.list",
            au.EventsListParams,
            au.EventsListResult,
            "Audit events, oldest first, filtered, with cursor pagination.",
            run,
        ),
        MethodDef(
            "events.get",
            au.EventsGetParams,
            au.AuditEvent,
            "One audit event, by run and index or by seq.",
            found,
        ),
        MethodDef(
            "replay.walk",
            au.ReplayWalkParams,
            au.ReplayWalkResult,
            "Step through a run's events, each with what it changed (read-only).",
            run,
        ),
        MethodDef(
            "replay.seek",
            au.ReplaySeekParams,
            au.ReplaySeekResult,
            "Agents at a point of a run, rebuilt from the audit log alone (read-only).",
            (*found, errors.UnknownAgent),
        ),
        MethodDef(
            "replay.compare",
            au.ReplayCompareParams,
            au.ReplayCompareResult,
            "Two runs, points or branches step by step: where they diverge and how.",
            found,
        ),
    )


# -- the table --------------------------------------------------------------


@dataclass(frozen=True)
class MethodDef:
    """One method: its types, what it does, and the errors it may return."""

    name: str
    params: type[Params]
    result: Any
    summary: str
    errors: tuple[type[errors.ReyndError], ...] = field(default=())
    mutating: bool = False


_RANGE = (errors.SeqOutOfRange, errors.BelowFloor)

METHODS: Final[dict[str, MethodDef]] = {
    m.name: m
    for m in (
        MethodDef("daemon.status", StatusParams, StatusResult, "Tip, current branch, version."),
        MethodDef(
            "daemon.shutdown", ShutdownParams, OkResult, "Stop the daemon cleanly.", mutating=True
        ),
        MethodDef(
            "generations.list",
            GenerationsParams,
            GenerationsResult,
            "User-facing checkpoints, newest first, with cursor pagination.",
            (errors.UnknownAgent,),
        ),
        MethodDef(
            "rewind",
            RewindParams,
            RewindResult,
            "Move the tip back to an active seq by appending a reset record.",
            (errors.NotActive, errors.NothingToDo, *_RANGE),
            mutating=True,
        ),
        MethodDef(
            "checkout",
            CheckoutParams,
            RewindResult,
            "Undo to an active seq or switch to an abandoned branch at any retained seq.",
            (errors.NothingToDo, *_RANGE),
            mutating=True,
        ),
        MethodDef("branches.list", BranchesParams, BranchesResult, "The branch tree."),
        MethodDef(
            "state.get",
            StateParams,
            StateResult,
            "State as of any retained seq (default: the tip), without moving the tip.",
            (errors.UnknownAgent, *_RANGE),
        ),
        MethodDef(
            "state.diff",
            DiffParams,
            DiffResult,
            "Differences between the states as of two seqs, per agent.",
            (errors.UnknownAgent, *_RANGE),
        ),
        MethodDef(
            "subscribe",
            SubscribeParams,
            SubscribeResult,
            "Receive `notify` messages for new records, generations, rewinds, agent status.",
        ),
        MethodDef("unsubscribe", UnsubscribeParams, OkResult, "Stop a subscription."),
        MethodDef(
            "wal.append",
            WalAppendParams,
            WalAppendResult,
            "Append one typed event for an agent, fenced on the branch the writer saw.",
            (errors.StaleBranch, errors.InvalidEvent, errors.UnknownAgent),
            mutating=True,
        ),
        *_agent_methods(),
        *_retention_methods(),
        *_audit_methods(),
        MethodDef(
            "rpc.discover", RpcDiscoverParams, dict[str, Any], "This API as an OpenRPC document."
        ),
    )
}

"""Params and results of the audit log and the replay debugger (registered in methods.METHODS).

The audit log (`<state_dir>/events/<run_id>.jsonl.gz`, docs/audit.md) records
every user-visible event of each daemon run. These methods only read it:
none of them appends to the WAL or moves the tip. An event is addressed by
its run and its index in that run (`run`, `index`), or by its WAL seq.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from reynd.protocol import errors
from reynd.protocol.base import MethodDef, Params, Result
from reynd.protocol.moves import ResetBy
from reynd.protocol.names import AgentRef
from reynd.protocol.state import AgentState

__all__ = [
    "DEFS",
    "AuditEvent",
    "CancelledTurn",
    "ChangeBrief",
    "CompareStep",
    "EventsGetParams",
    "EventsListParams",
    "EventsListResult",
    "EventsRunsParams",
    "EventsRunsResult",
    "FieldDiff",
    "Point",
    "PointInfo",
    "ReplayCompareParams",
    "ReplayCompareResult",
    "ReplaySeekParams",
    "ReplaySeekResult",
    "ReplayWalkParams",
    "ReplayWalkResult",
    "ResetInfo",
    "RunSummary",
    "WalkStep",
]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
SeqRange = list[int]  # [first, last], inclusive


class CancelledTurn(Result, kw_only=True):
    agent: str
    turn_id: str


class ResetInfo(Result, kw_only=True):
    """What a reset record did: `op` wrote it, `mode` is what it turned out to be.

    `mode` and `cancelled` come from the finished reset; they are absent when
    the daemon stopped between the reset record and the end of the reset.
    """

    op: Literal["rewind", "checkout", "act_turn"]
    target: int
    supersedes: int
    mode: Literal["undo", "fork_switch"] | None = None
    cancelled: list[CancelledTurn] = []
    duration_ms: float | None = None
    agent: str | None = None
    reason: str = ""
    by: ResetBy | None = None


class AuditEvent(Result, kw_only=True):
    """One line of the audit log.

    `kind` is the WAL event's kind, except for reset records (`rewind`,
    `checkout`, `act_turn.rewind`, with `reset`) and the run's own lines
    (`run.started`, `run.stopped`: `seq` is the tip then, `info` says more).
    `event` is the WAL event exactly as committed (absent for the run's lines).
    """

    run: str
    index: int
    kind: str
    seq: int
    branch: int
    ts: float
    agent: str | None = None
    summary: str = ""
    reset: ResetInfo | None = None
    event: dict[str, Any] | None = None
    info: dict[str, Any] | None = None


# -- events.runs -----------------------------------------------------------------


class EventsRunsParams(Params, kw_only=True):
    pass


class RunSummary(Result, kw_only=True):
    """A daemon run in the audit log.

    `first_index` > 0 means audit retention removed the run's first files;
    `stopped` is False for the current run and for a run that ended in a
    crash (its last lines may be missing: the audit log is not fsynced).
    """

    run: str
    current: bool
    started_at: float | None
    first_index: int
    events: int
    first_seq: int | None
    last_seq: int | None
    files: int
    bytes: int
    stopped: bool


class EventsRunsResult(Result, kw_only=True):
    runs: list[RunSummary]
    current: str
    directory: str


# -- events.list / events.get ----------------------------------------------------


class EventsListParams(Params, kw_only=True):
    """Oldest first. `run` None: every run. `cursor`: a previous page's `next_cursor`."""

    run: str | None = None
    agent: AgentRef | None = None
    kind: list[str] = []
    branch: int | None = None
    from_seq: NonNegative | None = None
    to_seq: NonNegative | None = None
    cursor: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100


class EventsListResult(Result, kw_only=True):
    events: list[AuditEvent]
    next_cursor: str | None = None


class EventsGetParams(Params, kw_only=True):
    """Either `seq`, or `run` and `index`."""

    run: str | None = None
    index: NonNegative | None = None
    seq: NonNegative | None = None


# -- replay.walk -----------------------------------------------------------------


class ChangeBrief(Result, kw_only=True):
    """One change to an agent's state; values are compact JSON previews."""

    path: str
    op: Literal["add", "remove", "change"]
    before: str | None = None
    after: str | None = None


class WalkStep(Result, kw_only=True):
    """An event and, per agent, what it changed (at most `changes_limit` each)."""

    event: AuditEvent
    changes: dict[str, list[ChangeBrief]] = {}
    more_changes: int = 0


class ReplayWalkParams(Params, kw_only=True):
    """Step through `run` (default: the current run) from `index`."""

    run: str | None = None
    index: NonNegative = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 20
    agent: AgentRef | None = None
    changes_limit: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 20


class ReplayWalkResult(Result, kw_only=True):
    """`missing`: seqs the walk needed that the audit log does not hold."""

    run: str
    steps: list[WalkStep]
    next_index: int | None = None
    complete: bool = True
    missing: list[SeqRange] = []


# -- replay.seek -----------------------------------------------------------------


class ReplaySeekParams(Params, kw_only=True):
    """A point: `seq`, or `run` and `index` (the state just after that event)."""

    run: str | None = None
    index: NonNegative | None = None
    seq: NonNegative | None = None
    agent: AgentRef | None = None


class ReplaySeekResult(Result, kw_only=True):
    """Agents as of `seq`, rebuilt from the audit log alone (never the WAL).

    `complete` is False when seqs of the lineage are missing from the audit
    log (`missing`): recorded before the log existed, removed by its
    retention, or lost in a crash.
    """

    seq: int
    branch: int
    run: str | None
    index: int | None
    agents: dict[str, AgentState]
    complete: bool
    missing: list[SeqRange] = []


# -- replay.compare --------------------------------------------------------------


class Point(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One side of a comparison.

    `seq` (or `run` + `index`): the history that leads to that point, along
    its lineage; `branch`: the same, up to that branch's last seq; `run`
    alone: the run's events in the order they were recorded.
    """

    run: str | None = None
    index: NonNegative | None = None
    seq: NonNegative | None = None
    branch: NonNegative | None = None


class FieldDiff(Result, kw_only=True):
    path: str
    a: str | None = None
    b: str | None = None


class CompareStep(Result, kw_only=True):
    """Step `step` of the alignment: the same on both sides, changed, or on one side only."""

    step: int
    op: Literal["same", "changed", "only_a", "only_b"]
    a: AuditEvent | None = None
    b: AuditEvent | None = None
    fields: list[FieldDiff] = []


class PointInfo(Result, kw_only=True):
    label: str
    seq: int | None
    branch: int | None
    events: int


class ReplayCompareParams(Params, kw_only=True):
    """Align `a` and `b` step by step. Fields in `ignore` (and seq, ts) are not compared."""

    a: Point
    b: Point
    agent: AgentRef | None = None
    ignore: list[str] = msgspec.field(default_factory=lambda: ["message_id", "turn_id"])
    from_step: NonNegative = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 50
    include_same: bool = False


class ReplayCompareResult(Result, kw_only=True):
    """`first_divergence`: the first step that is not `same` (None: identical).

    `fork_seq`: for two lineages, the last seq they share. `state`: per agent,
    how the state at the end of `a` differs from the state at the end of `b`.
    """

    a: PointInfo
    b: PointInfo
    steps_total: int
    same: int
    diverged: bool
    first_divergence: int | None
    fork_seq: int | None
    steps: list[CompareStep]
    next_step: int | None = None
    state: dict[str, list[ChangeBrief]] = {}
    complete: bool = True


_RUN = (errors.UnknownRun,)
_FOUND = (errors.UnknownRun, errors.EventNotFound, errors.SeqOutOfRange)
DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "events.runs",
        EventsRunsParams,
        EventsRunsResult,
        "The daemon runs in the audit log, oldest first.",
    ),
    MethodDef(
        "events.list",
        EventsListParams,
        EventsListResult,
        "Audit events, oldest first, filtered, with cursor pagination.",
        _RUN,
    ),
    MethodDef(
        "events.get",
        EventsGetParams,
        AuditEvent,
        "One audit event, by run and index or by seq.",
        _FOUND,
    ),
    MethodDef(
        "replay.walk",
        ReplayWalkParams,
        ReplayWalkResult,
        "Step through a run's events, each with what it changed (read-only).",
        _RUN,
    ),
    MethodDef(
        "replay.seek",
        ReplaySeekParams,
        ReplaySeekResult,
        "Agents at a point of a run, rebuilt from the audit log alone (read-only).",
        (*_FOUND, errors.UnknownAgent),
    ),
    MethodDef(
        "replay.compare",
        ReplayCompareParams,
        ReplayCompareResult,
        "Two runs, points or branches step by step: where they diverge and how.",
        _FOUND,
    ),
)

"""Params and results of every JSON-RPC method, and the table that names them.

The daemon validates params with these types, the client decodes results with
them, and `rpc.discover` renders the OpenRPC document from `METHODS`: one
definition, three uses. Field names are part of the contract: add, never rename.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from reynd.protocol import (
    agent_methods,
    audit_methods,
    errors,
    moves,
    read_methods,
    retention_methods,
    tag_methods,
    workspace_methods,
)
from reynd.protocol.appendable import DATA_SCHEMA, KINDS
from reynd.protocol.base import SEQ_RANGE_ERRORS, MethodDef, Params, Result
from reynd.protocol.events import GenerationKind, Message
from reynd.protocol.moves import ResetBy, UndoParams
from reynd.protocol.names import AgentRef, Ident, Reason, TagName
from reynd.protocol.preview import Effects, MovePreview

# Re-exported (listed in __all__): clients name every result type through this module.
from reynd.protocol.retention_methods import (
    BudgetForced,
    DiskPart,
    DiskUsage,
    DuParams,
    GcFree,
    GcResult,
    RetentionGcParams,
    RetentionGetParams,
    RetentionInfo,
    RetentionPolicyInfo,
    RetentionSetParams,
)
from reynd.protocol.state import AgentState
from reynd.protocol.timespec import TimeSpec

__all__ = [
    "METHODS",
    "PROTOCOL_VERSION",
    "BranchInfo",
    "BranchesParams",
    "BranchesResult",
    "CancelledChain",
    "Change",
    "CheckoutParams",
    "Conversation",
    "DiffParams",
    "DiffResult",
    "FileChange",
    "Generation",
    "GenerationsParams",
    "GenerationsResult",
    "MethodDef",
    "NOTIFICATIONS",
    "Lagged",
    "Notification",
    "OkResult",
    "RewindParams",
    "RewindResult",
    "ShutdownParams",
    "StateParams",
    "StateResult",
    "StatusParams",
    "FollowInfo",
    "ReplicationInfo",
    "RestorePending",
    "StatusResult",
    "SubscribeParams",
    "SubscribeResult",
    "Topic",
    "UnsubscribeParams",
    "BudgetForced",
    "DiskPart",
    "DiskUsage",
    "DuParams",
    "GcFree",
    "GcResult",
    "RetentionGcParams",
    "RetentionGetParams",
    "RetentionInfo",
    "RetentionPolicyInfo",
    "RetentionSetParams",
    "BatchEvent",
    "WalAppendBatchParams",
    "WalAppendBatchResult",
    "WalAppendParams",
    "WalAppendResult",
    "WorkspaceInfo",
    "one_address",
]

PROTOCOL_VERSION: Final = 1

Seq = int
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
# A time (`at`, `before`, `after`): Unix seconds, or a string, ISO 8601 or a duration
# ago (`10m`), resolved by the daemon's clock (reynd.protocol.timespec).
Time = Annotated[
    TimeSpec,
    msgspec.Meta(
        description="Unix seconds, or an ISO 8601 time, or a duration ago: 90s, 10m, 2h, 1d."
    ),
]
# `back`: how many checkpoints back on the active branch.
Back = Annotated[int, msgspec.Meta(ge=1)]


def no_dry_run_with_follow(params: RewindParams | CheckoutParams) -> None:
    """Refuse `dry_run` with what it does not preview, `then`, `reapply` or `only` (in
    `__post_init__`, as one_address)."""
    given = [f for f in ("then", "reapply", "only") if getattr(params, f, None) is not None]
    if params.dry_run and given:
        which = given[0]
        raise ValueError(
            f"field `{which}` conflicts with `dry_run`: a dry run previews the move alone; "
            f"preview without `{which}`, then make the move with it"
        )


def one_address(params: Params, names: tuple[str, ...], *, required: bool = True) -> None:
    """Refuse params that name a seq in more than one way (or in none, when `required`).

    Called from the params' `__post_init__`: msgspec turns the ValueError into
    an invalid_params answer that quotes this message.
    """
    given = [name for name in names if getattr(params, name) is not None]
    if len(given) > 1 or (required and not given):
        choice = " / ".join(names)
        got = ", ".join(given) if given else "none"
        # "field `x`" is how the answer's data names the field (validation_details).
        which = f"field `{given[1]}` conflicts" if given else f"missing field `{names[0]}`"
        raise ValueError(f"{which}: give exactly one of {choice} (got {got})")


class OkResult(Result, kw_only=True):
    ok: bool = True


# -- daemon.* ---------------------------------------------------------------


class StatusParams(Params, kw_only=True):
    pass


class ReplicationInfo(Result, kw_only=True):
    """Where the WAL is shipped and how far behind it is (`[replicate]` in reynd.toml).

    `state`: shipping (all well), retrying (the store failed; `last_error`
    says how, the backlog grows and is shipped when it answers), superseded
    (another daemon claimed the prefix: this one stopped shipping), refused
    (credentials or permissions failed after start), starting.
    """

    url: str
    state: Literal["starting", "shipping", "retrying", "superseded", "refused"]
    generation: int | None = None
    shipped: Seq = 0
    # The first seq a restore gets: remote retention follows the local floor.
    floor: Seq = 0
    backlog_records: int = 0
    backlog_bytes: int = 0
    last_shipped_at: float | None = None
    last_error: str | None = None
    interval_s: float = 1.0


class FollowInfo(Result, kw_only=True):
    """A read-only replica's source and lag (`reynd serve --follow URL`).

    `state`: following (the last pull succeeded), retrying (`last_error`),
    diverged (this directory holds another history: it follows no more),
    gap (the replica lacks seqs it says were shipped, `last_error` names
    them: this copy stops before them), starting. `remote_head`: the last
    seq the replica says was shipped; `lag_records`: records beyond this
    copy's head up to it, as of the last listing.
    """

    url: str
    state: Literal["starting", "following", "retrying", "diverged", "gap"]
    generation: int | None = None
    remote_head: Seq = 0
    lag_records: int = 0
    last_pulled_at: float | None = None
    last_error: str | None = None
    interval_s: float = 1.0


class RestorePending(Result, kw_only=True):
    """A workspace restore the daemon could not finish: the reset `reset_seq` to `target` stands.

    `paths` (the first 100 of `count`) were not restored, `reasons[path]`
    says why. The journal stays: a start finishes the restore (the files
    become the tree as of the tip), and so does a later rewind or checkout.
    """

    target: Seq
    reset_seq: Seq
    count: int = 0
    paths: list[str] = []
    reasons: dict[str, str] = {}


class WorkspaceInfo(Result, kw_only=True):
    """Workspace rewind (`[workspace]` in reynd.toml): its directory, and a pending restore."""

    root: str
    restore_pending: RestorePending | None = None


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
    # The most connections served at once: max_connections, or fewer when the
    # open-file limit leaves less room (docs/protocol.md#framing).
    max_connections: int = 0
    subscriptions: int = 0
    uptime_s: float = 0.0  # by the monotonic clock: a step of the wall clock never moves it
    # Where the daemon logs: an absolute file path (--log-file), journald or stderr.
    log: str = ""
    ambiguous: list[agent_methods.AmbiguousStep] = []
    replication: ReplicationInfo | None = None
    follow: FollowInfo | None = None
    workspace: WorkspaceInfo | None = None


class ShutdownParams(Params, kw_only=True):
    pass


# -- generations.list ------------------------------------------------------


class GenerationsParams(Params, kw_only=True):
    agent: AgentRef | None = None
    kind: GenerationKind | None = None
    all_branches: bool = False
    cursor: NonNegative | None = None
    # The checkpoints on lineage(seq) instead of the active branch's: an abandoned
    # branch's history as it was (issue 27: bisect on an abandoned branch).
    lineage: NonNegative | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 50
    # Only checkpoints made after / before these times (docs/concepts.md#addresses).
    before: Time | None = None
    after: Time | None = None

    def __post_init__(self) -> None:
        if self.all_branches and self.lineage is not None:
            raise ValueError(
                "field `lineage` conflicts: all_branches lists every branch, lineage the "
                "checkpoints of one seq's lineage; give one of them"
            )


class Generation(Result, kw_only=True):
    """A user-facing checkpoint: a turn, plan-step or phase boundary."""

    seq: Seq
    kind: GenerationKind
    agent: str
    active: bool
    branch: int
    created_at: float
    label: str = ""
    tags: list[str] = []  # the tags naming this seq (issue 24)


class GenerationsResult(Result, kw_only=True):
    """Newest first; pass `next_cursor` back as `cursor` for the next page."""

    generations: list[Generation]
    next_cursor: Seq | None = None


# -- rewind / checkout ------------------------------------------------------


_REWIND_ADDRESSES: Final = ("seq", "tag", "at", "back")
_CHECKOUT_ADDRESSES: Final = ("seq", "tag", "at")
_STATE_ADDRESSES: Final = ("seq", "tag", "at")


# What a move delivers again from the branch it abandons (issue 25).
Reapply = Literal["messages"]
# What a move restores (issue 25): both by default (the workspace only when
# workspace rewind is on), or one of the two.
Only = Literal["runtime", "workspace"]


def _check_follow(params: RewindParams | CheckoutParams) -> None:
    """Refuse `replaces` without `then`, and `then`/`reapply` with only "workspace"."""
    if params.replaces is not None and params.then is None:
        raise ValueError(
            "field `replaces` needs `then`: it names the message `then` supersedes "
            "(so that `reapply` does not deliver it again)"
        )
    _check_only(params)


def _check_only(params: RewindParams | CheckoutParams) -> None:
    """Refuse `then`/`reapply` with only "workspace": they need the runtime restored."""
    if params.only == "workspace" and (params.then is not None or params.reapply is not None):
        which = "then" if params.then is not None else "reapply"
        raise ValueError(
            f"field `{which}` conflicts with only=workspace: a workspace-only restore leaves the "
            "conversation at the tip; drop `only` (or use only=runtime) to deliver messages"
        )


class RewindParams(Params, kw_only=True):
    """Exactly one of `seq`; `tag`, the seq it names; `at`, the newest checkpoint on the
    active branch at or before that time; `back`, that many checkpoints back on the
    active branch. `reason`: kept in the reset record, shown wherever the move is.
    `then`: deliver a message to an agent right after the reset, in the same atomic
    batch (edit and retry, issue 25): after a crash there is either both or neither.
    `reapply` "messages": the messages received on the branch the move abandons are
    delivered again, in their order, after `then`, in the same batch.
    `dry_run`: write nothing and cancel nothing; the result says what the move
    would do (`preview`, `cancelled`) and what it cannot undo (`effects`).
    `only` "runtime": the conversation and agent state move, the workspace's files stay
    as they are; "workspace": the files become those as of the target, the runtime stays
    at the tip (needs workspace rewind on). Default: both.
    `replaces`: the seq of the message.received that `then` supersedes (an edit):
    `reapply` does not deliver it again."""

    seq: NonNegative | None = None
    at: Time | None = None
    back: Back | None = None
    reason: Reason = ""
    tag: TagName | None = None
    then: agent_methods.AgentsSendParams | None = None
    reapply: Reapply | None = None
    dry_run: bool = False
    only: Only | None = None
    replaces: NonNegative | None = None

    def __post_init__(self) -> None:
        one_address(self, _REWIND_ADDRESSES)
        no_dry_run_with_follow(self)
        _check_follow(self)


class CheckoutParams(Params, kw_only=True):
    """Exactly one of `seq` or `at`, where the tip was at that time (whatever branch).

    `force`: restore the workspace (when workspace rewind is on) even over changes
    reynd did not record; the overwritten content is recorded first, just before the
    reset record R, and `checkout R-1` brings it back. `then`, `reapply`, `dry_run`,
    `only`, `replaces`: as for rewind."""

    seq: NonNegative | None = None
    force: bool = False
    at: Time | None = None
    reason: Reason = ""
    tag: TagName | None = None
    then: agent_methods.AgentsSendParams | None = None
    reapply: Reapply | None = None
    dry_run: bool = False
    only: Only | None = None
    replaces: NonNegative | None = None

    def __post_init__(self) -> None:
        one_address(self, _CHECKOUT_ADDRESSES)
        no_dry_run_with_follow(self)
        _check_follow(self)


class Redelivered(Result, kw_only=True):
    """A message `reapply` delivered again: the same `message_id`, at `seq` on the new
    branch, first received at `from_seq` on the branch the move abandoned."""

    agent: str
    message_id: str
    from_seq: Seq
    seq: Seq


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
    # How the target was addressed (seq, tag, at, back), and for `at` the time it meant.
    resolved_from: str = "seq"
    at_time: float | None = None
    reason: str = ""
    by: ResetBy | None = None
    # The message `then` delivered right after the reset record (its seq is reset_seq + 1),
    # and with `then.wait` how its turn went, as agents.send answers.
    sent: agent_methods.AgentsSendResult | None = None
    reapplied: list[Redelivered] = []  # with `reapply`, in seq order
    # Issue 25: what the abandoned future did that no rewind undoes (every move; null
    # when a move did not read it: a branch of more than 8 MiB of log). With
    # `dry_run` nothing was written: `reset_seq` is the seq the reset record would take,
    # `cancelled` the turns it would cancel, `preview` what else it would change.
    effects: Effects | None = None
    dry_run: bool = False
    preview: MovePreview | None = None
    # With `only`: what was restored. With "workspace", the reset record targets the
    # tip itself (`target`) and the files are those as of `files_as_of` (issue 25).
    only: Only | None = None
    files_as_of: Seq | None = None


# -- branches.list ----------------------------------------------------------


class BranchesParams(Params, kw_only=True):
    pass


class BranchInfo(Result, kw_only=True):
    id: int
    origin_seq: Seq
    parent: int | None
    tip: Seq
    active: bool
    tags: list[str] = []  # the tags naming a seq of this branch (issue 24)


class BranchesResult(Result, kw_only=True):
    branches: list[BranchInfo]
    head: Seq


# -- state.get / state.diff ------------------------------------------------


class StateParams(Params, kw_only=True):
    """At most one of `seq`, `tag` or `at` (where the tip was at that time); none: the tip.

    `history_last`: each agent's `history` holds only its last N messages (a page that
    shows the end of a long conversation); `history_from` says where each cut one starts."""

    seq: NonNegative | None = None
    agent: AgentRef | None = None
    at: Time | None = None
    tag: TagName | None = None
    history_last: NonNegative | None = None

    def __post_init__(self) -> None:
        one_address(self, _STATE_ADDRESSES, required=False)


class StateResult(Result, kw_only=True):
    seq: Seq
    active: bool
    branch: int
    agents: dict[str, AgentState]
    # With `history_last`: per agent whose history was cut, the index of its first message
    # kept (the messages before it are not in the answer).
    history_from: dict[str, int] = {}


class DiffParams(Params, kw_only=True):
    """Each side is a seq or a tag naming it (`from_tag`, `to_tag`): exactly one.

    `files`: also diff the workspace's files (when workspace rewind is on). `patch`: also
    give the differences as one RFC 6902 JSON Patch over the agents (see DiffResult)."""

    from_seq: NonNegative | None = None
    to_seq: NonNegative | None = None
    agent: AgentRef | None = None
    from_tag: TagName | None = None
    to_tag: TagName | None = None
    files: bool = False
    patch: bool = False

    def __post_init__(self) -> None:
        one_address(self, ("from_seq", "from_tag"))
        one_address(self, ("to_seq", "to_tag"))


class Change(Result, kw_only=True):
    """One difference: `path` is a JSON pointer inside the agent's state."""

    path: str
    op: Literal["add", "remove", "change"]
    before: Any = None
    after: Any = None


class Conversation(Result, kw_only=True):
    """One agent's messages: the history both sides share up to index `common`, then
    what only `from_seq` has (`removed`) and what only `to_seq` has (`added`)."""

    common: int
    removed: list[Message] = []
    added: list[Message] = []


class FileChange(Result, kw_only=True):
    """One workspace path that differs. `patch`: a unified diff of a text file (None for a
    binary file, a symlink, or one too large to diff: `binary` says which)."""

    path: str
    op: Literal["add", "remove", "change"]
    before: workspace_methods.FileEntry | None = None
    after: workspace_methods.FileEntry | None = None
    binary: bool = False
    patch: str | None = None


class DiffResult(Result, kw_only=True):
    """`fork`: the newest seq on both lineages (the fork point of two branches; `from_seq`
    itself when it lies on lineage(`to_seq`)). `conversations`: per agent whose messages
    differ. `files`: with `files` when workspace rewind is on, else None. `patch`: with
    `patch`, an RFC 6902 JSON Patch that turns state.get's `agents` as of `from_seq`
    into those as of `to_seq` (paths `/AGENT/...`)."""

    from_seq: Seq
    to_seq: Seq
    agents: dict[str, list[Change]]
    fork: Seq | None = None
    conversations: dict[str, Conversation] = {}
    files: list[FileChange] | None = None
    patch: list[dict[str, Any]] | None = None


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


class Lagged(Result, kw_only=True):
    """Params of a server-to-client `lagged` message: the subscriber fell behind.

    Its queue filled (it read too slowly), so it was unsubscribed after
    `dropped_after_seq`, the last seq it was sent (null: none). Resync with
    state.get, then subscribe again.
    """

    subscription: str
    dropped_after_seq: Seq | None


NOTIFICATIONS: Final[dict[str, tuple[type[Result], str]]] = {
    "notify": (Notification, "An event on a subscribed topic (see subscribe)."),
    "lagged": (Lagged, "The subscription was dropped for falling behind: resync."),
}
"""Messages the daemon sends without an id, by method name: (params type, summary)."""


class RpcDiscoverParams(Params, kw_only=True):
    pass


# -- wal.append ------------------------------------------------------------

# The method checks `kind` against KINDS itself (its refusal says which kinds there
# are) and `data` against the kind's strict event (appendable.BY_KIND, from the same
# strict types as DATA_SCHEMA): the document shows both from the same tables.
EventKind = Annotated[Ident, msgspec.Meta(extra_json_schema={"enum": list(KINDS)})]
EventData = Annotated[dict[str, Any], msgspec.Meta(extra_json_schema=DATA_SCHEMA)]


class WalAppendParams(Params, kw_only=True):
    """An event written by an external runtime that drives an agent itself.

    `kind` and `data` form one event of reynd.protocol.events (minus seq/ts),
    an agent event: names and identifiers in `data` follow the rules of
    reynd.protocol.names (docs/protocol.md). `based_on` is the tip seq the
    writer last saw: the append is refused with stale_branch when that seq is
    no longer on the active lineage.
    """

    agent: AgentRef
    kind: EventKind
    data: EventData = {}
    based_on: NonNegative | None = None


class WalAppendResult(Result, kw_only=True):
    seq: Seq
    branch: int


class BatchEvent(Params, kw_only=True):
    """One event of `wal.append_batch`: `kind` and `data` exactly as for wal.append."""

    kind: EventKind
    data: EventData = {}


class WalAppendBatchParams(Params, kw_only=True):
    """Several events for one agent, appended all or nothing (`wal.append_batch`).

    Every event is checked, in order and each against the state the ones
    before it leave, before anything is written: one bad event refuses the
    whole batch, naming it in `data.field` (`events[2].data.text`). One fence
    check (`based_on`, as for wal.append), one fsync for the whole batch; the
    records are consecutive, and after a crash either all of them or none are
    in the log. At most MAX_APPEND_EVENTS events (limit_exceeded).
    """

    agent: AgentRef
    # At least one (enforced here, declared as minItems); the upper bound is the
    # documented limit, answered with limit_exceeded by the method itself.
    events: Annotated[list[BatchEvent], msgspec.Meta(min_length=1)]
    based_on: NonNegative | None = None


class WalAppendBatchResult(Result, kw_only=True):
    """The seqs of the events, in order (consecutive), and the branch they are on."""

    seqs: list[Seq]
    branch: int


# -- the table --------------------------------------------------------------


_RANGE = SEQ_RANGE_ERRORS

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
            (errors.NotActive, errors.NothingToDo, errors.UnknownAgent, *_RANGE),
            mutating=True,
        ),
        MethodDef(
            "checkout",
            CheckoutParams,
            RewindResult,
            "Undo to an active seq or switch to an abandoned branch at any retained seq.",
            (errors.NothingToDo, errors.UnknownAgent, *_RANGE),
            mutating=True,
        ),
        MethodDef(
            "undo",
            UndoParams,
            RewindResult,
            "Check out where the tip was before the last move (or `steps` moves back).",
            (errors.NothingToDo, *_RANGE),
            mutating=True,
        ),
        *moves.DEFS,
        *tag_methods.DEFS,
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
        MethodDef(
            "wal.append_batch",
            WalAppendBatchParams,
            WalAppendBatchResult,
            "Append several events for an agent all or nothing: one fsync, one fence check.",
            (errors.StaleBranch, errors.InvalidEvent, errors.UnknownAgent, errors.LimitExceeded),
            mutating=True,
        ),
        *agent_methods.DEFS,
        *read_methods.DEFS,
        *workspace_methods.DEFS,
        *retention_methods.DEFS,
        *audit_methods.DEFS,
        MethodDef(
            "rpc.discover", RpcDiscoverParams, dict[str, Any], "This API as an OpenRPC document."
        ),
    )
}

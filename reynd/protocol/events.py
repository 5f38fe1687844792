"""The typed events that make up the WAL.

Every WAL record is one of these events. The same types validate `wal.append`
from external runtimes, so they live in the protocol package (stdlib + msgspec
only). The `kind` tag is stable on disk: renaming one breaks old WALs.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

__all__ = [
    "BOUNDARY_KINDS",
    "AgentConfigured",
    "AgentCreated",
    "AnyEvent",
    "Effect",
    "Event",
    "FileOp",
    "GenerationKind",
    "InterventionAnswered",
    "InterventionAsked",
    "Lost",
    "Message",
    "MessageReceived",
    "PlanCreated",
    "PlanStepDone",
    "Rewind",
    "SkillEnded",
    "SkillPhase",
    "SkillStarted",
    "StepCommitted",
    "TagDeleted",
    "TagSet",
    "StepStarted",
    "ToolCall",
    "TurnEnded",
    "TurnStarted",
    "WorkspaceFiles",
    "boundary_kind",
    "kind_of",
]

GenerationKind = Literal["turn", "plan_step", "phase"]


class ToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A model's request to run a tool; its result is a `tool` message with the same id."""

    id: str
    name: str
    arguments: str = "{}"


class Message(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One entry of an agent's message history, in chat-completions shape."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


class Effect(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What one act-step the daemon ran did outside reynd, which no rewind undoes (issue 25).

    Kept in the record that ends the step: its memo (`step.committed`), or the
    `turn.ended` of the turn the step failed. `executor` is the one that ran
    it; `argv` and `exit_code` the program a `command` executor ran
    (`exit_code` None: it never exited by itself: killed, timed out, or it
    could not start); `model_calls` and the tokens what a model executor
    asked; `tools` the tools the step ran, by name. Written by the daemon
    only: wal.append refuses it. A step whose record has none (an older
    reynd, an external runtime) did something unknown.
    """

    executor: str
    argv: tuple[str, ...] = ()
    exit_code: int | None = None
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tools: tuple[str, ...] = ()


class Event(
    msgspec.Struct,
    tag_field="kind",
    kw_only=True,
    frozen=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    """Base of every WAL record: the global seq and the wall-clock time of the append.

    `seq` and `ts` are assigned by the WAL when the event is appended; callers
    leave them at 0. `more` is set on the records of an atomic batch
    (`wal.append_batch`): how many records of the same batch follow this one,
    so that recovery can drop a batch whose last record never reached the disk.
    """

    seq: int = 0
    ts: float = 0.0
    more: int = 0


class AgentEvent(Event, kw_only=True, frozen=True):
    """An event that changes one agent's state."""

    agent: str


class AgentCreated(AgentEvent, tag="agent.created", kw_only=True, frozen=True):
    session: str = "default"
    executor: str = "builtin"
    options: dict[str, Any] = {}


class AgentConfigured(AgentEvent, tag="agent.configured", kw_only=True, frozen=True):
    executor: str | None = None
    options: dict[str, Any] | None = None


class MessageReceived(AgentEvent, tag="message.received", kw_only=True, frozen=True):
    message_id: str
    text: str
    sender: str = "user"


class TurnStarted(AgentEvent, tag="turn.started", kw_only=True, frozen=True):
    """The agent took `message_id` from its inbox and began a turn."""

    turn_id: str
    message_id: str


class StepStarted(AgentEvent, tag="step.started", kw_only=True, frozen=True):
    """An act-step is about to call its executor (no result yet)."""

    turn_id: str
    step: int
    input: dict[str, Any] = {}


class StepCommitted(AgentEvent, tag="step.committed", kw_only=True, frozen=True):
    """The memo of a finished act-step: replaying it costs zero executor calls."""

    turn_id: str
    step: int
    output: dict[str, Any] = {}
    messages: tuple[Message, ...] = ()
    tokens_in: int = 0
    tokens_out: int = 0
    effect: Effect | None = None  # issue 25; absent from older records and external runtimes'


class TurnEnded(AgentEvent, tag="turn.ended", kw_only=True, frozen=True):
    """End of a turn: a `turn` generation boundary."""

    turn_id: str
    outcome: Literal["completed", "cancelled", "failed", "skipped", "aborted"] = "completed"
    reply: str | None = None
    label: str = ""
    effect: Effect | None = None  # what the step that failed the turn did (issue 25)


class PlanCreated(AgentEvent, tag="plan.created", kw_only=True, frozen=True):
    plan_id: str
    steps: tuple[str, ...]


class PlanStepDone(AgentEvent, tag="plan.step_done", kw_only=True, frozen=True):
    """A plan step finished: a `plan_step` generation boundary."""

    plan_id: str
    index: int
    result: str = ""


class SkillStarted(AgentEvent, tag="skill.started", kw_only=True, frozen=True):
    run_id: str
    skill: str
    phase: str = "start"


class SkillPhase(AgentEvent, tag="skill.phase", kw_only=True, frozen=True):
    """A skill run moved to a new phase: a `phase` generation boundary."""

    run_id: str
    phase: str


class SkillEnded(AgentEvent, tag="skill.ended", kw_only=True, frozen=True):
    run_id: str
    outcome: str = "completed"


class InterventionAsked(AgentEvent, tag="intervention.asked", kw_only=True, frozen=True):
    intervention_id: str
    question: str
    turn_id: str | None = None


class InterventionAnswered(AgentEvent, tag="intervention.answered", kw_only=True, frozen=True):
    """An operator's answer; one that arrives before its question is buffered."""

    intervention_id: str
    answer: str


class Rewind(Event, tag="rewind", kw_only=True, frozen=True):
    """The reset record: moves the active pointer to `target_n`.

    `supersedes` is the tip this record replaced. `mode` says which operation
    wrote it; all modes have the same lineage meaning. The rest says why and
    who (issue 24; absent from older records): the caller's `reason`, the
    peer's `uid` and `pid` (SO_PEERCRED), the name its client gave
    (`session.hello`), and the turns the move cancelled, `[agent, turn_id]`.
    """

    target_n: int
    supersedes: int
    mode: Literal["rewind", "checkout", "act_turn"] = "rewind"
    agent: str | None = None
    reason: str = ""
    uid: int | None = None
    pid: int | None = None
    client: str = ""
    cancelled: tuple[tuple[str, str], ...] = ()


class FileOp(msgspec.Struct, array_like=True, frozen=True, forbid_unknown_fields=True):
    """What one workspace path became: `["src/a.py","f",420,"<sha256>",1234]`.

    `kind` is `f` (a regular file: `mode` its permission bits, `ref` the
    sha256 of its bytes, a blob in the store, `size` its length), `l` (a
    symlink: `ref` its target) or `-` (gone: `mode`, `ref`, `size` empty).
    """

    path: str
    kind: Literal["f", "l", "-"]
    mode: int
    ref: str
    size: int


class WorkspaceFiles(Event, tag="workspace.files", kw_only=True, frozen=True):
    """Workspace rewind: files that changed since the previous such record.

    Written by the daemon only (never through wal.append), in the same batch
    as the record it goes with: a step's commit (`cause` "step"), a boundary
    without one ("boundary"), or a reset record, for changes the reset is
    about to overwrite ("reset"); or right after a reset record to the tip
    itself, a workspace-only restore ("restore", issue 25): the files as of
    the seq the move named. The tree as of seq N is the tree of the
    nearest recorded generation at or below N on N's lineage with the `ops`
    of these records in between applied in order. Changes no runtime state.
    """

    ops: tuple[FileOp, ...]
    cause: Literal["step", "boundary", "reset", "restore"] = "step"


class TagSet(Event, tag="tag.set", kw_only=True, frozen=True):
    """An operator named seq `target` `name` (issue 24); a later one of the same name moves it.

    Operator metadata, like retention policy: it changes no runtime state and
    is never rewound. Every tag record counts, on whatever branch it lies, in
    seq order, so a tag made on a branch later abandoned still names its seq.
    """

    name: str
    target: int


class TagDeleted(Event, tag="tag.deleted", kw_only=True, frozen=True):
    """The operator removed tag `name` (issue 24)."""

    name: str


class Lost(Event, tag="lost", kw_only=True, frozen=True):
    """A seq whose record an operator cut with `reynd repair`.

    Written in place of each cut record so that seqs stay contiguous and none
    is ever issued twice. It changes no state.
    """

    reason: str = ""


AnyEvent = (
    AgentCreated
    | AgentConfigured
    | MessageReceived
    | TurnStarted
    | StepStarted
    | StepCommitted
    | TurnEnded
    | PlanCreated
    | PlanStepDone
    | SkillStarted
    | SkillPhase
    | SkillEnded
    | InterventionAsked
    | InterventionAnswered
    | Rewind
    | WorkspaceFiles
    | TagSet
    | TagDeleted
    | Lost
)

BOUNDARY_KINDS: Final[dict[type[Event], GenerationKind]] = {
    TurnEnded: "turn",
    PlanStepDone: "plan_step",
    SkillPhase: "phase",
}


def boundary_kind(event: Event) -> GenerationKind | None:
    """The generation kind `event` cuts, or None when it is not a boundary."""
    return BOUNDARY_KINDS.get(type(event))


def kind_of(event: Event) -> str:
    """The event's `kind` tag, as written in the WAL."""
    cls = type(event)
    kind = _KINDS.get(cls)
    if kind is None:
        # __struct_config__ builds a new config object at each access: once per type.
        kind = _KINDS[cls] = str(cls.__struct_config__.tag)
    return kind


_KINDS: dict[type, str] = {}

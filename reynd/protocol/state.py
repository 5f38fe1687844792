"""Runtime state of agents: what a snapshot holds and what `state.get` returns.

These types are plain data. `reynd.core.reduce` is the only code that changes
them, one event at a time, so the state as of any seq is a pure function of the
events on that seq's lineage.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from reynd.protocol.events import Message

__all__ = [
    "AgentState",
    "Chain",
    "InboxItem",
    "Intervention",
    "Plan",
    "PlanStep",
    "RuntimeState",
    "SkillRun",
    "StepMemo",
]


class InboxItem(msgspec.Struct, forbid_unknown_fields=True):
    message_id: str
    text: str
    sender: str
    seq: int


class StepMemo(msgspec.Struct, forbid_unknown_fields=True):
    """A committed act-step: enough to replay it without calling the executor."""

    step: int
    seq: int
    input: dict[str, Any]
    output: dict[str, Any]
    messages: list[Message]
    tokens_in: int = 0
    tokens_out: int = 0


class Chain(msgspec.Struct, forbid_unknown_fields=True):
    """A turn in flight: its committed steps and, if any, the step it started last."""

    turn_id: str
    message_id: str
    started_seq: int
    text: str = ""
    steps: list[StepMemo] = []
    open_step: int | None = None
    open_step_input: dict[str, Any] | None = None
    open_step_seq: int | None = None
    answers: dict[str, str] = {}  # operator answers to this turn's interventions


class SkillRun(msgspec.Struct, forbid_unknown_fields=True):
    run_id: str
    skill: str
    phase: str
    phase_seq: int
    status: Literal["running", "ended"] = "running"
    outcome: str | None = None


class PlanStep(msgspec.Struct, forbid_unknown_fields=True):
    title: str
    status: Literal["pending", "done"] = "pending"
    result: str = ""


class Plan(msgspec.Struct, forbid_unknown_fields=True):
    plan_id: str
    steps: list[PlanStep]


class Intervention(msgspec.Struct, forbid_unknown_fields=True):
    intervention_id: str
    question: str
    asked_seq: int
    turn_id: str | None = None


class AgentState(msgspec.Struct, forbid_unknown_fields=True):
    """Full runtime state of one agent (the ADR's AgentSnapshot)."""

    name: str
    session: str
    executor: str
    options: dict[str, Any]
    created_seq: int
    applied_seq: int
    inbox: list[InboxItem] = []
    history: list[Message] = []
    pending_chains: list[Chain] = []
    skill_runs: dict[str, SkillRun] = {}
    interventions: dict[str, Intervention] = {}
    buffered_answers: dict[str, str] = {}
    plans: dict[str, Plan] = {}
    turns_completed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


class RuntimeState(msgspec.Struct, forbid_unknown_fields=True):
    """The global state as of `seq`: every agent, one consistent cut."""

    seq: int = 0
    agents: dict[str, AgentState] = {}

"""How a turn in flight continues: ghost replay of its committed steps (pure).

A turn in the state (after a crash, a rewind or an act-turn rewind) carries
the memos of its committed steps: they are replayed from the memos with zero
executor calls. A step that started but has no committed result is
ambiguous after a crash (its executor call may have had effects: the
operator decides) and simply re-run after a rewind or a clean stop (the
daemon cut it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from reynd.protocol import events as ev
from reynd.protocol.executor import StepResult
from reynd.protocol.state import AgentState, Chain, StepMemo

__all__ = ["ResumePlan", "analyze", "directive_events", "missing_directives"]


@dataclass(frozen=True, slots=True)
class ResumePlan:
    turn_id: str
    committed: tuple[StepMemo, ...]  # ghost-replayed, 0 executor calls
    next_step: int
    open_step: int | None  # started, no committed result
    open_input: dict[str, Any] | None


def analyze(chain: Chain) -> ResumePlan:
    """Split a turn in flight into its committed steps and its open step."""
    next_step = chain.steps[-1].step + 1 if chain.steps else 0
    return ResumePlan(
        chain.turn_id, tuple(chain.steps), next_step, chain.open_step, chain.open_step_input
    )


def intervention_id(turn_id: str, step: int) -> str:
    return f"{turn_id}.s{step}"


def plan_id(turn_id: str) -> str:
    return f"{turn_id}.plan"


def run_id(turn_id: str) -> str:
    return f"{turn_id}.skill"


def directive_events(agent: str, turn_id: str, step: int, result: StepResult) -> list[ev.Event]:
    """The events a step's result asks for, in the order they apply."""
    out: list[ev.Event] = []
    if result.plan is not None:
        out.append(ev.PlanCreated(agent=agent, plan_id=plan_id(turn_id), steps=tuple(result.plan)))
    if result.plan_step_done is not None:
        out.append(
            ev.PlanStepDone(
                agent=agent,
                plan_id=plan_id(turn_id),
                index=result.plan_step_done,
                result=result.label,
            )
        )
    if result.skill is not None:
        out.append(ev.SkillStarted(agent=agent, run_id=run_id(turn_id), skill=result.skill))
    if result.phase is not None:
        out.append(ev.SkillPhase(agent=agent, run_id=run_id(turn_id), phase=result.phase))
    if result.skill_end:
        out.append(ev.SkillEnded(agent=agent, run_id=run_id(turn_id)))
    if result.ask is not None:
        out.append(
            ev.InterventionAsked(
                agent=agent,
                intervention_id=intervention_id(turn_id, step),
                question=result.ask,
                turn_id=turn_id,
            )
        )
    return out


def missing_directives(agent: AgentState, chain: Chain) -> list[ev.Event]:
    """Directive events of the last committed step that did not reach the log.

    A step's memo and its directives are appended as one batch; a crash can
    tear a batch, so the directives are re-derived from the memo (they are a
    pure function of it) and the missing ones appended again.
    """
    if not chain.steps:
        return []
    memo = chain.steps[-1]
    try:
        result = msgspec.convert(memo.output, StepResult)
    except msgspec.ValidationError:
        return []
    wanted = directive_events(agent.name, chain.turn_id, memo.step, result)
    return [e for e in wanted if not _applied(agent, chain, e)]


def _applied(agent: AgentState, chain: Chain, e: ev.Event) -> bool:
    if isinstance(e, ev.PlanCreated):
        return e.plan_id in agent.plans
    if isinstance(e, ev.PlanStepDone):
        plan = agent.plans.get(e.plan_id)
        return (
            plan is None
            or not 0 <= e.index < len(plan.steps)
            or plan.steps[e.index].status == "done"
        )
    if isinstance(e, ev.SkillStarted):
        return e.run_id in agent.skill_runs
    if isinstance(e, ev.SkillPhase):
        run = agent.skill_runs.get(e.run_id)
        return run is None or run.phase == e.phase
    if isinstance(e, ev.SkillEnded):
        return e.run_id not in agent.skill_runs
    if isinstance(e, ev.InterventionAsked):
        return e.intervention_id in agent.interventions or e.intervention_id in chain.answers
    return True

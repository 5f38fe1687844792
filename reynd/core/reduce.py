"""The state machine: how each event changes the runtime state.

`apply` is the only writer of RuntimeState. It is deterministic (time comes
from the event, never from the clock) and total: replay never raises, so a
log that was valid when written is valid forever. `check` is the gate that
keeps invalid events out of the log in the first place (wal.append).

Counts (tokens, step numbers) are kept within 0 to MAX_COUNT whatever a
record says, and sums saturate there: the door holds each record to that
range, but a record an older version acknowledged may not be, and the state
must stay one a snapshot can hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol.limits import MAX_COUNT
from reynd.protocol.state import (
    AgentState,
    Chain,
    InboxItem,
    Intervention,
    Plan,
    PlanStep,
    RuntimeState,
    SkillRun,
    StepMemo,
)

__all__ = ["apply", "check", "find_chain", "fork"]


def find_chain(agent: AgentState, turn_id: str) -> Chain | None:
    """The in-flight turn `turn_id` of `agent`, if any."""
    for chain in agent.pending_chains:
        if chain.turn_id == turn_id:
            return chain
    return None


def fork(state: RuntimeState) -> RuntimeState:
    """A copy of `state` that `apply` can change without changing `state`, made in O(items).

    Copies every struct and container `apply` changes in place (the agents, their
    lists and dicts, each chain, skill run and plan step) and shares the rest, which
    `apply` only ever replaces or appends (messages, inbox items, step memos,
    questions): a long history costs one list copy, not a decode. Any
    change to what `apply` mutates must be mirrored here (tests/test_fork.py).
    """
    return RuntimeState(seq=state.seq, agents={n: _fork_agent(a) for n, a in state.agents.items()})


def _fork_agent(a: AgentState) -> AgentState:
    replace = msgspec.structs.replace
    return replace(
        a,
        options=dict(a.options),
        inbox=list(a.inbox),
        history=list(a.history),
        pending_chains=[
            replace(c, steps=list(c.steps), answers=dict(c.answers)) for c in a.pending_chains
        ],
        skill_runs={k: replace(r) for k, r in a.skill_runs.items()},
        interventions=dict(a.interventions),
        buffered_answers=dict(a.buffered_answers),
        plans={k: replace(p, steps=[replace(s) for s in p.steps]) for k, p in a.plans.items()},
    )


def apply(state: RuntimeState, event: ev.Event) -> None:
    """Apply one event (already in the log) to `state`, in place."""
    state.seq = event.seq
    if isinstance(event, ev.Rewind):
        return  # shapes the lineage only
    if isinstance(event, ev.AgentCreated):
        state.agents[event.agent] = AgentState(
            name=event.agent,
            session=event.session,
            executor=event.executor,
            options=dict(event.options),
            created_seq=event.seq,
            applied_seq=event.seq,
        )
        return
    if not isinstance(event, ev.AgentEvent):
        return
    agent = state.agents.get(event.agent)
    if agent is None:
        return
    agent.applied_seq = event.seq
    _APPLY[type(event)](agent, event)


def _configured(a: AgentState, e: ev.AgentConfigured) -> None:
    if e.executor is not None:
        a.executor = e.executor
    if e.options is not None:
        a.options = dict(e.options)


def _message(a: AgentState, e: ev.MessageReceived) -> None:
    a.inbox.append(InboxItem(e.message_id, e.text, e.sender, e.seq))


def _turn_started(a: AgentState, e: ev.TurnStarted) -> None:
    text = ""
    for i, item in enumerate(a.inbox):
        if item.message_id == e.message_id:
            text = item.text
            del a.inbox[i]
            break
    a.history.append(ev.Message(role="user", content=text))
    a.pending_chains.append(Chain(e.turn_id, e.message_id, e.seq, text))


def _count(n: int) -> int:
    """A count from a record, within 0 to MAX_COUNT."""
    return min(max(n, 0), MAX_COUNT)


def _step_started(a: AgentState, e: ev.StepStarted) -> None:
    chain = find_chain(a, e.turn_id)
    if chain is not None:
        chain.open_step = _count(e.step)
        chain.open_step_input, chain.open_step_seq = dict(e.input), e.seq


def _step_committed(a: AgentState, e: ev.StepCommitted) -> None:
    chain = find_chain(a, e.turn_id)
    if chain is None:
        return
    step, tokens_in, tokens_out = _count(e.step), _count(e.tokens_in), _count(e.tokens_out)
    memo_input = chain.open_step_input if chain.open_step == step else None
    chain.steps.append(
        StepMemo(
            step, e.seq, memo_input or {}, dict(e.output), list(e.messages), tokens_in, tokens_out
        )
    )
    chain.open_step = chain.open_step_input = chain.open_step_seq = None
    a.history.extend(e.messages)
    a.tokens_in = min(a.tokens_in + tokens_in, MAX_COUNT)
    a.tokens_out = min(a.tokens_out + tokens_out, MAX_COUNT)


def _turn_ended(a: AgentState, e: ev.TurnEnded) -> None:
    a.pending_chains = [c for c in a.pending_chains if c.turn_id != e.turn_id]
    # A question of a turn that ended (cancelled, aborted) has nobody waiting for it.
    a.interventions = {k: i for k, i in a.interventions.items() if i.turn_id != e.turn_id}
    if e.outcome == "completed":
        a.turns_completed += 1


def _plan_created(a: AgentState, e: ev.PlanCreated) -> None:
    a.plans[e.plan_id] = Plan(e.plan_id, [PlanStep(title) for title in e.steps])


def _plan_step_done(a: AgentState, e: ev.PlanStepDone) -> None:
    plan = a.plans.get(e.plan_id)
    if plan is not None and 0 <= e.index < len(plan.steps):
        plan.steps[e.index].status = "done"
        plan.steps[e.index].result = e.result


def _skill_started(a: AgentState, e: ev.SkillStarted) -> None:
    a.skill_runs[e.run_id] = SkillRun(e.run_id, e.skill, e.phase, e.seq)


def _skill_phase(a: AgentState, e: ev.SkillPhase) -> None:
    run = a.skill_runs.get(e.run_id)
    if run is not None:
        run.phase, run.phase_seq = e.phase, e.seq


def _skill_ended(a: AgentState, e: ev.SkillEnded) -> None:
    a.skill_runs.pop(e.run_id, None)  # the state keeps active runs only


def _asked(a: AgentState, e: ev.InterventionAsked) -> None:
    early = a.buffered_answers.get(e.intervention_id)
    if early is not None:
        # Answered before it was asked: resolved the moment it is asked.
        chain = find_chain(a, e.turn_id) if e.turn_id else None
        if chain is not None:
            chain.answers[e.intervention_id] = a.buffered_answers.pop(e.intervention_id)
        return
    a.interventions[e.intervention_id] = Intervention(
        e.intervention_id, e.question, e.seq, e.turn_id
    )


def _answered(a: AgentState, e: ev.InterventionAnswered) -> None:
    asked = a.interventions.pop(e.intervention_id, None)
    if asked is None:
        a.buffered_answers[e.intervention_id] = e.answer
        return
    chain = find_chain(a, asked.turn_id) if asked.turn_id else None
    if chain is not None:
        chain.answers[e.intervention_id] = e.answer


_APPLY: dict[type[ev.Event], Callable[[AgentState, Any], None]] = {
    ev.AgentConfigured: _configured,
    ev.MessageReceived: _message,
    ev.TurnStarted: _turn_started,
    ev.StepStarted: _step_started,
    ev.StepCommitted: _step_committed,
    ev.TurnEnded: _turn_ended,
    ev.PlanCreated: _plan_created,
    ev.PlanStepDone: _plan_step_done,
    ev.SkillStarted: _skill_started,
    ev.SkillPhase: _skill_phase,
    ev.SkillEnded: _skill_ended,
    ev.InterventionAsked: _asked,
    ev.InterventionAnswered: _answered,
}


def check(state: RuntimeState, event: ev.Event) -> None:
    """Refuse an event that does not apply to `state` (raises a ReyndError).

    Reset records are written by rewind/checkout only. Each error's data
    names the event `field` at fault and the `reason`.
    """
    if isinstance(event, ev.Rewind):
        raise errors.InvalidEvent(
            "reset records are written by `rewind` and `checkout`, not by wal.append",
            {"kind": "rewind", "field": "kind", "reason": "reset records are the daemon's own"},
        )
    if isinstance(event, ev.AgentCreated):
        if event.agent in state.agents:
            raise errors.AgentExists(
                f"agent {event.agent!r} already exists",
                {"agent": event.agent, "field": "agent", "reason": "the agent already exists"},
            )
        return
    if not isinstance(event, ev.AgentEvent):
        return
    agent = state.agents.get(event.agent)
    if agent is None:
        raise errors.UnknownAgent(
            f"no agent {event.agent!r} at the tip: create it first (agent.created)",
            {"agent": event.agent, "field": "agent", "reason": "no such agent at the tip"},
        )
    _check_against(agent, event)


def _check_against(agent: AgentState, event: ev.AgentEvent) -> None:
    """Refuse an agent's event that its turns, plans or skill runs do not admit."""
    if isinstance(event, ev.TurnStarted):
        if not any(m.message_id == event.message_id for m in agent.inbox):
            raise errors.InvalidEvent(
                f"message {event.message_id!r} is not in {event.agent}'s inbox",
                {
                    "message_id": event.message_id,
                    "field": "message_id",
                    "reason": "the message is not in the agent's inbox",
                },
            )
        if find_chain(agent, event.turn_id) is not None:
            raise errors.InvalidEvent(
                f"turn {event.turn_id!r} is already in flight",
                {
                    "turn_id": event.turn_id,
                    "field": "turn_id",
                    "reason": "the turn is already in flight",
                },
            )
    elif isinstance(event, ev.StepStarted | ev.StepCommitted | ev.TurnEnded):
        if find_chain(agent, event.turn_id) is None:
            raise errors.InvalidEvent(
                f"turn {event.turn_id!r} of {event.agent} is not in flight",
                {"turn_id": event.turn_id, "field": "turn_id", "reason": "no such turn in flight"},
            )
    elif isinstance(event, ev.PlanStepDone):
        plan = agent.plans.get(event.plan_id)
        if plan is None or not 0 <= event.index < len(plan.steps):
            raise errors.InvalidEvent(
                f"plan {event.plan_id!r} has no step {event.index}",
                {
                    "plan_id": event.plan_id,
                    "index": event.index,
                    "field": "plan_id" if plan is None else "index",
                    "reason": "no such plan" if plan is None else "no such plan step",
                },
            )
    elif isinstance(event, ev.SkillPhase | ev.SkillEnded) and event.run_id not in agent.skill_runs:
        raise errors.InvalidEvent(
            f"skill run {event.run_id!r} is not active",
            {"run_id": event.run_id, "field": "run_id", "reason": "the skill run is not active"},
        )

"""The arithmetic of a preview (issue 25): records in, what they did and started out.

Pure, no I/O: the daemon reads the records of the branch a move leaves (or
lands on) and hands them here. A step's effects are kept in the record that
ends it (`effect` of its memo, or of the turn end of a turn it failed); a
step that ended without one did something unknown, and is counted as such,
never as nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from reynd.protocol import events as ev
from reynd.protocol.preview import MAX_LISTED, CommandRun, Effects, TurnRef

__all__ = ["effects_of", "turns_and_agents"]


def effects_of(records: Iterable[ev.Event], *, listed: int = MAX_LISTED) -> Effects:
    """The effects of the steps that ended among `records` (in seq order).

    A step ends with its memo, or with the turn end of the turn it was open
    in (failed, cancelled, aborted): that step counts once, known when the
    record carries an `effect`, unknown otherwise. A turn end with no step
    open among `records` ended no step (unless it carries an effect: then it
    failed the step whose start lies before these records).
    """
    out = Effects()
    tools: Counter[str] = Counter()
    # (agent, turn) -> the step started and not ended yet
    open_steps: dict[tuple[str, str], int] = {}
    for record in records:
        if isinstance(record, ev.StepStarted):
            open_steps[record.agent, record.turn_id] = record.step
            continue
        step: int | None
        if isinstance(record, ev.StepCommitted):
            open_steps.pop((record.agent, record.turn_id), None)
            step = record.step
        elif isinstance(record, ev.TurnEnded):
            step = open_steps.pop((record.agent, record.turn_id), None)
            if step is None and record.effect is None:
                continue  # no step open: it ended none
        else:
            continue
        effect = record.effect
        if effect is None:
            out.unknown_steps += 1
            continue
        out.steps += 1
        out.model_calls += effect.model_calls
        out.tokens_in += effect.tokens_in
        out.tokens_out += effect.tokens_out
        tools.update(effect.tools)
        if effect.argv:
            out.command_count += 1
            if len(out.commands) < listed:
                out.commands.append(
                    CommandRun(
                        agent=record.agent,
                        turn_id=record.turn_id,
                        step=step,
                        seq=record.seq,
                        argv=list(effect.argv),
                        exit_code=effect.exit_code,
                    )
                )
    out.tools = dict(sorted(tools.items()))
    return out


def turns_and_agents(
    records: Iterable[ev.Event], *, listed: int = MAX_LISTED
) -> tuple[list[TurnRef], int, list[str]]:
    """The turns started among `records` (the first `listed`, and how many in all),
    and the agents created among them, in seq order."""
    turns: list[TurnRef] = []
    count = 0
    agents: list[str] = []
    for record in records:
        if isinstance(record, ev.TurnStarted):
            count += 1
            if len(turns) < listed:
                turns.append(TurnRef(agent=record.agent, turn_id=record.turn_id, seq=record.seq))
        elif isinstance(record, ev.AgentCreated):
            agents.append(record.agent)
    return turns, count, agents

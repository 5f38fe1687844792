"""The state as of a seq."""

from __future__ import annotations

from collections.abc import Mapping

from reynctl.render.formats import truncate
from reynctl.render.table import Style
from reynd.protocol import methods as m
from reynd.protocol.state import AgentState

__all__ = ["state_text"]


def _agent_lines(a: AgentState, style: Style, width: int) -> list[str]:
    lines = [
        f"{style('agent ' + a.name, 'bold')}  executor {a.executor}, session {a.session}, "
        f"created at seq {a.created_seq}, last applied seq {a.applied_seq}",
        f"  turns {a.turns_completed}, tokens {a.tokens_in} in / {a.tokens_out} out, "
        f"inbox {len(a.inbox)}, turns in flight {len(a.pending_chains)}",
    ]
    for item in a.inbox:
        lines.append(f"  inbox  {item.sender}: {truncate(item.text, width)}  (seq {item.seq})")
    for chain in a.pending_chains:
        open_step = f", step {chain.open_step} open" if chain.open_step is not None else ""
        lines.append(
            f"  {style('in flight', 'yellow')}  turn {chain.turn_id} "
            f"(from seq {chain.started_seq}): {len(chain.steps)} steps committed{open_step}"
        )
    for plan in a.plans.values():
        done = sum(1 for s in plan.steps if s.status == "done")
        lines.append(f"  plan {plan.plan_id}: {done}/{len(plan.steps)} steps done")
    for run in a.skill_runs.values():
        lines.append(f"  skill {run.skill} ({run.run_id}): phase {run.phase}, {run.status}")
    for iv in a.interventions.values():
        question = truncate(iv.question, width)
        lines.append(f"  {style('question', 'yellow')} {iv.intervention_id}: {question}")
    if a.history:
        lines.append("  history:")
        role_w = max(len(msg.role) for msg in a.history)
        for msg in a.history:
            text = msg.content
            if msg.tool_calls:
                calls = ", ".join(f"{c.name}({c.arguments})" for c in msg.tool_calls)
                text = f"{text} → {calls}" if text else f"→ {calls}"
            role = style(msg.role.ljust(role_w), "cyan")
            lines.append(f"    {role}  {truncate(text, width)}")
    return lines


def _agent_blocks(agents: Mapping[str, AgentState], style: Style, width: int) -> list[str]:
    """One block of lines per agent, by name."""
    return ["\n".join(_agent_lines(a, style, width)) for _, a in sorted(agents.items())]


def state_text(res: m.StateResult, style: Style, width: int = 100) -> str:
    """state.get: a header, then one block per agent."""
    where = "active" if res.active else style("abandoned", "yellow")
    head = style(f"state as of seq {res.seq}", "bold") + f" (branch {res.branch}, {where})"
    if not res.agents:
        return f"{head}\nno agents"
    return "\n\n".join([head, *_agent_blocks(res.agents, style, width)])

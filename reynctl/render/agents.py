"""The agent runtime: agents, turns sent and cancelled, ambiguous steps, questions."""

from __future__ import annotations

from collections.abc import Sequence

from reynctl.render.formats import _compact, _plural, printable, truncate
from reynctl.render.preview import effects_text
from reynctl.render.table import Cell, Style, Text, _indent, _pairs, table
from reynd.protocol import agent_methods as a

__all__ = [
    "act_turn_text",
    "agent_text",
    "agents_table",
    "ambiguous_block",
    "answer_text",
    "cancel_text",
    "interventions_table",
    "resolve_command",
    "resolve_text",
    "send_text",
]


def resolve_command(agent: str) -> str:
    """The command that settles an agent's ambiguous step."""
    return f"reynctl resolve {agent} retry|skip|abort"


def ambiguous_block(steps: Sequence[a.AmbiguousStep], style: Style) -> str:
    """Steps left without a result by a crash, each with the command that resolves it.

    Their executor call may or may not have had effects (a message sent, a
    file written): only the operator can say whether to run them again.
    """
    n = len(steps)
    head = style(
        f"! {_plural(n, 'ambiguous step')}: started before a crash, no result recorded; "
        f"the agent{'' if n == 1 else 's'} wait{'s' if n == 1 else ''} for you",
        "red",
        "bold",
    )
    rows: list[list[Cell | str]] = [
        [
            Cell(s.agent, ("bold",)),
            f"turn {s.turn_id}",
            f"step {s.step}",
            f"started at seq {s.started_seq}",
            Cell(resolve_command(s.agent), ("cyan",)),
        ]
        for s in steps
    ]
    body = table(["AGENT", "TURN", "STEP", "STARTED", "RESOLVE WITH"], rows, style)
    legend = (
        "retry: run the step again · skip: record it as skipped, the turn goes on · "
        "abort: end the turn"
    )
    return "\n".join([head, _indent(body), _indent(style(legend, "dim"))])


_STATUS_STYLES = {
    "idle": ("green",),
    "running": ("cyan",),
    "waiting": ("yellow",),
    "ambiguous": ("red", "bold"),
    "failed": ("red",),
}


def _status_cell(status: str) -> Cell:
    return Cell(status, _STATUS_STYLES.get(status, ()))


def _attention(agent: a.AgentInfo, style: Style) -> list[str]:
    """What an agent needs from the operator, as commands to run."""
    lines: list[str] = []
    if agent.ambiguous is not None:
        amb = agent.ambiguous
        lines.append(
            style(f"{agent.name}: step {amb.step} of turn {amb.turn_id} is ambiguous", "red")
            + f" (in flight at a crash): {style(resolve_command(agent.name), 'cyan')}"
        )
    if agent.waiting_for is not None:
        lines.append(
            style(f"{agent.name}: waits for an answer to {agent.waiting_for}", "yellow")
            + f": {style(f'reynctl answer {agent.name} {agent.waiting_for} TEXT', 'cyan')}"
        )
    if agent.last_error:
        lines.append(style(f"{agent.name}: last error: {truncate(agent.last_error, 80)}", "red"))
    return lines


def agents_table(res: a.AgentsListResult, style: Style) -> str:
    """agents.list: one row per agent, then what any of them needs from the operator."""
    if not res.agents:
        return "no agents (create one with `reynctl agents create NAME`)"
    rows: list[list[Cell | str]] = [
        [
            Cell(ag.name, ("bold",)),
            ag.session,
            ag.executor,
            _status_cell(ag.status),
            ag.turn_id or "-",
            "-" if ag.step is None else str(ag.step),
            str(ag.inbox),
            str(ag.turns_completed),
            str(ag.executor_calls),
        ]
        for ag in res.agents
    ]
    headers = ["AGENT", "SESSION", "EXECUTOR", "STATUS", "TURN", "STEP", "INBOX", "TURNS", "CALLS"]
    text = table(headers, rows, style, align="lllllrrrr")
    notes = [line for ag in res.agents for line in _attention(ag, style)]
    return "\n".join([text, "", *notes]) if notes else text


def agent_text(ag: a.AgentInfo, style: Style) -> str:
    """agents.get: one agent's configuration and runtime status."""
    options = _compact(ag.options, 80) if ag.options else "(defaults)"
    if ag.turn_id is not None:
        step = f", step {ag.step}" if ag.step is not None else ""
        turn = f"{ag.turn_id}{step}"
    else:
        turn = "-"
    rows: list[tuple[str, Text]] = [
        ("agent", f"{ag.name} (session {ag.session})"),
        ("executor", ag.executor),
        ("options", options),
        ("status", _status_cell(ag.status)),
        ("turn", turn),
        ("inbox", _plural(ag.inbox, "message")),
        ("turns", f"{ag.turns_completed} completed"),
        ("tokens", f"{ag.tokens_in} in / {ag.tokens_out} out"),
        ("executor calls", f"{ag.executor_calls} (since the daemon started)"),
        ("ghost-replayed", _plural(ag.ghost_replayed, "step") + " (from memos, 0 calls)"),
        ("seqs", f"created at {ag.created_seq}, last applied {ag.applied_seq}"),
    ]
    if ag.ambiguous is not None:
        amb = ag.ambiguous
        rows.append(
            (
                "ambiguous",
                (
                    Cell(f"step {amb.step} of turn {amb.turn_id}", ("red", "bold")),
                    f", started at seq {amb.started_seq}, input {_compact(amb.input, 60)}",
                ),
            )
        )
    if ag.waiting_for is not None:
        rows.append(("waiting for", Cell(ag.waiting_for, ("yellow",))))
    if ag.last_error:
        rows.append(("last error", Cell(ag.last_error, ("red",))))
    text = _pairs(rows, style)
    notes = _attention(ag, style)
    return "\n".join([text, "", *notes]) if notes else text


def send_text(res: a.AgentsSendResult, style: Style, *, waited: float | None) -> str:
    """agents.send: the turn, and with a wait its outcome, reply and boundary seq.

    `waited` is the wait in seconds, or None when the message was only queued.
    """
    rows: list[tuple[str, Text]] = [
        ("turn", (Cell(res.turn_id, ("bold",)), f" (message {res.message_id} at seq {res.seq})"))
    ]
    if waited is None:
        rows.append(("status", "queued: the turn runs in the daemon"))
    elif res.question is not None:
        rows.append(("status", Cell("waiting for the operator's answer", ("yellow",))))
        rows.append(("question", (Cell(res.intervention_id or "", ("bold",)), f"  {res.question}")))
    elif res.outcome == "abandoned":
        rows.append(("outcome", Cell("abandoned: a rewind removed the message", ("yellow",))))
    elif res.boundary_seq is None:
        rows.append(
            ("status", Cell(f"still in flight after {waited:g}s (it keeps running)", ("yellow",)))
        )
    else:
        outcome = res.outcome or "completed"
        color = "green" if outcome == "completed" else "yellow"
        rows.append(("outcome", Cell(outcome, (color,))))
        rows.append(("boundary", ("seq ", Cell(str(res.boundary_seq), ("cyan",)), " (turn.ended)")))
        if res.reply is not None:
            rows.append(("reply", res.reply))
    return _pairs(rows, style)


def cancel_text(res: a.AgentsCancelResult, agent: str, style: Style) -> str:
    """agents.cancel."""
    if not res.cancelled:
        return f"{agent} had no turn in flight: nothing cancelled"
    return "\n".join(
        f"{style('cancelled', 'yellow')} turn {c.get('turn_id', '?')} of {c.get('agent', agent)} "
        "(its open step is not committed)"
        for c in res.cancelled
    )


_RESOLUTIONS = {
    "retry": "runs it again",
    "skip": "records it as skipped and goes on with the turn",
    "abort": "ends the turn (outcome aborted)",
}


def resolve_text(ag: a.AgentInfo, action: str, style: Style) -> str:
    """agents.resolve: what the agent does with its ambiguous step."""
    amb = ag.ambiguous
    what = f"step {amb.step} of turn {amb.turn_id}" if amb else f"the ambiguous step of {ag.name}"
    return f"{style(action, 'bold')}: {ag.name} {_RESOLUTIONS.get(action, action)} ({what})"


def interventions_table(res: a.InterventionsListResult, style: Style) -> str:
    """interventions.list: open questions, oldest first as the daemon sends them."""
    if not res.interventions:
        return "no open questions"
    rows: list[list[Cell | str]] = [
        [
            Cell(iv.agent, ("bold",)),
            Cell(iv.intervention_id, ("cyan",)),
            iv.turn_id or "-",
            str(iv.asked_seq),
            iv.question,
        ]
        for iv in res.interventions
    ]
    return table(["AGENT", "ID", "TURN", "ASKED AT", "QUESTION"], rows, style, align="lllr")


def answer_text(
    res: a.InterventionsAnswerResult, agent: str, intervention_id: str, style: Style
) -> str:
    """interventions.answer: recorded at once, or kept for a question not asked yet."""
    if res.buffered:
        return (
            f"{style('buffered', 'yellow')}: {agent} has no open question {intervention_id} yet; "
            f"the answer (seq {res.seq}) is kept for when it is asked"
        )
    return f"answered {intervention_id} of {agent} at seq {res.seq}: the turn goes on"


def act_turn_text(res: a.ActTurnRewindResult, agent: str, style: Style) -> str:
    """act_turn.rewind: the reset record, and how the turn resumes."""
    head = style(f"rewound {agent} to seq {res.target}, inside turn {res.turn_id}", "bold")
    lines = [
        f"{head}: reset record {res.reset_seq}, now on branch {res.branch}"
        + (f" ({res.duration_ms:.1f} ms)" if res.duration_ms else ""),
        f"  ghost-replayed  {_plural(res.ghost_replayed, 'step')} "
        "(from their memos: 0 executor calls, 0 tokens)",
        f"  re-run          {_plural(res.rerun, 'step')} (after seq {res.target}: "
        "the executor runs them again)",
    ]
    if res.reason:
        lines.append(f"  reason: {printable(res.reason)}")
    lines += [
        f"  cancelled turn {c.get('turn_id', '?')} of {c.get('agent', '?')}" for c in res.cancelled
    ]
    undone = effects_text(res.effects, style, quiet=True)  # issue 25
    return "\n".join([*lines, *([f"  {undone}"] if undone else [])])

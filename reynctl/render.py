"""Human output: aligned tables, the branch tree, state and diffs.

Pure functions from result types to text, so they are tested without a
daemon. Colour is applied after alignment (widths are measured on plain text)
and only when the `Style` says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from reynd.protocol import agent_methods as a
from reynd.protocol import audit_methods as am
from reynd.protocol import methods as m
from reynd.protocol.state import AgentState

__all__ = [
    "Cell",
    "Style",
    "act_turn_text",
    "agent_text",
    "agents_table",
    "ambiguous_block",
    "answer_text",
    "audit_event_text",
    "compare_text",
    "events_table",
    "runs_table",
    "seek_text",
    "walk_text",
    "cancel_text",
    "interventions_table",
    "resolve_command",
    "resolve_text",
    "send_text",
    "branch_tree",
    "diff_text",
    "format_duration",
    "format_time",
    "generations_table",
    "notification_line",
    "rewind_text",
    "state_text",
    "status_text",
    "table",
    "truncate",
]

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


@dataclass(frozen=True, slots=True)
class Style:
    """Whether to colour, and how. `Style(False)` leaves text untouched."""

    color: bool = False

    def __call__(self, text: str, *styles: str) -> str:
        """`text` in the given styles (names of _CODES), or unchanged without colour."""
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell with the styles it is painted in."""

    text: str
    styles: tuple[str, ...] = ()


def _cell(value: Cell | str) -> Cell:
    return value if isinstance(value, Cell) else Cell(value)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell | str]],
    style: Style,
    align: str = "",
) -> str:
    """Rows under headers, columns padded to their widest cell.

    `align` holds one letter per column, `l` or `r` (default `l`). A last
    column aligned left is not padded, so lines carry no trailing spaces.
    """
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c.text))
    last = len(headers) - 1

    def line(row: Sequence[Cell]) -> str:
        parts = []
        for i, c in enumerate(row):
            right = i < len(align) and align[i] == "r"
            pad = " " * (widths[i] - len(c.text)) if i < last or right else ""
            parts.append(
                pad + style(c.text, *c.styles) if right else style(c.text, *c.styles) + pad
            )
        return "  ".join(parts).rstrip()

    head = line([Cell(h, ("bold",)) for h in headers])
    return "\n".join([head, *(line(r) for r in cells)])


def truncate(text: str, width: int) -> str:
    """One line of at most `width` characters, newlines shown as ⏎."""
    flat = text.replace("\r\n", "\n").replace("\n", " ⏎ ")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def format_time(ts: float, tz: tzinfo | None = None) -> str:
    """A wall-clock timestamp as `YYYY-MM-DD HH:MM:SS` (local time unless `tz`)."""
    if ts <= 0:
        return "-"
    return datetime.fromtimestamp(ts, tz).strftime("%Y-%m-%d %H:%M:%S")


def format_duration(seconds: float) -> str:
    """`42s`, `3m12s`, `2h05m`, `4d03h`."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _compact(value: Any, width: int = 60) -> str:
    return truncate(json.dumps(value, ensure_ascii=False, separators=(",", ":")), width)


# -- status -------------------------------------------------------------------


def status_text(st: m.StatusResult, style: Style) -> str:
    """daemon.status as aligned `key  value` lines."""
    rows: list[tuple[str, str]] = [
        ("daemon", f"reynd {st.version}, pid {st.pid}, protocol {st.protocol}"),
        ("head", f"seq {st.head} on branch {st.branch}"),
    ]
    if st.floor > 1:  # the lowest seq still in the WAL; 1 means nothing was collected
        rows.append(("history", f"from seq {st.floor} (older seqs were collected)"))
    rows += [
        ("agents", str(st.agents)),
        ("generations", str(st.generations)),
        ("connections", str(st.connections)),
        ("uptime", format_duration(st.uptime_s)),
    ]
    if st.state_dir:
        rows.append(("state dir", st.state_dir))
    if st.socket:
        rows.append(("socket", st.socket))
    text = _pairs(rows, style)
    if st.ambiguous:
        text += "\n\n" + ambiguous_block(st.ambiguous, style)
    return text


def _pairs(rows: Sequence[tuple[str, str]], style: Style) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{style(k.ljust(width), 'bold')}  {v}".rstrip() for k, v in rows)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


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


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


# -- agents --------------------------------------------------------------------

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
    rows: list[tuple[str, str]] = [
        ("agent", f"{ag.name} (session {ag.session})"),
        ("executor", ag.executor),
        ("options", options),
        ("status", style(ag.status, *_STATUS_STYLES.get(ag.status, ()))),
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
                style(f"step {amb.step} of turn {amb.turn_id}", "red", "bold")
                + f", started at seq {amb.started_seq}, input {_compact(amb.input, 60)}",
            )
        )
    if ag.waiting_for is not None:
        rows.append(("waiting for", style(ag.waiting_for, "yellow")))
    if ag.last_error:
        rows.append(("last error", style(ag.last_error, "red")))
    text = _pairs(rows, style)
    notes = _attention(ag, style)
    return "\n".join([text, "", *notes]) if notes else text


def send_text(res: a.AgentsSendResult, style: Style, *, waited: float | None) -> str:
    """agents.send: the turn, and with a wait its outcome, reply and boundary seq.

    `waited` is the wait in seconds, or None when the message was only queued.
    """
    rows: list[tuple[str, str]] = [
        ("turn", f"{style(res.turn_id, 'bold')} (message {res.message_id} at seq {res.seq})")
    ]
    if waited is None:
        rows.append(("status", "queued: the turn runs in the daemon"))
    elif res.boundary_seq is None:
        rows.append(
            ("status", style(f"still in flight after {waited:g}s (it keeps running)", "yellow"))
        )
    else:
        outcome = res.outcome or "completed"
        rows.append(("outcome", style(outcome, "green" if outcome == "completed" else "yellow")))
        rows.append(("boundary", f"seq {style(str(res.boundary_seq), 'cyan')} (turn.ended)"))
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
    lines += [
        f"  cancelled turn {c.get('turn_id', '?')} of {c.get('agent', '?')}" for c in res.cancelled
    ]
    return "\n".join(lines)


# -- generations -------------------------------------------------------------


def generations_table(res: m.GenerationsResult, style: Style, tz: tzinfo | None = None) -> str:
    """generations.list as a table, newest first as the daemon sends them."""
    if not res.generations:
        return "no generations yet (they are cut at turn, plan-step and phase boundaries)"
    rows = [
        [
            Cell(str(g.seq), ("cyan",)),
            g.kind,
            g.agent,
            str(g.branch),
            Cell("active", ("green",)) if g.active else Cell("abandoned", ("dim",)),
            format_time(g.created_at, tz),
            g.label,
        ]
        for g in res.generations
    ]
    headers = ["SEQ", "KIND", "AGENT", "BRANCH", "STATUS", "CREATED", "LABEL"]
    return table(headers, rows, style, align="rllr")


# -- rewind / checkout -------------------------------------------------------


def rewind_text(res: m.RewindResult, style: Style) -> str:
    """What a rewind or checkout did, in a line or two."""
    if res.mode == "fork_switch":
        head = f"switched to the abandoned branch at seq {res.target}"
    else:
        head = f"rewound to seq {res.target}"
    lines = [
        f"{style(head, 'bold')}: reset record {res.reset_seq}, now on branch {res.branch}"
        + (f" ({res.duration_ms:.1f} ms)" if res.duration_ms else "")
    ]
    lines += [f"  cancelled turn {c.turn_id} of {c.agent}" for c in res.cancelled]
    return "\n".join(lines)


# -- branches ------------------------------------------------------------------


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _seqs(seqs: Sequence[int], limit: int = 8) -> str:
    if not seqs:
        return "none"
    shown = ", ".join(str(s) for s in seqs[-limit:])
    return shown if len(seqs) <= limit else f"{len(seqs) - limit} older, {shown}"


def _horizon(value: float, unit: str) -> str:
    return "off" if not value else f"{value:g}{unit}"


def retention_text(info: m.RetentionInfo, style: Style) -> str:
    """retention.get: the two windows, the floor and what the policy keeps."""
    p = info.policy
    rows = [
        ("floor", f"seq {info.floor}" + ("" if info.floor > 1 else " (nothing collected)")),
        ("head", f"seq {info.head}"),
        ("wal", f"{format_bytes(info.wal_bytes)} in {_plural(info.segments, 'segment')}"),
        ("snapshots", str(info.snapshots)),
        ("coarse points", _seqs(info.coarse)),
        ("keep records", _horizon(p.wal_keep_records, "")),
        ("keep age", _horizon(p.wal_keep_age_s, " s")),
        ("keep bytes", "off" if not p.wal_keep_bytes else format_bytes(p.wal_keep_bytes)),
        ("keep snapshots", f"{p.snapshot_keep} below the floor"),
        ("snapshot age", _horizon(p.snapshot_keep_age_s, " s")),
        ("gc every", "only on request" if not p.gc_interval_s else f"{p.gc_interval_s:g} s"),
    ]
    return _pairs(rows, style)


def gc_text(res: m.GcResult, style: Style) -> str:
    """retention.gc: how far the floor moved and what went."""
    if res.floor == res.floor_before and not res.snapshots_dropped:
        head = f"nothing to collect: the floor stays at seq {res.floor}"
    else:
        head = f"floor seq {res.floor_before} -> {style(str(res.floor), 'bold')}"
    rows = [
        (
            "dropped",
            f"{_plural(res.segments_dropped, 'segment')} ({format_bytes(res.bytes_dropped)}), "
            f"{_plural(res.snapshots_dropped, 'snapshot')}",
        ),
        ("written", _plural(res.snapshots_written, "entry snapshot")),
        ("took", f"{res.duration_ms:.1f} ms"),
    ]
    return head + "\n" + _pairs(rows, style)


def _seq_range(b: m.BranchInfo) -> str:
    first = 1 if b.parent is None else b.id
    if b.tip < first:
        return "empty"
    return str(first) if b.tip == first else f"{first}..{b.tip}"


def branch_tree(res: m.BranchesResult, style: Style) -> str:
    """The branch tree, children under the branch they forked from, oldest first.

    Each line: the branch id in the tree, the seq it forked at, the seqs it
    holds; the checked-out branch is marked. A branch whose parent is unknown
    (collected by retention) is drawn as a root.
    """
    ids = {b.id for b in res.branches}
    children: dict[int | None, list[m.BranchInfo]] = {}
    for b in res.branches:
        parent = b.parent if b.parent in ids else None
        children.setdefault(parent, []).append(b)
    for kids in children.values():
        kids.sort(key=lambda b: (b.origin_seq, b.id))

    rows: list[list[Cell | str]] = []

    def walk(b: m.BranchInfo, prefix: str, connector: str) -> None:
        label = f"{prefix}{connector}{b.id}"
        mark = Cell(f"* current (head {res.head})", ("green", "bold")) if b.active else Cell("")
        styles = ("green", "bold") if b.active else ()
        rows.append(
            [
                Cell(label, styles),
                "" if b.parent is None else str(b.origin_seq),
                _seq_range(b),
                mark,
            ]
        )
        kids = children.get(b.id, [])
        below = prefix + ("" if not connector else ("│  " if connector == "├─ " else "   "))
        for i, kid in enumerate(kids):
            walk(kid, below, "└─ " if i == len(kids) - 1 else "├─ ")

    for root in children.get(None, []):
        walk(root, "", "")
    if not rows:
        return "no branches"
    return table(["BRANCH", "FORKED AT", "SEQS", ""], rows, style, align="lrl")


# -- state -------------------------------------------------------------------------


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
        lines.append(f"  {style('question', 'yellow')} {iv.intervention_id}: {iv.question}")
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


def state_text(res: m.StateResult, style: Style, width: int = 100) -> str:
    """state.get: a header, then one block per agent."""
    where = "active" if res.active else style("abandoned", "yellow")
    head = style(f"state as of seq {res.seq}", "bold") + f" (branch {res.branch}, {where})"
    if not res.agents:
        return f"{head}\nno agents"
    blocks = ["\n".join(_agent_lines(a, style, width)) for _, a in sorted(res.agents.items())]
    return "\n\n".join([head, *blocks])


# -- diff ----------------------------------------------------------------------------

_OPS = {"add": ("+", "green"), "remove": ("-", "red"), "change": ("~", "yellow")}


def diff_text(res: m.DiffResult, style: Style, width: int = 60) -> str:
    """state.diff: per agent, one line per change (+ added, - removed, ~ changed)."""
    head = style(f"seq {res.from_seq} → seq {res.to_seq}", "bold")
    changed = {name: cs for name, cs in sorted(res.agents.items()) if cs}
    if not changed:
        return f"{head}: no differences"
    lines = [head]
    for name, changes in changed.items():
        lines.append(f"{style('agent ' + name, 'bold')}: {len(changes)} changes")
        path_w = max(len(c.path or "/") for c in changes)
        for c in changes:
            sign, color = _OPS[c.op]
            if c.op == "add":
                value = _compact(c.after, width)
            elif c.op == "remove":
                value = _compact(c.before, width)
            else:
                value = f"{_compact(c.before, width // 2)} → {_compact(c.after, width // 2)}"
            lines.append(f"  {style(sign, color)} {(c.path or '/').ljust(path_w)}  {value}")
    return "\n".join(lines)


# -- watch ----------------------------------------------------------------------------


def _generic(data: Mapping[str, Any], width: int) -> str:
    parts: list[str] = []
    for k, v in data.items():
        shown = truncate(v, 40) if isinstance(v, str) else _compact(v, 40)
        parts.append(f"{k}={shown}")
    return truncate(" ".join(parts), width)


def _summary(topic: str, d: Mapping[str, Any], width: int) -> str:
    """A topic's data in words; unknown shapes fall back to key=value."""
    try:
        if topic == "records":
            who = f" {d['agent']}" if d.get("agent") else ""
            return f"{d['kind']}{who}  (branch {d['branch']})"
        if topic == "generations":
            label = f": {truncate(d['label'], width // 2)}" if d.get("label") else ""
            return f"{d['kind']} generation of {d['agent']}{label}"
        if topic == "rewinds":
            what = "switched to seq" if d["mode"] == "fork_switch" else "rewound to seq"
            cancelled = d.get("cancelled") or []
            n = len(cancelled)
            more = f", cancelled {n} turn{'' if n == 1 else 's'}" if n else ""
            return f"{what} {d['target']}, now on branch {d['branch']}{more}"
        if topic == "agents":
            return f"agent {d['agent']} {d['status']}"
    except (KeyError, TypeError):
        pass
    return _generic(d, width)


def notification_line(n: m.Notification, style: Style, width: int = 100) -> str:
    """One live notification: its seq, its topic and a summary of its data."""
    return (
        f"{style(str(n.seq).rjust(6), 'cyan')}  {n.topic:<11}  {_summary(n.topic, n.data, width)}"
    )


# -- audit log and replay ------------------------------------------------------------


def _pos(run: str, index: int) -> str:
    return f"{run}:{index}"


def runs_table(res: am.EventsRunsResult, style: Style, tz: tzinfo | None = None) -> str:
    """events.runs: one row per daemon run, oldest first."""
    if not res.runs:
        return "no runs in the audit log"
    rows: list[list[Cell | str]] = []
    for r in res.runs:
        seqs = "-" if r.first_seq is None else f"{r.first_seq}..{r.last_seq}"
        if r.current:
            state = Cell("current", ("green",))
        elif r.stopped:
            state = Cell("stopped")
        else:
            state = Cell("crashed", ("yellow",))  # no run.stopped: its last lines may be lost
        rows.append(
            [
                Cell(r.run, ("cyan",)),
                format_time(r.started_at or 0, tz),
                str(r.events),
                seqs,
                str(r.files),
                str(r.bytes),
                state,
            ]
        )
    headers = ["RUN", "STARTED", "EVENTS", "SEQS", "FILES", "BYTES", "STATE"]
    return table(headers, rows, style, align="llrrrrl")


def events_table(
    res: am.EventsListResult, style: Style, width: int = 60, tz: tzinfo | None = None
) -> str:
    """events.list as a table, oldest first."""
    if not res.events:
        return "no events match"
    rows: list[list[Cell | str]] = [
        [
            _pos(e.run, e.index),
            Cell(str(e.seq), ("cyan",)),
            str(e.branch),
            format_time(e.ts, tz),
            Cell(e.kind, ("yellow",) if e.reset is not None else ()),
            e.agent or "-",
            truncate(e.summary, width),
        ]
        for e in res.events
    ]
    headers = ["RUN:INDEX", "SEQ", "BRANCH", "TIME", "KIND", "AGENT", "SUMMARY"]
    return table(headers, rows, style, align="lrr")


def audit_event_text(e: am.AuditEvent, style: Style, tz: tzinfo | None = None) -> str:
    """events.get: the line's fields, then the WAL event as recorded."""
    rows = [
        ("event", f"{e.kind} at {_pos(e.run, e.index)}"),
        ("seq", f"{e.seq} on branch {e.branch}"),
        ("time", format_time(e.ts, tz)),
    ]
    if e.agent:
        rows.append(("agent", e.agent))
    rows.append(("summary", e.summary))
    if e.reset is not None:
        mode = e.reset.mode.replace("_", " ") if e.reset.mode else "unfinished"
        rows.append(("reset", f"{e.reset.op} to {e.reset.target}, {mode}"))
    text = _pairs(rows, style)
    body = e.event if e.event is not None else e.info
    if body:
        text += "\n" + json.dumps(body, indent=2, ensure_ascii=False)
    return text


def _brief_line(c: am.ChangeBrief, style: Style, path_w: int) -> str:
    sign, color = _OPS[c.op]
    if c.op == "add":
        value = c.after or ""
    elif c.op == "remove":
        value = c.before or ""
    else:
        value = f"{c.before} → {c.after}"
    return f"    {style(sign, color)} {c.path.ljust(path_w)}  {value}"


def _brief_block(changes: Mapping[str, Sequence[am.ChangeBrief]], style: Style) -> list[str]:
    lines = []
    for name, briefs in sorted(changes.items()):
        if not briefs:
            continue
        lines.append(f"  {style(name, 'bold')}:")
        path_w = max(len(c.path) for c in briefs)
        lines += [_brief_line(c, style, path_w) for c in briefs]
    return lines


def walk_text(res: am.ReplayWalkResult, style: Style, width: int = 80) -> str:
    """replay.walk: each step on a line, what it changed under it."""
    lines = [style(f"run {res.run}", "bold")]
    if not res.steps:
        lines.append("no events from there")
    for s in res.steps:
        e = s.event
        who = f" {e.agent}" if e.agent else ""
        lines.append(
            f"{style(str(e.index).rjust(5), 'cyan')}  seq {e.seq} [branch {e.branch}]  "
            f"{style(e.kind, 'yellow' if e.reset else 'bold')}{who}: {truncate(e.summary, width)}"
        )
        lines += _brief_block(s.changes, style)
        if s.more_changes:
            lines.append(f"    … {_plural(s.more_changes, 'more change')}")
    if not res.complete:
        lines.append(
            style(f"incomplete: seqs {_ranges(res.missing)} are not in the audit log", "yellow")
        )
    return "\n".join(lines)


def _ranges(ranges: Sequence[Sequence[int]]) -> str:
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in ranges)


def seek_text(res: am.ReplaySeekResult, style: Style, width: int = 100) -> str:
    """replay.seek: the reconstructed agents, as `reynctl show` draws them."""
    where = f", {_pos(res.run, res.index)}" if res.run is not None and res.index is not None else ""
    head = (
        style(f"replayed as of seq {res.seq}", "bold")
        + f" (branch {res.branch}{where}, from the audit log)"
    )
    blocks = ["\n".join(_agent_lines(a, style, width)) for _, a in sorted(res.agents.items())]
    out = [head, *(blocks or ["no agents"])]
    if not res.complete:
        out.append(
            style(f"incomplete: seqs {_ranges(res.missing)} are not in the audit log", "yellow")
        )
    return "\n\n".join(out)


def _side(e: am.AuditEvent | None, width: int) -> str:
    if e is None:
        return "-"
    return f"seq {e.seq} {e.kind}: {truncate(e.summary, width)}"


def compare_text(res: am.ReplayCompareResult, style: Style, width: int = 80) -> str:
    """replay.compare: the two sides, where they diverge, each differing step, the end states."""
    lines = [
        f"{style('a', 'bold')}  {res.a.label}: {_plural(res.a.events, 'event')}",
        f"{style('b', 'bold')}  {res.b.label}: {_plural(res.b.events, 'event')}",
    ]
    if res.fork_seq is not None:
        lines.append(f"common history up to seq {res.fork_seq}")
    if not res.diverged:
        lines.append(style(f"identical: {_plural(res.steps_total, 'step')}", "green"))
    else:
        lines.append(
            style(f"diverge at step {res.first_divergence}", "yellow", "bold")
            + f" ({res.same} of {_plural(res.steps_total, 'step')} the same)"
        )
    marks = {
        "same": ("=", "dim"),
        "changed": ("~", "yellow"),
        "only_a": ("<", "red"),
        "only_b": (">", "green"),
    }
    for s in res.steps:
        sign, color = marks[s.op]
        lines.append(f"{style(sign, color)} step {s.step}")
        if s.a is not None:
            lines.append(f"    a  {_side(s.a, width)}")
        if s.b is not None:
            lines.append(f"    b  {_side(s.b, width)}")
        for f in s.fields:
            lines.append(f"       {f.path}: {f.a} | {f.b}")
    if res.state:
        lines.append(style("state at the ends (a → b):", "bold"))
        lines += _brief_block(res.state, style)
    if not res.complete:
        lines.append(style("incomplete: some seqs are not in the audit log", "yellow"))
    return "\n".join(lines)

"""The audit log (runs, events) and the replay debugger (walk, seek, compare)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import tzinfo

from reynctl.render.diff import _OPS
from reynctl.render.formats import _plural, format_time, truncate
from reynctl.render.state import _agent_blocks
from reynctl.render.table import Cell, Style, _pairs, table
from reynd.protocol import audit_methods as am

__all__ = [
    "audit_event_text",
    "compare_text",
    "events_table",
    "runs_table",
    "seek_text",
    "walk_text",
]


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
        lines.append(_incomplete(res.missing, style))
    return "\n".join(lines)


def _incomplete(missing: Sequence[Sequence[int]], style: Style) -> str:
    """The seq ranges the audit log lacks (lost lines of a crashed run)."""
    ranges = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in missing)
    return style(f"incomplete: seqs {ranges} are not in the audit log", "yellow")


def seek_text(res: am.ReplaySeekResult, style: Style, width: int = 100) -> str:
    """replay.seek: the reconstructed agents, as `reynctl show` draws them."""
    where = f", {_pos(res.run, res.index)}" if res.run is not None and res.index is not None else ""
    head = (
        style(f"replayed as of seq {res.seq}", "bold")
        + f" (branch {res.branch}{where}, from the audit log)"
    )
    out = [head, *(_agent_blocks(res.agents, style, width) or ["no agents"])]
    if not res.complete:
        out.append(_incomplete(res.missing, style))
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

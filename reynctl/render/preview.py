"""A move's preview and what it cannot undo (issue 25): `--dry-run`, the confirmation."""

from __future__ import annotations

import shlex

from reynctl.render.formats import printable
from reynctl.render.table import Style
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.preview import Effects, MovePreview, effects_line, effects_parts

__all__ = ["cancelled_of", "effects_text", "preview_text", "unrecorded_lines"]

SHOWN = 10  # entries of each list the text names; the rest are counted


def _more(shown: int, total: int) -> list[str]:
    return [f"    ... and {total - shown} more"] if total > shown else []


def effects_text(effects: Effects | None, style: Style, *, quiet: bool = False) -> str:
    """The summary line (`not undone: ...`), then each program run and tool, indented;
    with `quiet`, nothing when there is nothing to say (after a move)."""
    if effects is None or (quiet and not effects_parts(effects)):
        return ""
    lines = [style(effects_line(effects), "yellow")]
    for run in effects.commands[:SHOWN]:
        code = "no exit status" if run.exit_code is None else f"exit {run.exit_code}"
        argv = printable(shlex.join(run.argv))
        lines.append(f"    ran {argv} ({code}) for {run.agent}/{run.turn_id}, seq {run.seq}")
    lines += _more(min(len(effects.commands), SHOWN), effects.command_count)
    if effects.tools:
        tools = ", ".join(f"{printable(n)} x{k}" for n, k in effects.tools.items())
        lines.append(f"    tools run: {tools}")
    if effects.unknown_steps:
        lines.append(
            f"    {effects.unknown_steps} step(s) left no record of what they did "
            "(an older reynd, an external runtime, a cancel): they may have done anything"
        )
    return "\n".join(lines)


def cancelled_of(res: m.RewindResult | a.ActTurnRewindResult) -> list[tuple[str, str]]:
    """The (agent, turn id) of each turn the move cancelled, or a dry run would."""
    if isinstance(res, m.RewindResult):
        return [(c.agent, c.turn_id) for c in res.cancelled]
    return [(c.get("agent", "?"), c.get("turn_id", "?")) for c in res.cancelled]


def unrecorded_lines(p: MovePreview | None, *, forced: bool = False) -> list[str]:
    """The workspace's changes reynd did not record: why the move would be refused, or
    (`forced`: a checkout with --force) what it records first."""
    if p is None or not p.unrecorded:
        return []
    n = p.unrecorded_count
    if forced:
        head = (
            f"  {n} workspace change(s) reynd did not record: --force records them first, "
            "just before the reset record R (`reynctl checkout R-1` brings them back)"
        )
    else:
        head = (
            f"  refused as it stands: {n} workspace change(s) reynd did not record "
            "(save them, or checkout with --force: they are recorded first)"
        )
    shown = [f"    {printable(f)}" for f in p.unrecorded[:SHOWN]]
    return [head, *shown, *_more(min(len(p.unrecorded), SHOWN), n)]


def preview_text(
    what: str,
    res: m.RewindResult | a.ActTurnRewindResult,
    style: Style,
    *,
    forced: bool = False,
    target_named: bool = True,
) -> str:
    """A dry run: what `what` would change, and what it cannot undo. Nothing was written.
    `target_named`: `what` names the target seq (else the line says it: an undo, a time)."""
    lines = [f"{style('dry run', 'bold')}: {what} would append reset record {res.reset_seq}"]
    if not target_named:
        lines[0] += f", to seq {res.target}"
    p = res.preview or MovePreview()
    for verb, turns, count in (
        ("abandons", p.abandoned_turns, p.abandoned_turn_count),
        ("restores", p.restored_turns, p.restored_turn_count),
    ):
        if count:
            named = ", ".join(f"{printable(t.agent)}/{t.turn_id}" for t in turns[:SHOWN])
            lines.append(f"  {verb} {count} turn(s): {named}")
            lines += _more(min(len(turns), SHOWN), count)
    if p.abandoned_agents:
        lines.append(f"  agents gone: {', '.join(map(printable, p.abandoned_agents))}")
    if p.restored_agents:
        lines.append(f"  agents back: {', '.join(map(printable, p.restored_agents))}")
    for agent, turn in cancelled_of(res):
        lines.append(f"  cancels turn {turn} of {printable(agent)} (in flight)")
    if p.files is not None:
        lines.append(f"  workspace files that change: {p.file_count}")
        lines += [f"    {printable(f)}" for f in p.files[:SHOWN]]
        lines += _more(min(len(p.files), SHOWN), p.file_count)
    lines += unrecorded_lines(p, forced=forced)
    text = effects_text(res.effects, style)
    return "\n".join([*lines, *([f"  {text}"] if text else [])])

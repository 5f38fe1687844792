"""One audit line: its on-disk shape, its one-line summary, and its API form.

A line is one JSON object (docs/format.md#audit-log). It carries the WAL
event exactly as committed, so the replay debugger can rebuild any agent
from the audit log alone, plus the seq, the branch and a short summary that
`zcat ... | jq .summary` shows without knowing the event kinds.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from reynd.protocol import audit_methods as am
from reynd.protocol import events as ev

__all__ = [
    "RUN_STARTED",
    "RUN_STOPPED",
    "AuditLine",
    "line_kind",
    "preview",
    "reset_summary",
    "summarize",
    "to_api",
]

RUN_STARTED: Final = "run.started"
RUN_STOPPED: Final = "run.stopped"

_RESET_KIND: Final = {"rewind": "rewind", "checkout": "checkout", "act_turn": "act_turn.rewind"}


class AuditLine(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The on-disk line; `i` is its index in the run (0 is `run.started`)."""

    i: int
    kind: str
    seq: int
    branch: int
    ts: float
    agent: str | None = None
    summary: str = ""
    reset: am.ResetInfo | None = None
    event: ev.AnyEvent | None = None
    info: dict[str, Any] | None = None


def line_kind(event: ev.Event) -> str:
    """The line's kind: the event's, except a reset record's names its operation."""
    if isinstance(event, ev.Rewind):
        return _RESET_KIND[event.mode]
    return ev.kind_of(event)


def preview(value: Any, width: int = 60) -> str:
    """A compact one-line JSON (or plain text) preview of `value`."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# A named exception to the complexity rules: a flat dispatch, one case per record kind,
# that reads best as the one table it is.
def summarize(e: ev.Event) -> str:  # noqa: C901, PLR0911, PLR0912 (one case per record kind)
    """One short line saying what `e` is (memo summaries for committed steps)."""
    if isinstance(e, ev.StepCommitted):
        roles = ",".join(m.role for m in e.messages) or "none"
        last = next((m.content for m in reversed(e.messages) if m.content), "")
        tools = sum(len(m.tool_calls) for m in e.messages)
        text = (
            f"step {e.step} of {e.turn_id} committed: {len(e.messages)} messages ({roles}), "
            f"{e.tokens_in}+{e.tokens_out} tokens"
        )
        if tools:
            text += f", {tools} tool calls"
        if e.output:
            text += f", output {preview(sorted(e.output), 30)}"
        return text + (f": {preview(last, 50)}" if last else "")
    if isinstance(e, ev.StepStarted):
        return f"step {e.step} of {e.turn_id} started"
    if isinstance(e, ev.MessageReceived):
        return f"message {e.message_id} from {e.sender}: {preview(e.text)}"
    if isinstance(e, ev.TurnStarted):
        return f"turn {e.turn_id} started on message {e.message_id}"
    if isinstance(e, ev.TurnEnded):
        reply = f": {preview(e.reply)}" if e.reply else ""
        return f"turn {e.turn_id} {e.outcome}{reply}"
    if isinstance(e, ev.AgentCreated):
        return f"agent created: executor {e.executor}, session {e.session}"
    if isinstance(e, ev.AgentConfigured):
        parts = []
        if e.executor is not None:
            parts.append(f"executor {e.executor}")
        if e.options is not None:
            parts.append(f"options {preview(sorted(e.options), 40)}")
        return "configured: " + (", ".join(parts) or "no change")
    if isinstance(e, ev.InterventionAsked):
        return f"asked {e.intervention_id}: {preview(e.question)}"
    if isinstance(e, ev.InterventionAnswered):
        return f"answered {e.intervention_id}: {preview(e.answer)}"
    if isinstance(e, ev.PlanCreated):
        return f"plan {e.plan_id} created with {len(e.steps)} steps"
    if isinstance(e, ev.PlanStepDone):
        return f"plan {e.plan_id} step {e.index} done"
    if isinstance(e, ev.SkillStarted):
        return f"skill {e.skill} started as {e.run_id} (phase {e.phase})"
    if isinstance(e, ev.SkillPhase):
        return f"skill run {e.run_id} entered phase {e.phase}"
    if isinstance(e, ev.SkillEnded):
        return f"skill run {e.run_id} {e.outcome}"
    if isinstance(e, ev.Rewind):
        text = f"{line_kind(e)} to {e.target_n} (reset {e.seq}, tip was {e.supersedes})"
        return text + (f": {e.reason}" if e.reason else "")
    if isinstance(e, ev.Lost):
        return f"lost: {e.reason}"
    if isinstance(e, ev.TagSet):
        return f"tag {e.name} names seq {e.target}"
    if isinstance(e, ev.TagDeleted):
        return f"tag {e.name} deleted"
    if isinstance(e, ev.WorkspaceFiles):
        gone = sum(1 for op in e.ops if op.kind == "-")
        paths = preview(", ".join(op.path for op in e.ops))
        return f"workspace ({e.cause}): {len(e.ops) - gone} written, {gone} deleted: {paths}"
    return line_kind(e)


def reset_summary(info: am.ResetInfo, seq: int) -> str:
    text = f"{_RESET_KIND[info.op]} to {info.target} (reset {seq}, tip was {info.supersedes})"
    if info.mode is not None:
        text += f": {info.mode.replace('_', ' ')}"
    if info.cancelled:
        turns = ", ".join(f"{c.agent}/{c.turn_id}" for c in info.cancelled)
        text += f", cancelled {turns}"
    if info.reason:
        text += f"; reason: {info.reason}"
    return text


def to_api(run: str, line: AuditLine) -> am.AuditEvent:
    """The line as the protocol's AuditEvent."""
    return am.AuditEvent(
        run=run,
        index=line.i,
        kind=line.kind,
        seq=line.seq,
        branch=line.branch,
        ts=line.ts,
        agent=line.agent,
        summary=line.summary,
        reset=line.reset,
        event=msgspec.to_builtins(line.event) if line.event is not None else None,
        info=line.info,
    )

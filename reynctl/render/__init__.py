"""Human output: aligned tables, the branch tree, state and diffs.

Pure functions from result types to text, so they are tested without a
daemon. Colour is applied after alignment (widths are measured on plain text)
and only when the `Style` says so. One module per area; this package only
re-exports them.
"""

from __future__ import annotations

from reynctl.render.agents import (
    act_turn_text,
    agent_text,
    agents_table,
    ambiguous_block,
    answer_text,
    cancel_text,
    interventions_table,
    resolve_command,
    resolve_text,
    send_text,
)
from reynctl.render.audit import (
    audit_event_text,
    compare_text,
    events_table,
    runs_table,
    seek_text,
    walk_text,
)
from reynctl.render.bisect import bisect_text, checkpoint_line, left_line, step_line
from reynctl.render.diff import diff_text, human_path
from reynctl.render.formats import (
    format_bytes,
    format_duration,
    format_time,
    printable,
    truncate,
)
from reynctl.render.moves import by_text, reflog_table
from reynctl.render.preview import cancelled_of, effects_text, preview_text, unrecorded_lines
from reynctl.render.retention import du_text, gc_text, retention_text
from reynctl.render.state import state_text
from reynctl.render.status import status_text
from reynctl.render.table import Cell, Style, table
from reynctl.render.tags import tag_text, tags_table
from reynctl.render.timeline import branch_tree, generations_table, rewind_text, runs_again
from reynctl.render.watch import notification_line

__all__ = [
    "Cell",
    "Style",
    "act_turn_text",
    "agent_text",
    "agents_table",
    "ambiguous_block",
    "answer_text",
    "audit_event_text",
    "bisect_text",
    "branch_tree",
    "by_text",
    "cancel_text",
    "cancelled_of",
    "checkpoint_line",
    "compare_text",
    "diff_text",
    "du_text",
    "effects_text",
    "events_table",
    "format_bytes",
    "format_duration",
    "format_time",
    "gc_text",
    "generations_table",
    "human_path",
    "interventions_table",
    "left_line",
    "notification_line",
    "preview_text",
    "printable",
    "reflog_table",
    "resolve_command",
    "resolve_text",
    "retention_text",
    "rewind_text",
    "runs_again",
    "runs_table",
    "seek_text",
    "send_text",
    "state_text",
    "status_text",
    "step_line",
    "table",
    "tag_text",
    "tags_table",
    "truncate",
    "unrecorded_lines",
    "walk_text",
]

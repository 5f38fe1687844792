"""The reflog: every move of the tip, newest first (issue 24)."""

from __future__ import annotations

from datetime import tzinfo

from reynctl.render.formats import format_time, printable
from reynctl.render.table import Cell, Style, table
from reynd.protocol.moves import ReflogEntry, ReflogResult, ResetBy

__all__ = ["by_text", "reflog_table"]


def by_text(by: ResetBy | None) -> str:
    """Who moved the tip: `reynctl (uid 1000, pid 4242)`; `-` when the record does not say."""
    if by is None:
        return "-"
    ids = ", ".join(
        f"{name} {value}" for name, value in (("uid", by.uid), ("pid", by.pid)) if value is not None
    )
    name = printable(by.client) if by.client else ""
    return f"{name} ({ids})".strip() if ids else name or "-"


def _what(e: ReflogEntry) -> str:
    """rewind, checkout (undo), checkout (fork switch), act-turn rewind."""
    if e.op == "act_turn":
        return "act-turn rewind"
    if e.op == "checkout":
        return "checkout (fork switch)" if e.mode == "fork_switch" else "checkout (undo)"
    return "rewind"


def reflog_table(res: ReflogResult, style: Style, tz: tzinfo | None = None) -> str:
    """reflog.list as a table, newest first as the daemon sends it."""
    if not res.entries:
        return "the tip never moved (no rewind, checkout or undo yet)"
    rows: list[list[Cell | str]] = []
    for e in res.entries:
        cancelled = ", ".join(f"{printable(t)} of {printable(a)}" for a, t in e.cancelled)
        rows.append(
            [
                Cell(str(e.seq), ("cyan",)),
                "(collected)" if e.collected else format_time(e.ts, tz),
                str(e.supersedes),
                str(e.target),
                _what(e),
                by_text(e.by),
                printable(e.reason),
                cancelled,
            ]
        )
    headers = ["RESET", "TIME", "FROM", "TO", "MOVE", "BY", "REASON", "CANCELLED"]
    return table(headers, rows, style, align="rlrr")

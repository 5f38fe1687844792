"""Live notifications, one line each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reynctl.render.formats import _compact, printable, truncate
from reynctl.render.table import Style
from reynd.protocol import methods as m

__all__ = ["notification_line"]


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
    summary = printable(_summary(n.topic, n.data, width))
    return f"{style(str(n.seq).rjust(6), 'cyan')}  {n.topic:<11}  {summary}"

"""Values as short text: truncated lines, times, durations, sizes, counts."""

from __future__ import annotations

import json
import re
from datetime import datetime, tzinfo
from typing import Any

from reynd.protocol.names import CONTROL_CHARS

__all__ = ["format_bytes", "format_duration", "format_time", "printable", "truncate"]

_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """`text` with control characters shown as escapes (`\\n`, `\\x1b`, `\\u202e`).

    What the daemon sends may hold characters a terminal obeys instead of
    showing (a newline that starts a fake table row, ESC sequences, bidi
    overrides); escaped, the text stays on its line and reads as it is.
    """
    return _CONTROL.sub(_escape, text)


def truncate(text: str, width: int) -> str:
    """One line of at most `width` characters, newlines shown as ⏎, other controls escaped."""
    flat = printable(text.replace("\r\n", "\n").replace("\n", " ⏎ "))
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


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _compact(value: Any, width: int = 60) -> str:
    return truncate(json.dumps(value, ensure_ascii=False, separators=(",", ":")), width)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"

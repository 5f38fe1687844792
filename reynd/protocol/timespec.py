"""Times as the protocol takes them (`at`, `before`, `after`), parsed in one place.

Pure: the daemon resolves with its own clock, and reynctl checks a value with
the same code before sending it. A time is

- a number: Unix seconds (a string of digits too, e.g. `1767225600.5`);
- an ISO 8601 time, e.g. `2026-12-06T09:30:00Z` or `2026-12-06 09:30`
  (without an offset it is the resolver's local time); a time of day alone,
  `09:30`, is the last such moment: today, or yesterday when that is later
  than now;
- a duration ago: a number and a unit, `s`, `m`, `h` or `d`, several summed
  (`90s`, `10m`, `2h`, `1d`, `1h30m`), counted back from `now`.

The daemon resolves durations by its own clock, the clock that stamped the
records, so a script on another machine with a skewed clock still means
"ten minutes before the daemon's now".
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from datetime import time as dt_time
from typing import Final

__all__ = ["USAGE", "TimeSpec", "TimeSpecError", "format_time", "is_duration", "resolve_time"]

TimeSpec = float | str
"""A time as sent: Unix seconds, or a string (ISO 8601, or a duration ago)."""

_UNIT: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION: Final = re.compile(r"(?:\d+(?:\.\d+)?[smhd])+")
_PART: Final = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+)?")

USAGE: Final = (
    "a time is Unix seconds (1767225600), an ISO 8601 time (2026-12-06T09:30:00Z, "
    "or 09:30 for the last such moment) or a duration ago (90s, 10m, 2h, 1d, 1h30m)"
)


class TimeSpecError(ValueError):
    """A time that is none of the accepted forms; the message says which are."""


def resolve_time(value: TimeSpec, now: float) -> float:
    """`value` as Unix seconds; a duration counts back from `now`. Raises TimeSpecError."""
    if isinstance(value, bool):
        raise TimeSpecError(f"{value!r} is not a time: {USAGE}")
    if isinstance(value, int | float):
        return _finite(float(value), value)
    text = value.strip()
    if _NUMBER.fullmatch(text):
        return _finite(float(text), value)
    if _DURATION.fullmatch(text):
        ago = sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))
        return _finite(now - ago, value)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return _time_of_day(text, value, now)
    return _timestamp(parsed, value)  # naive: local time


def _time_of_day(text: str, value: TimeSpec, now: float) -> float:
    """`09:30`: the last such moment at or before `now` (today, else yesterday)."""
    try:
        of_day = dt_time.fromisoformat(text)
    except ValueError:
        raise TimeSpecError(f"{value!r} is not a time: {USAGE}") from None
    today = datetime.fromtimestamp(now, of_day.tzinfo)
    moment = datetime.combine(today.date(), of_day)
    if _timestamp(moment, value) > now:
        moment -= timedelta(days=1)
    return _timestamp(moment, value)


def _timestamp(moment: datetime, value: TimeSpec) -> float:
    """`moment` as Unix seconds; a date the platform's clock cannot place (year 1 in
    a zone east of UTC) is not a time, not an internal error."""
    try:
        return moment.timestamp()
    except (OverflowError, ValueError, OSError):
        raise TimeSpecError(f"{value!r} is outside the times this clock holds: {USAGE}") from None


def is_duration(value: TimeSpec) -> bool:
    """True for a duration ago (`10m`): relative to the resolver's clock."""
    return isinstance(value, str) and _DURATION.fullmatch(value.strip()) is not None


def _finite(t: float, value: TimeSpec) -> float:
    if not math.isfinite(t):
        raise TimeSpecError(f"{value!r} is not a finite time: {USAGE}")
    return t


def format_time(t: float) -> str:
    """Unix seconds as ISO 8601 UTC, to the millisecond (for messages); a time
    no calendar holds (1e300) as the number."""
    try:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return f"{t!r} (Unix seconds)"

"""Addressing a seq by time (`--at`, `--before`, `--after`) and by count (`--back`).

Parsed by the protocol's own parser (reynd.protocol.timespec), so reynctl
refuses what the daemon would, before connecting. An absolute time (ISO 8601)
is turned into Unix seconds here, in the user's time zone; a duration ago
(`10m`) is sent as written and counted back by the daemon's clock, the clock
that stamped the records.
"""

from __future__ import annotations

import time
from typing import Any

import click

from reynd.protocol import methods as m
from reynd.protocol.timespec import USAGE, TimeSpecError, format_time, is_duration, resolve_time

__all__ = ["AT_HELP", "TIME", "addressed", "one_of"]


class _Time(click.ParamType[float | str, str]):
    """A time: Unix seconds, ISO 8601, or a duration ago (90s, 10m, 2h, 1d)."""

    name = "time"

    def convert(
        self, value: str | float, param: click.Parameter | None, ctx: click.Context | None
    ) -> float | str:
        if isinstance(value, float):
            return value
        try:
            t = resolve_time(value, time.time())
        except TimeSpecError as exc:
            self.fail(str(exc), param, ctx)
        # A duration goes as written: the daemon counts it back by its own clock.
        return value.strip() if is_duration(value) else t


TIME = _Time()


def one_of(**given: Any) -> None:
    """Exit 2 unless exactly one of the named addresses is given (`--at`, `--back`, SEQ)."""
    named = [name for name, value in given.items() if value is not None]
    if len(named) != 1:
        choice = ", ".join(_flag(name) for name in given)
        got = ", ".join(_flag(name) for name in named) or "none"
        ctx = click.get_current_context()
        raise click.UsageError(f"give exactly one of {choice} (got {got})", ctx)


def _flag(name: str) -> str:
    return name.upper() if name == "seq" else f"--{name}"


def addressed(res: m.RewindResult) -> str:
    """How a move's target was found, when not by its seq (for the human output)."""
    if res.resolved_from == "at" and res.at_time is not None:
        return f"  (addressed by time: {format_time(res.at_time)})"
    if res.resolved_from == "back":
        return "  (addressed as checkpoints back on the active branch)"
    return ""


AT_HELP = f"A time instead of a seq: {USAGE}; a duration counts back by the daemon's clock."

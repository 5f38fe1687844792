"""Named crash points: tests kill the process exactly at one with SIGKILL.

`REYN_CRASH_AT=name` kills at the first hit of `name`, `name:3` at the third.
Unset (production), `hit` is one dict lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_ENV", "hit"]

CRASH_ENV = "REYN_CRASH_AT"


def _parse(spec: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, spec.split(",")):
        name, _, count = part.partition(":")
        out[name.strip()] = int(count) if count else 1
    return out


_armed = _parse(os.environ.get(CRASH_ENV, ""))


def hit(name: str) -> None:
    """Die here, by SIGKILL, when this crash point is armed and its count is reached."""
    if not _armed or name not in _armed:
        return
    _armed[name] -= 1
    if _armed[name] <= 0:
        os.kill(os.getpid(), signal.SIGKILL)

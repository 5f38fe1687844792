"""Audit log file names: one run per daemon start, rotated files numbered.

A run id is `run-<UTC start, %Y%m%dT%H%M%SZ>-<pid>`: sortable as text,
readable, and unique because the start time is moved one second past the
newest run already on disk when needed. Rotated files are
`<run_id>.<n>.jsonl.gz`, n = 1, 2, ... The suffix says the format
(codec.py): `.jsonl.gz` is written, and `.jsonl` files that an older reynd
wrote are read as they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reynd.audit.codec import GZ_SUFFIX

__all__ = ["AuditFile", "file_name", "new_run_id", "parse_name", "run_started_at"]

_NAME = re.compile(r"^(run-(\d{8}T\d{6}Z)-\d+)(?:\.(\d+))?\.jsonl(?:\.gz)?$")
_STAMP = "%Y%m%dT%H%M%SZ"


def parse_name(name: str) -> tuple[str, int] | None:
    """(run_id, n) of an audit file name, or None for anything else."""
    match = _NAME.match(name)
    if match is None:
        return None
    return match.group(1), int(match.group(3) or 0)


def file_name(run: str, n: int) -> str:
    """The name of a file this reynd writes (compressed)."""
    return (f"{run}.jsonl" if n == 0 else f"{run}.{n}.jsonl") + GZ_SUFFIX


def _run_time(run: str) -> datetime:
    return datetime.strptime(run.split("-")[1], _STAMP).replace(tzinfo=UTC)


def run_started_at(run: str) -> float:
    """The start time encoded in a run id (Unix seconds)."""
    return _run_time(run).timestamp()


def new_run_id(existing: Sequence[str], now: float, pid: int) -> str:
    """A run id that sorts after every run in `existing`."""
    start = datetime.fromtimestamp(int(now), UTC)
    if existing:
        newest = _run_time(max(existing))
        if start <= newest:
            start = newest + timedelta(seconds=1)
    return f"run-{start.strftime(_STAMP)}-{pid}"


@dataclass(slots=True)
class AuditFile:
    run: str
    n: int
    path: Path
    size: int

    @property
    def compressed(self) -> bool:
        return self.path.name.endswith(GZ_SUFFIX)

"""Named crash and fault points: tests kill the process, or fail an I/O call, exactly there.

`REYN_CRASH_AT` arms points, comma-separated, each `name[:count[:action]]`:

    wal.after_sync           SIGKILL at the first hit of wal.after_sync
    wal.after_sync:3         SIGKILL at the third hit
    wal.sync:5:eio           raise OSError(EIO) at the 5th hit only (a transient error)
    wal.sync:5+:eio          raise at the 5th hit and at every later one (persistent)
    wal.write:2:enospc       raise OSError(ENOSPC) at the 2nd hit

Actions: `kill` (the default: SIGKILL, a process crash), `eio`, `enospc`. An
error is raised where the point is, as the I/O call right after it would
raise it, and goes through the same paths as a real one (for the daemon: the
committer fails every pending append and the daemon exits non-zero).

POINTS names every point and where it fires. A name not in it is refused:
in `REYN_CRASH_AT` (a ValueError naming the known points, when this module
is imported) and by `hit` and `armed` (a misspelt call site would otherwise
never fire, and the test arming it would pass without testing anything).

Unset (production), `hit` is one lookup and one truthiness test.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = ["CRASH_ENV", "POINTS", "armed", "hit"]

CRASH_ENV = "REYN_CRASH_AT"

POINTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "wal.write": "start of a write batch, nothing written yet (a failing write)",
        "wal.mid_batch": "an atomic batch (wal.append_batch) is written up to the middle of "
        "one of its records after the first (hit once per such record)",
        "wal.after_write": "the batch is written, not synced",
        "wal.sync": "just before the batch's fdatasync: an error here is a failed fsync "
        "(the bytes are in the file, not durable)",
        "wal.after_sync": "the batch is durable, not yet acknowledged",
        "snapshot.mid_write": "half of a snapshot's tmp file is written",
        "snapshot.before_rename": "the tmp file is written and fsynced, not renamed",
        "reset.durable": "a reset record is durable, the tip's state not yet swapped",
        "gc.after_entry_snapshots": "a collection wrote its entry snapshots, nothing else yet",
        "gc.after_retained": "the retained file (new floor) is durable, no segment deleted",
        "gc.after_unlink": "one more old segment is unlinked (hit once per segment)",
        "index.mid_write": "half of a segment index chunk is appended (a torn index)",
        "index.after_chunk": "one more chunk is appended and synced "
        "(hit once per segment whose index a write extends)",
        "workspace.recorded": "a step's or boundary's changed files are read and their blobs "
        "(and a boundary's manifests) stored, nothing staged in the WAL",
        "workspace.before_pointer": "a boundary with changes is durable, "
        "its trees/<seq> not written",
        "workspace.before_restore": "a reset record is durable (journal written), no file restored",
        "workspace.restore.file": "before each file a restore writes or deletes",
        "workspace.after_restore": "the files are restored, the journal not yet removed",
    }
)
"""Every crash point, with where it fires."""

_ERRNOS = {"eio": errno.EIO, "enospc": errno.ENOSPC}


@dataclass(slots=True)
class _Armed:
    remaining: int  # hits before the one that fires
    errno: int | None  # None: SIGKILL
    persistent: bool  # an error fires at every hit from then on


def _unknown(name: str, where: str) -> ValueError:
    return ValueError(f"{where}: unknown crash point {name!r}; the points are {', '.join(POINTS)}")


def _parse(spec: str) -> dict[str, _Armed]:
    out: dict[str, _Armed] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, rest = part.partition(":")
        name = name.strip()
        if name not in POINTS:
            raise _unknown(name, f"{CRASH_ENV} {part!r}")
        count, _, action = rest.partition(":")
        persistent = count.endswith("+")
        n = int(count.rstrip("+")) if count.rstrip("+") else 1
        action = action.strip().lower() or "kill"
        if action != "kill" and action not in _ERRNOS:
            raise ValueError(f"{CRASH_ENV}: unknown action {action!r} in {part!r}")
        if n < 1:
            raise ValueError(f"{CRASH_ENV}: count must be at least 1 in {part!r}")
        out[name] = _Armed(n, _ERRNOS.get(action), persistent)
    return out


_armed = _parse(os.environ.get(CRASH_ENV, ""))


def armed(name: str) -> bool:
    """True when point `name` is armed: a writer may then stage a partial write before it."""
    if name not in POINTS:
        raise _unknown(name, "crashpoints.armed")
    return name in _armed


def hit(name: str) -> None:
    """Act here when this point is armed and its count is reached: SIGKILL, or raise OSError."""
    if name not in POINTS:
        raise _unknown(name, "crashpoints.hit")
    if not _armed:
        return
    armed = _armed.get(name)
    if armed is None:
        return
    armed.remaining -= 1
    if armed.remaining > 0:
        return
    if armed.errno is None:
        os.kill(os.getpid(), signal.SIGKILL)
        return
    if armed.remaining < 0 and not armed.persistent:
        return  # a transient error fired once, at the count
    raise OSError(armed.errno, f"{os.strerror(armed.errno)} (injected at {name})")

"""File descriptors: raise the soft limit at start, and cap connections to what is left.

Every connection holds one descriptor for its life; storage needs a few more
at moments nobody chooses (a new WAL segment and its directory, a snapshot's
tmp file, a segment index, a blob being copied in and its source, the SQLite
config store, GC opening old segments, an executor's three pipes, a
workspace restore's directory descriptors, the replica's HTTP sockets). If
the clients could take every descriptor, a snapshot or a commit would fail
with EMFILE. So the daemon raises its soft RLIMIT_NOFILE to the hard limit
(the soft one is often 1024 while the hard one is much higher: raising it
needs no privilege), and serves at most

    min(max_connections, limit - in use at start - reserve)

connections, where `reserve` is a quarter of the limit, at least RESERVE_MIN
(the transient needs above, counted for one of each at once, plus the few
connections being refused at any moment) and at most RESERVE_MAX (storage
never needs more). Past the cap a new connection is refused with one
`connection_limit` error line (server.py): writes never fail for it.
"""

from __future__ import annotations

import os
import resource

__all__ = [
    "RESERVE_MAX",
    "RESERVE_MIN",
    "connection_cap",
    "fds_in_use",
    "raise_soft_limit",
    "reserve",
]

# Transient descriptors of storage, one of each at once: WAL rotation (segment +
# directory) 2, snapshot 2, segment index 2, blob copy (source, tmp, directory) 3,
# GC 4, an executor's pipes 4, a restore's directory descriptors 8 (typical depth),
# connections being refused (server._MAX_REFUSING) 4.
RESERVE_MIN = 32
RESERVE_MAX = 1024
_UNKNOWN_IN_USE = 64  # when /proc/self/fd cannot be read


def reserve(limit: int) -> int:
    """Descriptors kept for storage out of `limit`."""
    return max(RESERVE_MIN, min(RESERVE_MAX, limit // 4))


def connection_cap(configured: int, limit: int, in_use: int) -> int:
    """The connections to serve at most: `configured`, less if the fds leave less room.

    Never below 1: a daemon nobody can reach is no use (the start logs a warning).
    """
    return max(1, min(configured, limit - in_use - reserve(limit)))


def raise_soft_limit() -> tuple[int, int | None]:
    """Raise the soft RLIMIT_NOFILE to the hard one: (soft limit now, the one before if raised)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _ceiling() if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, None  # a sandbox that refuses: serve within what we have
        return target, soft
    return (target if soft == resource.RLIM_INFINITY else soft), None


def fds_in_use() -> int:
    """Descriptors this process has open now."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # listdir's own descriptor
    except OSError:
        return _UNKNOWN_IN_USE


def _ceiling() -> int:
    """The kernel's own bound on RLIMIT_NOFILE (an unlimited hard limit cannot be set)."""
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1 << 20

"""What a method handler knows about the call it serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CallContext", "Peer", "ServerInfo"]


@dataclass(frozen=True, slots=True)
class Peer:
    """The client process at the other end of the socket (from SO_PEERCRED)."""

    pid: int
    uid: int
    gid: int


@dataclass(slots=True)
class ServerInfo:
    """Live figures of the transport, shown by daemon.status."""

    socket: Path | None = None
    connections: int = 0
    max_connections: int = 0  # the cap in force (the open-file limit may lower it)
    subscriptions: int = 0
    started_at: float = 0.0  # wall clock, at start
    started_monotonic: float = 0.0  # time.monotonic() at start: what uptime counts from
    log: str = ""  # where the log goes: a file, journald or stderr


@dataclass(frozen=True, slots=True)
class CallContext:
    """Passed to every handler with its decoded params.

    `client`: the name the connection's client gave with `session.hello` ("" if none).
    """

    connection_id: int
    peer: Peer | None
    server: ServerInfo = field(default_factory=ServerInfo)
    client: str = ""

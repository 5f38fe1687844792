"""Why the client could not talk to the daemon, one class per cause.

Errors *from* the daemon are `reynd.protocol.errors.ReyndError`; the classes
here cover everything before or around them (no socket, refused, wrong
protocol...). Each carries the message shown to the user, which says what to do.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ClientError",
    "ConnectionClosed",
    "DaemonTimeout",
    "DaemonUnreachable",
    "NoDaemon",
    "ProtocolMismatch",
    "ProtocolViolation",
    "SocketPermissionDenied",
    "StaleSocket",
    "UntrustedDaemon",
]

START_HINT = "start it with `reynd serve` or `systemctl --user start reynd`"


class ClientError(Exception):
    """Base: the client could not complete a call. `name` is stable, for --json."""

    name = "client_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DaemonUnreachable(ClientError):
    """The socket could not be connected to."""

    name = "unreachable"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot connect to the daemon at {path}: {reason}")
        self.path = path


class NoDaemon(DaemonUnreachable):
    name = "no_daemon"

    def __init__(self, path: Path, why_here: str = "") -> None:
        ClientError.__init__(self, f"no daemon at {path}{why_here}: {START_HINT}")
        self.path = path


class StaleSocket(DaemonUnreachable):
    """The file exists but nobody listens: the daemon died without removing it."""

    name = "stale_socket"

    def __init__(self, path: Path) -> None:
        ClientError.__init__(
            self,
            f"connection refused at {path}: the socket is stale (no daemon is listening); "
            f"{START_HINT} (it removes the stale file)",
        )
        self.path = path


class SocketPermissionDenied(DaemonUnreachable):
    name = "permission_denied"

    def __init__(self, path: Path) -> None:
        ClientError.__init__(
            self,
            f"permission denied on {path}: the daemon belongs to another user; "
            "use your own (`reynd serve`) or pass --socket",
        )
        self.path = path


class UntrustedDaemon(ClientError):
    """The socket is served by a uid the user did not say to trust: nothing was sent."""

    name = "untrusted_daemon"

    def __init__(self, path: Path, uid: int, user: str | None, own_uid: int) -> None:
        who = f"uid {uid} ({user})" if user else f"uid {uid}"
        trusted = "root (you)" if own_uid == 0 else f"you (uid {own_uid}) or root"
        super().__init__(
            f"refusing the daemon at {path}: it is served by {who}, not by {trusted}; "
            f"if you trust it, pass --daemon-uid {user or uid} "
            f"or set REYN_DAEMON_UID={user or uid}"
        )
        self.path = path
        self.uid = uid


class ConnectionClosed(ClientError):
    """The daemon hung up: it stopped, restarted, or dropped this client."""

    name = "connection_closed"

    def __init__(self, path: Path, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(f"the daemon at {path} closed the connection{extra}")
        self.path = path


class DaemonTimeout(ClientError):
    name = "timeout"

    def __init__(self, path: Path, method: str, timeout: float) -> None:
        super().__init__(
            f"no answer to {method} from the daemon at {path} within {timeout:g}s "
            "(raise --timeout, or check the daemon's log)"
        )
        self.path = path


class ProtocolMismatch(ClientError):
    name = "protocol_mismatch"

    def __init__(self, ours: int, theirs: int, daemon_version: str) -> None:
        older = "reynctl" if ours < theirs else "reynd"
        super().__init__(
            f"protocol mismatch: the daemon (reynd {daemon_version}) speaks protocol {theirs}, "
            f"this reynctl speaks {ours}: upgrade {older} so both match"
        )
        self.ours = ours
        self.theirs = theirs


class ProtocolViolation(ClientError):
    """The daemon sent something that is not valid JSON-RPC for this protocol."""

    name = "protocol_violation"

    def __init__(self, detail: str) -> None:
        super().__init__(f"unexpected message from the daemon: {detail}")

"""Every error a client sees: the daemon's, one class per JSON-RPC code, and the client's own.

Errors *from* the daemon are `ReyndError` subclasses (defined in
`reynd.protocol.errors`, re-exported here): `.code` is the stable JSON-RPC
code, `.message` says what to do, `.data` holds the details (`data.field`
names a refused param). A code this version does not know arrives as
`ReyndError` with that `.code`. The `ClientError` classes cover everything
before or around them (no socket, refused, wrong protocol, connection
dropped). Each carries the message shown to the user, which says what to do.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

from reynd.protocol import errors as _daemon
from reynd.protocol.errors import *  # noqa: F403  (every daemon error: one list, theirs)

__all__ = [
    "CLIENT_CODES",
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
    "connect_failed",
]
if not TYPE_CHECKING:  # mypy takes them from the star import; the list is derived at run time
    __all__ += _daemon.__all__  # the daemon's errors, one class per code, as they define them

START_HINT = "start it with `reynd serve` or `systemctl --user start reynd`"


# The client's own codes, for `--json` errors (docs/cli.md): outside JSON-RPC's
# reserved -32768..-32000, so never one of the daemon's.
CLIENT_CODES = range(-33099, -32999)


class ClientError(Exception):
    """Base: the client could not complete a call. `name` and `code` are stable, for --json."""

    name = "client_error"
    code = -33000

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DaemonUnreachable(ClientError):
    """The socket could not be connected to."""

    name = "unreachable"
    code = -33001

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot connect to the daemon at {path}: {reason}")
        self.path = path


class NoDaemon(DaemonUnreachable):
    name = "no_daemon"
    code = -33002

    def __init__(self, path: Path, why_here: str = "") -> None:
        ClientError.__init__(self, f"no daemon at {path}{why_here}: {START_HINT}")
        self.path = path


class StaleSocket(DaemonUnreachable):
    """The file exists but nobody listens: the daemon died without removing it."""

    name = "stale_socket"
    code = -33003

    def __init__(self, path: Path) -> None:
        ClientError.__init__(
            self,
            f"connection refused at {path}: the socket is stale (no daemon is listening); "
            f"{START_HINT} (it removes the stale file)",
        )
        self.path = path


class SocketPermissionDenied(DaemonUnreachable):
    name = "permission_denied"
    code = -33004

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
    code = -33005

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
    code = -33006

    def __init__(self, path: Path, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(f"the daemon at {path} closed the connection{extra}")
        self.path = path


class DaemonTimeout(ClientError):
    name = "timeout"
    code = -33007

    def __init__(self, path: Path, method: str, timeout: float) -> None:
        super().__init__(
            f"no answer to {method} from the daemon at {path} within {timeout:g}s "
            "(raise --timeout, or check the daemon's log)"
        )
        self.path = path


class ProtocolMismatch(ClientError):
    name = "protocol_mismatch"
    code = -33008

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
    code = -33009

    def __init__(self, detail: str) -> None:
        super().__init__(f"unexpected message from the daemon: {detail}")


def connect_failed(path: Path, exc: OSError, timeout: float | None) -> ClientError:
    """The ClientError for a failed connect to the socket at `path` (timeout: the client's)."""
    if isinstance(exc, FileNotFoundError):
        return NoDaemon(path)
    if isinstance(exc, ConnectionRefusedError):
        # Linux refuses a connect to a plain file too: tell the two apart.
        return (
            DaemonUnreachable(path, "not a socket") if not path.is_socket() else StaleSocket(path)
        )
    if isinstance(exc, PermissionError):
        return SocketPermissionDenied(path)
    if isinstance(exc, TimeoutError):
        return DaemonTimeout(path, "connect", timeout or 0)
    reason = "not a socket" if exc.errno == errno.ENOTSOCK else exc.strerror or str(exc)
    return DaemonUnreachable(path, reason)

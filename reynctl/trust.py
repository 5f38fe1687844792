"""Which daemon reynctl talks to: the uid serving the socket must be one we trust.

A socket path says nothing about who listens on it: without XDG_RUNTIME_DIR
the per-user socket lives under /tmp, where another user can get there
first. So right after connecting, before anything is sent, the client reads
the server's credentials (SO_PEERCRED: the uid that called listen()) and goes
on only with our own euid, root (uid 0; also systemd, which listens for a
socket-activated daemon), or the one uid the user named with `--daemon-uid`
or `$REYN_DAEMON_UID` (a system daemon running as its own user).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from reynctl.errors import DaemonUnreachable, UntrustedDaemon
from reynd.protocol.peer import SocketLike, parse_uid, peer_credentials, user_name

__all__ = ["DAEMON_UID_ENV", "check_daemon", "daemon_uid_from_env"]

DAEMON_UID_ENV = "REYN_DAEMON_UID"


def daemon_uid_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """The uid `$REYN_DAEMON_UID` names (a number or a user name); None when unset.

    ValueError when it names no user.
    """
    env = os.environ if env is None else env
    text = env.get(DAEMON_UID_ENV)
    return parse_uid(text) if text else None


def check_daemon(sock: SocketLike, path: Path, daemon_uid: int | None) -> None:
    """Raise UntrustedDaemon unless the server of connected `sock` runs as a trusted uid.

    Trusted: our euid, root, and `daemon_uid` when given.
    """
    try:
        uid = peer_credentials(sock).uid
    except OSError as exc:
        raise DaemonUnreachable(path, f"cannot tell which user serves it ({exc})") from None
    own = os.geteuid()
    if uid in (own, 0) or uid == daemon_uid:
        return
    raise UntrustedDaemon(path, uid, user_name(uid), own)

"""Where the daemon's socket and state live; the daemon and clients resolve them alike."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "SOCKET_ENV",
    "STATE_DIR_ENV",
    "SYSTEM_SOCKET",
    "default_socket",
    "resolve_socket",
    "resolve_state_dir",
]

SOCKET_ENV = "REYN_SOCKET"
STATE_DIR_ENV = "REYN_STATE_DIR"
SYSTEM_SOCKET = Path("/run/reynd/reynd.sock")


def default_socket(env: Mapping[str, str] | None = None) -> Path:
    """The per-user socket: $XDG_RUNTIME_DIR/reynd/reynd.sock, else /tmp/reynd-$UID/reynd.sock."""
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(f"/tmp/reynd-{os.getuid()}")
    return base / "reynd" / "reynd.sock"


def resolve_socket(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """--socket, then $REYN_SOCKET, then the user path."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit)
    if env.get(SOCKET_ENV):
        return Path(env[SOCKET_ENV])
    return default_socket(env)


def resolve_state_dir(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """--state-dir, then $REYN_STATE_DIR, then ./.reyn."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit)
    if env.get(STATE_DIR_ENV):
        return Path(env[STATE_DIR_ENV])
    return Path(".reyn")

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
    "fallback_runtime_dir",
    "private_socket_dirs",
    "resolve_socket",
    "resolve_state_dir",
]

SOCKET_ENV = "REYN_SOCKET"
STATE_DIR_ENV = "REYN_STATE_DIR"
SYSTEM_SOCKET = Path("/run/reynd/reynd.sock")


def fallback_runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the per-user socket lives without $XDG_RUNTIME_DIR: $TMPDIR/reynd-$UID.

    $TMPDIR when it is an absolute path (as Emacs's server does), else /tmp.
    """
    env = os.environ if env is None else env
    tmp = env.get("TMPDIR", "")
    return Path(tmp if tmp.startswith("/") else "/tmp") / f"reynd-{os.getuid()}"


def default_socket(env: Mapping[str, str] | None = None) -> Path:
    """The per-user socket: $XDG_RUNTIME_DIR/reynd/reynd.sock.

    Without XDG_RUNTIME_DIR: $TMPDIR/reynd-$UID/reynd/reynd.sock ($TMPDIR
    defaulting to /tmp).
    """
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else fallback_runtime_dir(env)
    return base / "reynd" / "reynd.sock"


def private_socket_dirs(socket: Path, env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The directories of the per-user layout on the way to `socket`, outermost first.

    `$TMPDIR/reynd-$UID` (or `/tmp/reynd-$UID`) and its `reynd/`, or
    `$XDG_RUNTIME_DIR/reynd`: reynd makes these for itself, so they must be
    ours and private (in a shared /tmp anyone may have made them first). Any
    other socket directory (the system daemon's /run/reynd, a --socket of the
    user's choosing) is not judged: () then.
    """
    env = os.environ if env is None else env
    parent = socket.parent
    if parent.name != "reynd":
        return ()
    if parent.parent in (fallback_runtime_dir(env), fallback_runtime_dir({})):
        return (parent.parent, parent)
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and parent.parent == Path(runtime):
        return (parent,)
    return ()


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
    """--state-dir, then $REYN_STATE_DIR, then ./.reyn; absolute (status and logs show it)."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit).absolute()
    if env.get(STATE_DIR_ENV):
        return Path(env[STATE_DIR_ENV]).absolute()
    return Path(".reyn").absolute()

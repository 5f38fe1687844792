"""Where the daemon's socket and state live; the daemon and clients resolve them alike.

One model: a daemon serves one state dir, and its socket is named after it.
The state dir is `--state-dir`, `$REYN_STATE_DIR`, else the nearest `.reyn/`
from the working directory up (as git finds `.git`), else `./.reyn`. So
`reynd serve` and `reynctl` run anywhere in a project meet at the same
socket, and two projects run two daemons side by side. Outside any project,
clients use the per-user socket (the systemd user unit's), then the system one.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "SOCKET_ENV",
    "STATE_DIR_ENV",
    "SYSTEM_SOCKET",
    "STATE_DIR_NAME",
    "default_socket",
    "fallback_runtime_dir",
    "find_state_dir",
    "private_socket_dirs",
    "resolve_socket",
    "resolve_state_dir",
    "state_socket",
]

SOCKET_ENV = "REYN_SOCKET"
STATE_DIR_ENV = "REYN_STATE_DIR"
SYSTEM_SOCKET = Path("/run/reynd/reynd.sock")
STATE_DIR_NAME = ".reyn"


def fallback_runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the per-user socket lives without $XDG_RUNTIME_DIR: $TMPDIR/reynd-$UID.

    $TMPDIR when it is an absolute path (as Emacs's server does), else /tmp.
    """
    env = os.environ if env is None else env
    tmp = env.get("TMPDIR", "")
    return Path(tmp if tmp.startswith("/") else "/tmp") / f"reynd-{os.getuid()}"


def _socket_dir(env: Mapping[str, str]) -> Path:
    runtime = env.get("XDG_RUNTIME_DIR")
    return (Path(runtime) if runtime else fallback_runtime_dir(env)) / "reynd"


def default_socket(env: Mapping[str, str] | None = None) -> Path:
    """The per-user socket: $XDG_RUNTIME_DIR/reynd/reynd.sock (the systemd user unit's).

    Without XDG_RUNTIME_DIR: $TMPDIR/reynd-$UID/reynd/reynd.sock ($TMPDIR
    defaulting to /tmp).
    """
    return _socket_dir(os.environ if env is None else env) / "reynd.sock"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def state_socket(state_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """The socket of the daemon serving `state_dir` when none is configured.

    `<socket dir>/<project>-<hash>.sock`, next to the per-user socket: the
    project's directory name for people, a hash of the state dir's real path
    so that one state dir has one socket whatever path reaches it (and the name
    stays well inside the 108 bytes of a socket address).
    """
    real = state_dir.resolve()
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    project = _UNSAFE.sub("_", real.parent.name)[:32] or "root"
    return _socket_dir(os.environ if env is None else env) / f"{project}-{digest}.sock"


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
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    configured: str | os.PathLike[str] | None = None,
    state_dir: Path | None = None,
) -> Path:
    """--socket, $REYN_SOCKET, `socket` in reynd.toml, the state dir's socket, the user's."""
    env = os.environ if env is None else env
    for choice in (explicit, env.get(SOCKET_ENV), configured):
        if choice:
            return Path(choice)
    return default_socket(env) if state_dir is None else state_socket(state_dir, env)


def find_state_dir(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """$REYN_STATE_DIR, else the nearest `.reyn` directory from `cwd` up; None without one."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    if env.get(STATE_DIR_ENV):
        return cwd / env[STATE_DIR_ENV]
    for directory in (cwd, *cwd.parents):
        candidate = directory / STATE_DIR_NAME
        if candidate.is_dir():
            return candidate
    return None


def resolve_state_dir(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Path:
    """--state-dir, else `find_state_dir`, else ./.reyn; absolute (status and logs show it)."""
    cwd = Path.cwd() if cwd is None else cwd
    if explicit:
        return cwd / explicit
    return find_state_dir(env, cwd) or cwd / STATE_DIR_NAME

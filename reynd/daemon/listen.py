"""The listening socket: bound to a path by us, or inherited from systemd.

A socket we bind lives in a directory we create 0700 and is itself 0600 (set
through the umask so that it is never, even briefly, more open). The per-user
layout's directories (`$TMPDIR/reynd-$UID`, else `/tmp/reynd-$UID`, and its
`reynd/`, or `$XDG_RUNTIME_DIR/reynd`) are used only when they are real
directories owned by our euid with no group or other permissions: in a shared
/tmp anyone can make `/tmp/reynd-$UID` first and serve a socket of their own.
A socket file
left behind by a dead daemon is detected by connecting to it: an answer means
a live daemon (refused, naming its pid from SO_PEERCRED), a refusal means a
stale file (removed). An inherited socket belongs to systemd: never unlinked.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from reynd.daemon import systemd
from reynd.protocol.paths import private_socket_dirs
from reynd.protocol.peer import peer_credentials, user_name

__all__ = [
    "AnotherDaemon",
    "BoundSocket",
    "ListenError",
    "UnsafeDirectory",
    "open_socket",
    "peer_credentials",
]


class ListenError(Exception):
    """The socket cannot be set up; the message says why and where."""


class AnotherDaemon(ListenError):
    """A live daemon answers on the socket path."""

    def __init__(self, pid: int | None, path: Path, state_dir: str | None = None) -> None:
        holder = f"pid {pid}" if pid else "pid unknown"
        if state_dir:
            holder += f", state dir {state_dir}"
        super().__init__(
            f"another daemon ({holder}) listens on {path}: to run a second one, give it a "
            "socket of its own (--socket PATH, or socket in its reynd.toml) and point "
            "reynctl at it (--socket PATH or REYN_SOCKET)"
        )
        self.pid = pid
        self.path = path


class UnsafeDirectory(ListenError):
    """A directory of the per-user socket layout is not ours alone: a configuration error."""


@dataclass(frozen=True, slots=True)
class BoundSocket:
    """A listening stream socket and where it lives."""

    sock: socket.socket
    path: Path | None
    inherited: bool

    def remove(self) -> None:
        """Unlink the socket file if we created it (never an inherited one)."""
        if self.path is not None and not self.inherited:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def open_socket(path: Path, backlog: int = socket.SOMAXCONN) -> BoundSocket:
    """The systemd-passed socket if there is one, else a fresh socket bound at `path`."""
    for sock, _name in systemd.inherited_sockets():
        if sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM:
            if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                sock.listen(backlog)
            name = sock.getsockname()
            where = Path(name) if isinstance(name, str) and name.startswith("/") else None
            return BoundSocket(sock, where, inherited=True)
        sock.close()
    private = private_socket_dirs(path)
    if private:
        for directory in private:
            _make_private_directory(directory)
    else:
        _prepare_directory(path.parent)
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old_umask = os.umask(0o177)  # the file is created 0600, with no window at a wider mode
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot bind {path}: {exc.strerror}") from None
    finally:
        os.umask(old_umask)
    sock.listen(backlog)
    return BoundSocket(sock, path, inherited=False)


def _prepare_directory(directory: Path) -> None:
    if directory.is_dir():
        return  # an existing directory keeps its mode: it may be /run/reynd or shared
    try:
        directory.mkdir(parents=True, mode=0o700)
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
    except FileExistsError:
        pass
    except OSError as exc:
        raise ListenError(f"cannot create {directory}: {exc.strerror}") from None


def _make_private_directory(directory: Path) -> None:
    """Create `directory` 0700, or accept an existing one only if it is ours and private."""
    try:
        os.mkdir(directory, 0o700)  # the umask can only take bits away
    except FileExistsError:
        pass
    except OSError as exc:
        raise ListenError(f"cannot create {directory}: {exc.strerror}") from None
    # lstat: a symlink is refused, never followed. Once the directory is
    # ours, nobody else can rename or replace it, even in a sticky /tmp.
    st = directory.lstat()
    mode = stat.S_IMODE(st.st_mode)
    euid = os.geteuid()
    if stat.S_ISLNK(st.st_mode):
        problem = f"it is a symbolic link (to {os.readlink(directory)})"
        fix = "remove it"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "it is not a directory"
        fix = "remove it"
    elif st.st_uid != euid:
        problem = f"it belongs to another user, {_who(st.st_uid)}"
        fix = "remove it (as root, or as that user)"
    elif mode & 0o077:
        problem = "group or other users have access to it"
        fix = f"run `chmod 700 {directory}`"
    else:
        return
    raise UnsafeDirectory(
        f"refusing to use {directory} for the socket: {problem} (owner {_who(st.st_uid)}, "
        f"mode {mode:04o}); it must be a directory owned by {_who(euid)} with mode 0700: "
        f"{fix}, or choose another place with --socket or $XDG_RUNTIME_DIR"
    )


def _who(uid: int) -> str:
    name = user_name(uid)
    return f"uid {uid} ({name})" if name else f"uid {uid}"


def _clear_stale(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ListenError(f"{path} exists and is not a socket; remove it or choose another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        # Nobody listens: the file was left by a daemon that died.
        path.unlink(missing_ok=True)
        return
    except OSError as exc:
        raise ListenError(
            f"{path} exists and cannot be probed ({exc.strerror}); left alone"
        ) from None
    else:
        pid = peer_credentials(probe)[0]
        raise AnotherDaemon(pid or None, path, _state_dir_of(probe))
    finally:
        probe.close()


def _state_dir_of(probe: socket.socket) -> str | None:
    """The state directory the daemon at the other end serves (daemon.status), if it says."""
    try:
        probe.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n')
        reply = b""
        while not reply.endswith(b"\n") and len(reply) < 1 << 20:
            chunk = probe.recv(65536)
            if not chunk:
                return None
            reply += chunk
        state_dir = json.loads(reply)["result"]["state_dir"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # an older or a busy daemon: the pid still names it
    return state_dir if isinstance(state_dir, str) else None


def is_addr_in_use(exc: OSError) -> bool:
    """Whether a bind failed because the address is taken."""
    return exc.errno == errno.EADDRINUSE

"""The listening socket: bound to a path by us, or inherited from systemd.

A socket we bind lives in a directory we create 0700 and is itself 0600 (set
through the umask so that it is never, even briefly, more open). A socket file
left behind by a dead daemon is detected by connecting to it: an answer means
a live daemon (refused, naming its pid from SO_PEERCRED), a refusal means a
stale file (removed). An inherited socket belongs to systemd: never unlinked.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

import trio

from reynd.daemon import systemd

__all__ = [
    "AnotherDaemon",
    "BoundSocket",
    "ListenError",
    "open_socket",
    "peer_credentials",
    "peer_groups",
]

_UCRED = struct.Struct("3i")
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux >= 4.13
_GROUPS_BUFFER = 1024  # CPython's getsockopt takes no larger buffer: 256 groups
_NGROUPS_MAX = 65536


class ListenError(Exception):
    """The socket cannot be set up; the message says why and where."""


class AnotherDaemon(ListenError):
    """A live daemon answers on the socket path."""

    def __init__(self, pid: int | None, path: Path) -> None:
        holder = f"pid {pid}" if pid else "pid unknown"
        super().__init__(f"another daemon ({holder}) listens on {path}")
        self.pid = pid
        self.path = path


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


def peer_credentials(sock: socket.socket | trio.socket.SocketType) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket."""
    return _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))


def peer_groups(sock: socket.socket | trio.socket.SocketType) -> tuple[int, ...]:
    """Supplementary groups of the peer of a connected Unix socket; () where unsupported."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, _GROUPS_BUFFER)
    except OSError as exc:
        if exc.errno != errno.ERANGE:
            return ()
        try:
            raw = _getsockopt_large(sock.fileno(), _SO_PEERGROUPS, 4 * _NGROUPS_MAX)
        except OSError:
            return ()
    return struct.unpack(f"{len(raw) // 4}I", raw)


def _getsockopt_large(fd: int, option: int, size: int) -> bytes:
    """getsockopt(2) through libc, for answers larger than CPython allows."""
    libc = ctypes.CDLL(None, use_errno=True)
    length = ctypes.c_uint32(size)
    buf = ctypes.create_string_buffer(size)
    if libc.getsockopt(fd, socket.SOL_SOCKET, option, buf, ctypes.byref(length)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return buf.raw[: length.value]


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
        raise AnotherDaemon(pid or None, path)
    finally:
        probe.close()


def is_addr_in_use(exc: OSError) -> bool:
    """Whether a bind failed because the address is taken."""
    return exc.errno == errno.EADDRINUSE

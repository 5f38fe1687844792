"""Who is at the other end of a Unix socket (SO_PEERCRED), and uids by name.

Standard library only: the daemon checks its clients with it and reynctl
checks the daemon (reynctl may import nothing of reynd but the protocol).
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
import socket
import struct
from typing import NamedTuple, Protocol

__all__ = [
    "PeerCredentials",
    "SocketLike",
    "parse_uid",
    "peer_credentials",
    "peer_groups",
    "user_name",
]

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux >= 4.13
_GROUPS_BUFFER = 1024  # CPython's getsockopt takes no larger buffer: 256 groups
_NGROUPS_MAX = 65536


class SocketLike(Protocol):
    """socket.socket, a trio socket, asyncio's TransportSocket: anything with getsockopt."""

    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...

    def fileno(self) -> int: ...


class PeerCredentials(NamedTuple):
    """The peer process as the kernel recorded it at connect() (or listen(), for a server)."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: SocketLike) -> PeerCredentials:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return PeerCredentials(*_UCRED.unpack(raw))


def peer_groups(sock: SocketLike) -> tuple[int, ...]:
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


def user_name(uid: int) -> str | None:
    """The login name of `uid`, or None when it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def parse_uid(text: str) -> int:
    """A uid given as a number or a user name; ValueError naming it when neither."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise ValueError(f"{text!r} is neither a uid nor a known user name") from None

"""Who is at the other end of a Unix socket (SO_PEERCRED), and uids by name.

Standard library only: the daemon checks its clients with it and reynctl
checks the daemon (reynctl may import nothing of reynd but the protocol).
"""

from __future__ import annotations

import pwd
import socket
import struct
from typing import NamedTuple, Protocol

__all__ = ["PeerCredentials", "SocketLike", "parse_uid", "peer_credentials", "user_name"]

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class SocketLike(Protocol):
    """socket.socket, a trio socket, asyncio's TransportSocket: anything with getsockopt."""

    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


class PeerCredentials(NamedTuple):
    """The peer process as the kernel recorded it at connect() (or listen(), for a server)."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: SocketLike) -> PeerCredentials:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return PeerCredentials(*_UCRED.unpack(raw))


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

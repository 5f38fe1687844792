"""sd_notify and socket activation, without libsystemd.

Both protocols are tiny: a notification is one datagram to $NOTIFY_SOCKET, and
an activated socket is fd 3 announced by $LISTEN_PID/$LISTEN_FDS. Every
function is a no-op when systemd did not set the variables.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping

import trio

__all__ = [
    "LISTEN_FDS_START",
    "inherited_sockets",
    "notify",
    "notify_socket",
    "run_watchdog",
    "watchdog_interval",
]

LISTEN_FDS_START = 3


def notify_socket(env: MutableMapping[str, str] | None = None) -> str | None:
    """The service manager's notification socket ($NOTIFY_SOCKET), None if not under one."""
    env = os.environ if env is None else env
    address = env.get("NOTIFY_SOCKET")
    if not address or address[0] not in "/@":
        return None
    # A leading '@' names an abstract socket: the kernel wants a NUL byte there.
    return "\0" + address[1:] if address[0] == "@" else address


def notify(message: str, env: MutableMapping[str, str] | None = None) -> bool:
    """Send one sd_notify datagram ("READY=1\\nSTATUS=..."); False if not under systemd.

    Failures are swallowed: a lost notification must never take the daemon down.
    """
    target = notify_socket(env)
    if target is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)
            sock.sendto(message.encode(), target)
    except OSError:
        return False
    return True


def watchdog_interval(env: MutableMapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of $WATCHDOG_USEC), None when not requested."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None  # meant for another process
    return int(usec) / 2_000_000


async def run_watchdog(interval: float) -> None:
    """Ping the service manager's watchdog every `interval` seconds, forever."""
    while True:
        notify("WATCHDOG=1")
        await trio.sleep(interval)


def inherited_sockets(
    env: MutableMapping[str, str] | None = None,
) -> list[tuple[socket.socket, str]]:
    """Sockets passed by systemd (fd 3 onwards) with their names; [] when none.

    Only honoured when $LISTEN_PID is our pid (the variables leak to children
    otherwise); the three variables are removed so that children do not see them.
    """
    env = os.environ if env is None else env
    pid = env.pop("LISTEN_PID", "")
    count = env.pop("LISTEN_FDS", "")
    names = env.pop("LISTEN_FDNAMES", "")
    if pid != str(os.getpid()) or not count.isdigit():
        return []
    labels = names.split(":") if names else []
    found = []
    for i in range(int(count)):
        fd = LISTEN_FDS_START + i
        os.set_inheritable(fd, False)
        found.append((socket.socket(fileno=fd), labels[i] if i < len(labels) else "unknown"))
    return found

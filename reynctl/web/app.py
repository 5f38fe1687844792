"""`reynctl web`: bind, print the URL with its token, serve until stopped.

A frontend process like the TUI: it talks to the daemon only through the
client library (reynctl.aio), so any number of browsers, TUIs and scripts
attach to one state at once, and the daemon itself has no HTTP code.
Starlette for routing and responses, uvicorn to serve it: see docs/web.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import webbrowser
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from reynctl.web.link import Link
from reynctl.web.live import events_route
from reynctl.web.routes import routes
from reynctl.web.security import Guard, Policy, is_loopback

__all__ = ["build", "listen", "serve"]


def build(link: Link, policy: Policy) -> Guard:
    """The ASGI app: every route behind the Guard; the link closed at shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await link.aclose()

    app = Starlette(routes=[*routes(link, policy), events_route(link)], lifespan=lifespan)
    return Guard(app, policy)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port` (port 0: any free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: a response written in two parts (head, body) is
    # sent at once, not held back until the browser's delayed ACK (40 ms a request
    # on a kept-alive connection).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    return sock


def serve(
    socket_path: Path,
    *,
    host: str,
    port: int,
    open_browser: bool,
    timeout: float | None,
    daemon_uid: int | None,
) -> None:
    """Serve until stopped (SIGINT/SIGTERM); the URL is stdout's first line."""
    sock = listen(host, port)
    policy = Policy.for_bind(host, sock.getsockname()[1])
    url = policy.url(host)
    if not is_loopback(host):
        print(
            f"warning: serving on {host}, reachable from other machines: anyone with the URL "
            "(its token) can rewind this daemon, and the connection is not encrypted",
            file=sys.stderr,
        )
    print(url, flush=True)
    link = Link(socket_path, timeout=timeout, daemon_uid=daemon_uid)
    config = uvicorn.Config(
        build(link, policy),
        log_level="warning",
        # Open live streams would hold a shutdown forever: they are cut after this.
        timeout_graceful_shutdown=1,
        lifespan="on",
    )
    if open_browser:
        webbrowser.open(url)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))

"""The web server's one connection to the daemon, opened again whenever it is lost.

Every request of every browser shares it (the daemon answers overlapping
calls in any order); each live stream opens its own (`open`), so that a page
that goes away takes its subscription with it. It does not reconnect by
itself: a live stream must say "daemon lost" at once, and `get` dials a fresh
connection on the next use.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from reynctl.aio import AsyncClient, open_client

__all__ = ["CLIENT_NAME", "Link"]

CLIENT_NAME = "reynctl-web"  # what reset records made from a browser say moved the tip


class Link:
    """`await link.get()`: the open client, dialled again when the last one broke."""

    def __init__(self, socket: Path, *, timeout: float | None, daemon_uid: int | None) -> None:
        self.socket = socket
        self.timeout = timeout
        self.daemon_uid = daemon_uid
        self._client: AsyncClient | None = None
        self._lock = anyio.Lock()

    async def get(self) -> AsyncClient:
        """The current client; raises the client's DaemonUnreachable when none can be opened."""
        async with self._lock:
            if self._client is None or self._client.closed is not None:
                if self._client is not None:
                    await self._client.aclose()
                self._client = await self.open()
            return self._client

    async def open(self) -> AsyncClient:
        """A connection of its own (a live stream's: its reads never wait for another's)."""
        return await open_client(
            self.socket,
            timeout=self.timeout,
            daemon_uid=self.daemon_uid,
            reconnect=False,
            name=CLIENT_NAME,
        )

    async def aclose(self) -> None:
        """Close the connection (at server shutdown)."""
        if self._client is not None:
            await self._client.aclose()

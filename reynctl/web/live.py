"""`GET /api/events`: the daemon's notifications as Server-Sent Events.

Each open page gets a connection and a subscription of its own, both closed
the moment the browser goes away (the stream waits for `http.disconnect`
beside the notifications: a stream that only noticed it when writing would
keep its subscription until the next notification, or forever). Events:
`hello` (connected, with the head: re-read everything), `notify` (topic,
seq, data), `resync` (a gap: re-read) and `lost` (the daemon went away; the
stream dials again with backoff and says `hello` once it is back).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
from starlette.routing import Route

from reynctl.aio import Resync
from reynctl.errors import ClientError
from reynctl.web.link import Link
from reynctl.web.security import Receive, Scope, Send
from reynd.protocol.errors import ReyndError

__all__ = ["BACKOFF", "Events", "event", "events_route"]

BACKOFF = (0.2, 2.0)  # first and longest wait between tries to reach a lost daemon
HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
]


Emit = Callable[[str, Any], Awaitable[None]]


def event(name: str, data: Any) -> bytes:
    """One SSE event (`data` as JSON on one line)."""
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


class Events:
    """The ASGI app of the live stream."""

    def __init__(self, link: Link) -> None:
        self.link = link

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump, send)
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

    async def _pump(self, send: Send) -> None:
        async def emit(name: str, data: Any) -> None:
            body = event(name, data)
            await send({"type": "http.response.body", "body": body, "more_body": True})

        delay, longest = BACKOFF
        with contextlib.suppress(OSError):  # the browser went away mid-write
            while True:
                try:
                    await self._follow(emit)
                except (ClientError, ReyndError) as exc:
                    await emit("lost", {"message": str(exc), "retry_s": delay})
                await anyio.sleep(delay)
                delay = min(delay * 2, longest)

    async def _follow(self, emit: Emit) -> None:
        client = await self.link.open()
        try:
            async with await client.subscribe() as sub:
                await emit("hello", {"head": sub.head})
                async for item in sub:
                    if isinstance(item, Resync):
                        await emit("resync", {"head": item.head, "reason": item.reason})
                    else:
                        note = {"topic": item.topic, "seq": item.seq, "data": item.data}
                        await emit("notify", note)
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()


def events_route(link: Link) -> Route:
    """The route of the live stream."""
    return Route("/api/events", Events(link))

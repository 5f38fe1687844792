"""`GET /api/events`: the daemon's notifications as Server-Sent Events.

One subscription per open page, on the shared connection. Events: `hello`
(connected, with the head: re-read everything), `notify` (topic, seq,
data), `resync` (a gap: re-read) and `lost` (the daemon went away; this
stream dials again with backoff and says `hello` once it is back).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from reynctl.aio import Resync
from reynctl.errors import ClientError
from reynctl.web.link import Link
from reynd.protocol.errors import ReyndError

__all__ = ["BACKOFF", "event", "events_route"]

BACKOFF = (0.2, 2.0)  # first and longest wait between tries to reach a lost daemon


def event(name: str, data: Any) -> bytes:
    """One SSE event (`data` as JSON on one line)."""
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


async def _stream(link: Link) -> AsyncIterator[bytes]:
    delay, longest = BACKOFF
    while True:
        try:
            client = await link.get()
            async with await client.subscribe() as sub:
                delay = BACKOFF[0]
                yield event("hello", {"head": sub.head})
                async for item in sub:
                    if isinstance(item, Resync):
                        yield event("resync", {"head": item.head, "reason": item.reason})
                    else:
                        note = {"topic": item.topic, "seq": item.seq, "data": item.data}
                        yield event("notify", note)
        except (ClientError, ReyndError) as exc:
            yield event("lost", {"message": str(exc), "retry_s": delay})
        await anyio.sleep(delay)
        delay = min(delay * 2, longest)


def events_route(link: Link) -> Route:
    """The route of the live stream."""

    async def events(request: Request) -> Response:
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(_stream(link), media_type="text/event-stream", headers=headers)

    return Route("/api/events", events)

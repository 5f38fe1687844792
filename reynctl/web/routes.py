"""The HTTP endpoints: the page, its assets, daemon reads (GET) and actions (POST).

Each read or action is one daemon method through the client library, chosen
from a fixed list, with its params decoded by the method's own Struct: the
browser can do no more than `reynctl` itself, and a bad value gets the
method's validation message, never a daemon call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reynctl.aio import AsyncClient
from reynctl.errors import ClientError
from reynctl.helpers import Helper, Methods
from reynctl.web import timeline
from reynctl.web.link import Link
from reynctl.web.security import Policy
from reynd.protocol.errors import InvalidParams, ReyndError

__all__ = ["ACTIONS", "READS", "routes"]

_HELPERS: dict[str, Helper[Any, Any]] = {
    h.method: h for h in vars(Methods).values() if isinstance(h, Helper)
}
READS = frozenset(
    {
        "daemon.status",
        "state.get",
        "state.diff",
        "agents.list",
        "interventions.list",
        "tags.list",
        "reflog.list",
    }
)
ACTIONS = frozenset(
    {
        "rewind",
        "checkout",
        "undo",
        "act_turn.rewind",
        "tags.set",
        "agents.send",
        "agents.cancel",
        "interventions.answer",
    }
)
ASSETS = {"app.js": "text/javascript", "app.css": "text/css", "icon.svg": "image/svg+xml"}
JSON = "application/json"
FIRST_ROWS = 100  # the rows of the first paint (app.js's FIRST): more than a tall screen shows
FIRST_ROWS_WAIT = 0.5  # s: the longest the page waits for them
SECURITY_HEADERS = {
    # Nothing from another origin, ever: the page works offline.
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _asset(name: str) -> bytes:
    return resources.files("reynctl.web").joinpath("assets", name).read_bytes()


def _error(status: int, code: int, message: str, data: Any = None) -> Response:
    body = {"error": {"code": code, "message": message, "data": data}}
    return Response(msgspec.json.encode(body), status, media_type=JSON)


async def _answer(link: Link, ask: Callable[[AsyncClient], Awaitable[bytes]]) -> Response:
    """`ask` the daemon; its JSON answer, or its error (409), or 503 when it is unreachable."""
    try:
        body = await ask(await link.get())
    except ReyndError as exc:
        return _error(409, exc.code, exc.message, exc.data)
    except ClientError as exc:
        return _error(503, -1, f"the daemon is not reachable: {exc}")
    return Response(body, media_type=JSON)


async def _call(link: Link, method: str, raw: bytes) -> Response:
    """Decode `raw` as `method`'s params, call it, answer its result as the daemon sent it."""
    helper = _HELPERS[method]
    try:
        params = msgspec.json.decode(raw or b"{}", type=helper.params)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        return _error(400, InvalidParams.code, f"{method}: {exc}")

    async def ask(client: AsyncClient) -> bytes:
        return (await client.call(method, params, helper.result)).raw

    return await _answer(link, ask)


def routes(link: Link, policy: Policy) -> list[Route]:
    """The routes of one server: `link` to the daemon, `policy` for the page's CSRF value."""

    layout = timeline.Timeline()

    async def page(request: Request) -> Response:
        html = _asset("index.html").replace(b"{{csrf}}", policy.csrf.encode())
        # The rows of the first paint come with the page, when the layout is at hand. On a
        # daemon's error, or one that does not answer soon, the page asks (and says why).
        rows = None
        with anyio.move_on_after(FIRST_ROWS_WAIT), contextlib.suppress(ReyndError, ClientError):
            rows = await layout.shown_first(await link.get(), FIRST_ROWS)
        # In a data block: "<" escaped, so no label can close the script element.
        html = html.replace(b"{{first}}", (rows or b"").replace(b"<", b"\\u003c"))
        return Response(html, media_type="text/html", headers=SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return Response(b"no such asset\n", 404)
        return Response(_asset(name), media_type=ASSETS[name], headers=SECURITY_HEADERS)

    async def read(request: Request) -> Response:
        method = request.path_params["method"]
        if method not in READS:
            return _error(404, -32601, f"{method!r} is not a read this page offers")
        return await _call(link, method, request.query_params.get("p", "{}").encode())

    async def act(request: Request) -> Response:
        method = request.path_params["method"]
        if method not in ACTIONS:
            return _error(404, -32601, f"{method!r} is not an action this page offers")
        return await _call(link, method, await request.body())

    async def tree(request: Request) -> Response:
        first = request.query_params.get("first")
        if first is not None and not first.isdigit():
            return _error(400, InvalidParams.code, f"first: {first!r} is not a row count")
        since = request.query_params.get("since")
        if since is not None and not since.isdigit():
            return _error(400, InvalidParams.code, f"since: {since!r} is not a seq (a head)")

        async def ask(client: AsyncClient) -> bytes:
            return await layout.get(
                client,
                None if first is None else int(first),
                None if since is None else int(since),
            )

        return await _answer(link, ask)

    return [
        Route("/", page),
        Route("/assets/{name}", asset),
        Route("/api/timeline", tree),
        Route("/api/read/{method}", read),
        Route("/api/call/{method}", act, methods=["POST"]),
    ]

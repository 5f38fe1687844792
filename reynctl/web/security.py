"""Who may talk to `reynctl web`: the token, the Host header, same-origin writes.

Jupyter's model, tightened. Every request needs the token, as `?token=` (the
URL printed at start) or the cookie the first such request sets; else 403.
The Host header must name this server (a DNS-rebinding page reaches
127.0.0.1 under its own name, and is refused here). A request that changes
anything is a POST carrying the CSRF value only this origin's pages can read
(a meta tag of the page), and its Origin and Sec-Fetch-Site, when the browser
sends them, must say the same origin. `check` is pure; `Guard` applies it to
every HTTP request as ASGI middleware.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

__all__ = ["CSRF_HEADER", "Guard", "Policy", "Refusal", "check", "is_loopback"]

CSRF_HEADER = "x-reynd-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) only ever means this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Policy:
    """The server's secrets and the names it answers to (`hosts`: `name:port` each)."""

    port: int
    hosts: frozenset[str]
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @classmethod
    def for_bind(cls, host: str, port: int, token: str | None = None) -> Policy:
        """The policy of a server bound to `host:port` (loopback names always answer)."""
        names = {host, "localhost", "127.0.0.1", "[::1]"}
        if ":" in host and not host.startswith("["):
            names.add(f"[{host}]")
        hosts = frozenset(f"{n}:{port}" for n in names)
        return cls(port, hosts) if token is None else cls(port, hosts, token)

    @property
    def cookie(self) -> str:
        """The cookie's name: per port, so two servers on one host keep apart."""
        return f"reynd-web-{self.port}"

    @property
    def csrf(self) -> str:
        """The value a write must carry in CSRF_HEADER (derived: nothing more to keep)."""
        return hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()

    def url(self, host: str) -> str:
        """The URL to print and open: the token in it."""
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{shown}:{self.port}/?token={self.token}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: an HTTP status and a message saying what to do."""

    status: int
    message: str


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def check(
    policy: Policy,
    method: str,
    headers: dict[str, str],
    query_token: str | None,
    cookie_token: str | None,
) -> Refusal | None:
    """None when the request may go on, else why not. `headers`: lower-case names."""
    host = headers.get("host", "")
    if host not in policy.hosts:
        return Refusal(403, f"Host {host!r} is not this server's name: open the printed URL")
    given = query_token if query_token is not None else cookie_token
    if given is None or not _same(given, policy.token):
        return Refusal(403, "no valid token: open the URL `reynctl web` printed (with ?token=)")
    if method in SAFE_METHODS:
        return None
    if method != "POST":
        return Refusal(405, f"{method} is not accepted: changes are POSTs")
    origin = headers.get("origin")
    if origin is not None and f"http://{host}" != origin:
        return Refusal(403, f"a cross-origin write from {origin} is refused")
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return Refusal(403, "a cross-site write is refused (Sec-Fetch-Site)")
    if not _same(headers.get(CSRF_HEADER, ""), policy.csrf):
        return Refusal(403, f"a write needs the {CSRF_HEADER} header of this server's page")
    return None


class Guard:
    """ASGI middleware: `check` each HTTP request; set the cookie when the URL had the token."""

    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        query_token = query["token"][-1] if "token" in query else None
        jar: SimpleCookie = SimpleCookie()
        jar.load(headers.get("cookie", ""))
        morsel = jar.get(self.policy.cookie)
        refusal = check(
            self.policy,
            scope["method"],
            headers,
            query_token,
            morsel.value if morsel is not None else None,
        )
        if refusal is not None:
            await _refuse(send, refusal)
            return
        if query_token is None:
            await self.app(scope, receive, send)
            return

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = (
                    f"{self.policy.cookie}={self.policy.token}; Path=/; HttpOnly; SameSite=Strict"
                )
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
            await send(message)

        await self.app(scope, receive, with_cookie)


async def _refuse(send: Send, refusal: Refusal) -> None:
    body = refusal.message.encode() + b"\n"
    await send(
        {
            "type": "http.response.start",
            "status": refusal.status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

"""The async client: one connection to the daemon, under asyncio and trio alike.

Built on anyio (the library trio's and asyncio's users share: textual runs on
asyncio, the daemon and its tests on trio) over the sans-io `Session` of
`reynctl.jsonrpc`. It starts no background task: whichever call or
subscription is waiting reads the socket (one at a time, under a lock) and
files what arrives where it belongs, so a client can be opened and closed from
any coroutine, with no task group to own.

Reconnect (`reconnect=True`, the default of `connect`): when the connection
drops, the next use dials again (with backoff, for up to `reconnect_timeout`
seconds). A call that was in flight is sent again on the new connection only
when its method only reads (`daemon.status`, `state.get`, ...: those the
method table does not mark `mutating`); a write in flight raises
ConnectionClosed, since it may or may not have been applied. Each open
`Subscription` is renewed and then yields a `Resync`: notifications may have
been missed between the last one it yielded and `Resync.head`.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from reynctl.client import find_socket
from reynctl.errors import (
    ClientError,
    ConnectionClosed,
    DaemonTimeout,
    DaemonUnreachable,
    NoDaemon,
    ProtocolViolation,
    connect_failed,
)
from reynctl.helpers import AsyncMethods, Reply
from reynctl.jsonrpc import (
    RECONNECT_BACKOFF,
    RETRIED,
    ErrorResponse,
    Response,
    ServerMessage,
    Session,
    decode_result,
)
from reynctl.trust import check_daemon, daemon_uid_from_env
from reynd.protocol import methods as m
from reynd.protocol import moves
from reynd.protocol.errors import MethodNotFound, ReyndError, ShuttingDown

__all__ = ["AsyncClient", "Resync", "Subscription", "connect", "open_client"]

T = TypeVar("T")

_RECV = 1 << 16
_lagged = msgspec.json.Decoder(m.Lagged)
_notify = msgspec.json.Decoder(m.Notification)


@dataclass(frozen=True, slots=True)
class Resync:
    """A subscription was renewed: notifications up to `head` may be missing.

    `reason`: `reconnected` (the connection dropped and was dialled again) or
    `lagged` (the daemon dropped the subscription because it was read too
    slowly). Re-read what you keep (state.get, generations.list) as of `head`;
    notifications after `head` follow.
    """

    reason: Literal["reconnected", "lagged"]
    head: int


class Subscription:
    """Live notifications as an async iterator: `Notification`, or `Resync` after a gap.

    Create with `AsyncClient.subscribe`; `async with` (or `aclose`) ends it.
    Iteration ends (StopAsyncIteration) once it is closed; it raises
    ConnectionClosed when the connection drops and the client does not reconnect.
    """

    def __init__(self, client: AsyncClient, topics: list[m.Topic], result: m.SubscribeResult):
        self.topics = topics
        self.id = result.subscription
        self.head = result.head  # the daemon's head when it (last) subscribed
        self._client = client
        self._queue: deque[m.Notification | Resync | m.Lagged] = deque()
        self._closed = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> m.Notification | Resync:
        while True:
            if self._queue:
                item = self._queue.popleft()
                if not isinstance(item, m.Lagged):
                    return item
                await self._client._resubscribe(self)
                return Resync("lagged", self.head)
            if self._closed:
                raise StopAsyncIteration
            await self._client._wait(lambda: bool(self._queue) or self._closed, None, retry=True)

    async def aclose(self) -> None:
        """Unsubscribe (idempotent; nothing is sent when the connection is gone)."""
        if self._closed:
            return
        self._closed = True
        client = self._client
        client._subs.pop(self.id, None)
        if client._broken is None and client._closed is None:
            params = m.UnsubscribeParams(subscription=self.id)
            # Gone with the connection, or already dropped (lagged): nothing to undo.
            with contextlib.suppress(ClientError, ReyndError):
                await client.call("unsubscribe", params, m.OkResult)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncClient(AsyncMethods):
    """One connection to the daemon (asyncio or trio). Open with `connect` or `open_client`.

    Calls may overlap; the daemon answers them in any order. `timeout` bounds
    each call (seconds; None waits forever). Errors: the daemon's as their
    `ReyndError` class (`.code`, `.message`, `.data`), the rest as `ClientError`.
    The typed helpers (`await status()`, `await state(seq=...)`, ...) are the
    blocking client's, declared once in reynctl.helpers.
    """

    def __init__(
        self,
        path: Path,
        *,
        timeout: float | None = 30.0,
        daemon_uid: int | None = None,
        reconnect: bool = False,
        reconnect_timeout: float = 10.0,
        name: str | None = None,
    ) -> None:
        self.path = path
        self.name = name  # given with session.hello before each connection's first write
        self._named = 0  # the connection (generation) that was given it
        self._hello_lock = anyio.Lock()
        self.timeout = timeout
        self.daemon_uid = daemon_uid
        self.reconnect = reconnect
        self.reconnect_timeout = reconnect_timeout
        self.reconnects = 0  # how many times the connection was dialled again
        self._stream: anyio.abc.SocketStream | None = None
        self._session = Session()
        self._gen = 0  # which connection: answers of an older one never arrive
        self._broken: ClientError | None = None  # the current connection failed
        self._closed: ClientError | None = None  # closed for good
        self._waiting: set[int] = set()
        self._answers: dict[int, Response | ErrorResponse] = {}
        self._pushed: deque[ServerMessage] = deque()  # for notifications()
        self._subs: dict[str, Subscription] = {}
        self._read_lock = anyio.Lock()
        self._send_lock = anyio.Lock()
        self._dial_lock = anyio.Lock()

    @property
    def closed(self) -> ClientError | None:
        """Why the client cannot be used any more, or None while it can."""
        if self._closed is not None:
            return self._closed
        return None if self.reconnect else self._broken

    # -- lifecycle ---------------------------------------------------------------

    async def _dial(self) -> None:
        self._stream = await _open_stream(self.path, self.timeout, self.daemon_uid)
        self._session = Session()
        self._gen += 1
        self._broken = None
        self._waiting.clear()
        self._answers.clear()

    async def aclose(self) -> None:
        """Close the connection (idempotent); open subscriptions end."""
        if self._closed is None:
            self._closed = ConnectionClosed(self.path, "closed by this client")
        for sub in list(self._subs.values()):
            sub._closed = True
        self._subs.clear()
        if self._stream is not None:
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()

    close = aclose  # the name the TUI and earlier versions use

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- calls ---------------------------------------------------------------------

    async def call(self, method: str, params: Any, result_type: type[T]) -> Reply[T]:
        """Call `method`; raises the daemon's `ReyndError` or a `ClientError`.

        After a dropped connection, a method that only reads is sent again
        once the client reconnected (`reconnect`); any other raises
        ConnectionClosed: it may or may not have been applied.
        """
        retry = method in RETRIED
        while True:
            gen = await self._connected()
            try:
                await self._hello(gen, method)
                raw = await self._roundtrip(gen, method, params)
            except (ConnectionClosed, ShuttingDown) as exc:
                if isinstance(exc, ShuttingDown):  # stopping: for a read, as a drop
                    self._break(ConnectionClosed(self.path, "the daemon is stopping"), gen)
                if retry and self.reconnect and self._closed is None:
                    continue
                raise
            return Reply(method, raw, decode_result(raw, result_type))

    async def _hello(self, gen: int, method: str) -> None:
        """Say our name once per connection, before its first call that writes (see Client)."""
        known = m.METHODS.get(method)
        if self.name is None or self._named == gen or known is None or not known.mutating:
            return
        async with self._hello_lock:  # calls overlap: the others wait for the name
            if self._named != gen:
                with contextlib.suppress(MethodNotFound):
                    hello = moves.SessionHelloParams(client=self.name)
                    await self._roundtrip(gen, "session.hello", hello)
                self._named = gen

    async def _roundtrip(self, gen: int, method: str, params: Any) -> bytes:
        rid, data = self._session.request(method, params)
        self._waiting.add(rid)
        try:
            with anyio.fail_after(self.timeout):
                await self._send(gen, data)
                await self._wait(lambda: rid in self._answers, gen)
        except TimeoutError:
            raise DaemonTimeout(self.path, method, self.timeout or 0) from None
        finally:
            self._waiting.discard(rid)
        answer = self._answers.pop(rid)
        if isinstance(answer, ErrorResponse):
            raise answer.error
        return answer.raw

    async def _send(self, gen: int, data: bytes) -> None:
        async with self._send_lock:
            stream = self._stream
            if gen != self._gen or self._broken is not None or stream is None:
                raise self._broken or ConnectionClosed(self.path)
            await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled already: nothing sent
            try:
                await stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise self._break(ConnectionClosed(self.path, "while sending"), gen) from None
            except anyio.get_cancelled_exc_class():
                # Part of the message may be on the wire: every later message of this
                # connection would be misframed (and the daemon's error for the garbage,
                # unattributable, would reach every call waiting). The daemon drops a
                # line cut by the end of the stream; the next use dials again.
                self._break(ConnectionClosed(self.path, "a send was cancelled midway"), gen)
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                raise

    async def _connected(self) -> int:
        """The current connection's generation, dialling again when it broke (`reconnect`)."""
        if self._closed is not None:
            raise self._closed
        if self._broken is None and self._stream is not None:
            return self._gen
        if not self.reconnect:
            raise self._broken or ConnectionClosed(self.path)
        async with self._dial_lock:
            if self._broken is not None or self._stream is None:
                await self._redial()
        return self._gen

    async def _redial(self) -> None:
        """Dial until connected and every subscription is renewed, within reconnect_timeout."""
        delay, longest = RECONNECT_BACKOFF
        with anyio.move_on_after(self.reconnect_timeout) as scope:
            while True:
                if self._stream is not None:
                    with anyio.CancelScope(shield=True):
                        await self._stream.aclose()
                    self._stream = None
                try:
                    await self._dial()
                    for sub in list(self._subs.values()):
                        await self._resubscribe(sub, reason="reconnected")
                except (DaemonUnreachable, ConnectionClosed, DaemonTimeout, ShuttingDown):
                    await anyio.sleep(delay)
                    delay = min(delay * 2, longest)
                    continue
                self.reconnects += 1
                return
        if scope.cancelled_caught:
            error = self._broken or NoDaemon(self.path)
            self._closed = ConnectionClosed(
                self.path, f"no daemon came back within {self.reconnect_timeout:g}s ({error})"
            )
            raise self._closed

    async def _wait(
        self, ready: Callable[[], bool], gen: int | None, *, retry: bool = False
    ) -> None:
        """Read the socket (one reader at a time) until `ready()`.

        `gen`: the connection waited on; fail once it is gone. `retry`: a
        subscriber's wait, which rides over a reconnect instead (when
        reconnecting) and waits on whichever connection is current.
        """
        while not ready():
            if retry:
                gen = await self._connected()
            async with self._read_lock:
                if ready():
                    return
                if self._broken is not None or gen != self._gen:
                    if retry and self.reconnect:
                        continue
                    raise self._broken or ConnectionClosed(self.path)
                await self._receive_once(self._gen)

    async def _receive_once(self, gen: int) -> None:
        # What a reader of an older connection gets (it was replaced under
        # it) must neither break the new one nor reach its session.
        stream, session = self._stream, self._session
        assert stream is not None
        try:
            data = await stream.receive(_RECV)
        except anyio.EndOfStream:
            detail = "in the middle of a message" if session.partial else ""
            raise self._break(ConnectionClosed(self.path, detail), gen) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise self._break(ConnectionClosed(self.path, "reset"), gen) from None
        if gen != self._gen:
            raise ConnectionClosed(self.path, "replaced by a new connection")
        try:
            for event in session.receive(data):
                self._dispatch(event)
        except ClientError as exc:  # a protocol violation: nothing further can be trusted
            raise self._break(exc, gen) from None

    def _dispatch(self, event: Response | ErrorResponse | ServerMessage) -> None:
        if isinstance(event, ServerMessage):
            self._route(event)
        elif event.id is None:  # an error the daemon could not attribute: every call gets it
            for rid in self._waiting:
                self._answers[rid] = event
        elif event.id in self._waiting:  # else a call that timed out or was cancelled
            self._answers[event.id] = event

    def _route(self, msg: ServerMessage) -> None:
        """A notification to its Subscription, or to `notifications()` when none claims it."""
        try:
            item: m.Notification | m.Lagged | None = None
            if msg.method == "notify":
                item = _notify.decode(msg.params)
            elif msg.method == "lagged":
                item = _lagged.decode(msg.params)
        except msgspec.ValidationError as exc:
            raise ProtocolViolation(f"a {msg.method} message: {exc}") from None
        sub = self._subs.get(item.subscription) if item is not None else None
        if sub is None or item is None:
            self._pushed.append(msg)
        else:
            sub._queue.append(item)

    def _break(self, exc: ClientError, gen: int) -> ClientError:
        """Mark connection `gen` failed (if it is the current one); the error to raise."""
        if gen != self._gen:
            return exc
        if self._broken is None:
            self._broken = exc
        return self._broken

    # -- subscriptions --------------------------------------------------------------

    async def newest_generations(self, most: int) -> tuple[list[m.Generation], bool]:
        """The newest (about) `most` checkpoints of every branch, newest first, in pages of
        1,000; and whether older ones were left out."""
        gens: list[m.Generation] = []
        cursor: int | None = None
        while len(gens) < most:
            page = await self.generations(all_branches=True, limit=1000, cursor=cursor)
            gens += page.generations
            cursor = page.next_cursor
            if cursor is None:
                break
        return gens, cursor is not None

    async def subscribe(self, topics: Sequence[m.Topic] | None = None) -> Subscription:
        """Subscribe to `topics` (default: all); iterate the result for notifications."""
        params = m.SubscribeParams() if topics is None else m.SubscribeParams(topics=list(topics))
        result = await self.call("subscribe", params, m.SubscribeResult)
        sub = Subscription(self, params.topics, result.value)
        self._subs[sub.id] = sub
        return sub

    async def _resubscribe(
        self, sub: Subscription, reason: Literal["reconnected", "lagged"] = "lagged"
    ) -> None:
        params = m.SubscribeParams(topics=sub.topics)
        result = await self._roundtrip(self._gen, "subscribe", params)
        renewed = decode_result(result, m.SubscribeResult)
        self._subs.pop(sub.id, None)
        sub.id, sub.head = renewed.subscription, renewed.head
        self._subs[sub.id] = sub
        if reason == "reconnected":
            sub._queue.append(Resync("reconnected", renewed.head))

    async def notifications(self) -> AsyncIterator[ServerMessage]:
        """Raw messages the daemon pushes that no Subscription claims, in order.

        For a subscription made with `call("subscribe", ...)`. Raises
        ConnectionClosed when the connection ends (no reconnect here).
        """
        gen = self._gen  # a reconnect would lose the subscription: this one ends with it
        while True:
            while self._pushed:
                yield self._pushed.popleft()
            await self._wait(lambda: bool(self._pushed), gen)


async def _open_stream(
    path: Path,
    timeout: float | None,  # noqa: ASYNC109 (the client's, also reported in DaemonTimeout)
    daemon_uid: int | None,
) -> anyio.abc.SocketStream:
    """Connect and check the peer; a `DaemonUnreachable` subclass names the cause."""
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_unix(os.fspath(path))
    except OSError as exc:  # TimeoutError included
        raise connect_failed(path, exc, timeout) from None
    try:
        check_daemon(stream.extra(anyio.abc.SocketAttribute.raw_socket), path, daemon_uid)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return stream


async def open_client(
    path: str | os.PathLike[str] | None = None,
    *,
    timeout: float | None = 30.0,  # noqa: ASYNC109
    daemon_uid: int | None = None,
    reconnect: bool = False,
    reconnect_timeout: float = 10.0,
    name: str | None = None,
) -> AsyncClient:
    """Connect to the daemon at `path` (default: found as reynctl finds it); close it yourself.

    The daemon must run as our uid, root, or `daemon_uid` (default
    $REYN_DAEMON_UID; else UntrustedDaemon, before anything is sent).
    """
    if daemon_uid is None:
        daemon_uid = daemon_uid_from_env()
    client = AsyncClient(
        find_socket(path),
        timeout=timeout,
        daemon_uid=daemon_uid,
        reconnect=reconnect,
        reconnect_timeout=reconnect_timeout,
        name=name,
    )
    await client._dial()
    return client


@asynccontextmanager
async def connect(
    path: str | os.PathLike[str] | None = None,
    *,
    timeout: float | None = 30.0,  # noqa: ASYNC109
    daemon_uid: int | None = None,
    reconnect: bool = True,
    reconnect_timeout: float = 10.0,
    name: str | None = None,
) -> AsyncIterator[AsyncClient]:
    """`async with connect() as client:` an AsyncClient that reconnects, closed on exit."""
    client = await open_client(
        path,
        timeout=timeout,
        daemon_uid=daemon_uid,
        reconnect=reconnect,
        reconnect_timeout=reconnect_timeout,
        name=name,
    )
    try:
        yield client
    finally:
        await client.aclose()

"""A small blocking JSON-RPC client for the daemon's Unix socket.

One call at a time per connection: `call` sends a request and reads until its
answer arrives; notifications that arrive meanwhile are queued for
`notifications()`. The protocol itself (framing, ids, error mapping) lives in
`reynctl.jsonrpc` so that other frontends can reuse it with their own I/O.

With `reconnect=True`, a call made after the connection dropped dials again
first (with backoff, up to `reconnect_timeout` seconds), and a call the drop
interrupted is sent again when its method only reads (jsonrpc.RETRIED); a
write it interrupted raises ConnectionClosed (it may or may not have been
applied). A write whose line could not be sent at all (the daemon had closed
the connection, e.g. after `idle_timeout_s`) never ran: it is sent again.
`notifications()` never reconnects: subscribe again.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import tomllib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import msgspec

from reynctl.errors import (
    ClientError,
    ConnectionClosed,
    DaemonTimeout,
    DaemonUnreachable,
    ProtocolMismatch,
    ProtocolViolation,
    connect_failed,
)
from reynctl.helpers import Reply, SyncMethods
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
from reynd.protocol.errors import InvalidParams, MethodNotFound, ShuttingDown
from reynd.protocol.paths import SOCKET_ENV, SYSTEM_SOCKET, find_state_dir, resolve_socket

__all__ = ["Client", "Reply", "config_socket", "connect", "find_socket"]

T = TypeVar("T")

_RECV = 1 << 16
# Shared with the daemon's config lookup (reynd/daemon/config.py), which reynctl may not import.
CONFIG_ENV = "REYN_CONFIG"
CONFIG_NAME = "reynd.toml"


def config_socket(env: Mapping[str, str], state_dir: Path | None = None) -> Path | None:
    """The `socket` key of the daemon's reynd.toml, found as the daemon finds it.

    $REYN_CONFIG, else `<state dir>/reynd.toml`. An unreadable or invalid file
    is the daemon's to report: it is skipped here.
    """
    if env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV])
    elif state_dir is not None:
        path = state_dir / CONFIG_NAME
    else:
        return None
    try:
        with path.open("rb") as f:
            value = tomllib.load(f).get("socket")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return Path(value) if isinstance(value, str) and value else None


def find_socket(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
) -> Path:
    """Where to reach the daemon: as `reynd serve` run here would listen.

    --socket, $REYN_SOCKET, `socket` in reynd.toml, the socket of the state dir
    (`$REYN_STATE_DIR`, else the nearest `.reyn/` from `cwd` up); outside any
    project the per-user socket, or the system one when only it exists.
    """
    env = os.environ if env is None else env
    state = find_state_dir(env, cwd)
    configured = config_socket(env, state)
    found = resolve_socket(explicit, env, configured=configured, state_dir=state)
    outside = state is None and not (explicit or env.get(SOCKET_ENV) or configured)
    if outside and not found.exists() and SYSTEM_SOCKET.exists():
        return SYSTEM_SOCKET
    return found


class _ProtocolOnly(msgspec.Struct):
    # Decoded leniently from daemon.status, whatever else its result holds.
    protocol: int = 1
    version: str = "?"


class Client(SyncMethods):
    """A connection to the daemon. Use as a context manager, or call `close()`.

    `timeout` bounds each call (seconds; None waits forever). The daemon must
    run as our uid, root, or `daemon_uid` (else UntrustedDaemon, before
    anything is sent: see reynctl.trust). The typed helpers (`status()`,
    `state(seq=...)`, ...) are declared once for both clients in
    reynctl.helpers; `call` reaches any method by name.
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
        self.name = name  # given with session.hello before the connection's first write
        self._named = False
        self.timeout = timeout
        self.daemon_uid = daemon_uid
        self.reconnect = reconnect
        self.reconnect_timeout = reconnect_timeout
        self.reconnects = 0  # how many times the connection was dialled again
        self._session = Session()
        self._queued: deque[ServerMessage] = deque()
        self._sock = self._connect()
        self._broken: ConnectionClosed | None = None
        self._protocol_checked = False

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(os.fspath(self.path))
        except OSError as exc:
            sock.close()
            raise connect_failed(self.path, exc, self.timeout) from None
        try:
            check_daemon(sock, self.path, self.daemon_uid)
        except BaseException:
            sock.close()
            raise
        return sock

    # -- lifecycle --------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- calls ------------------------------------------------------------

    def call(
        self,
        method: str,
        params: Any,
        result_type: type[T],
        *,
        on_notify: Callable[[ServerMessage], None] | None = None,
    ) -> Reply[T]:
        """Call `method` and wait for its answer.

        What the daemon pushes meanwhile is queued for `notifications()`, or
        handed to `on_notify` as it arrives (to show progress during a long call).

        Raises the daemon's error as its `ReyndError` class, or a `ClientError`
        when the daemon cannot be reached or understood. The protocol version
        is checked only when an answer suggests a mismatch (an unknown method,
        refused params, a result of the wrong shape): no extra round trip when
        all is well.
        """
        unsent = 0  # sends refused by a hung-up daemon, this call
        while True:
            if self._broken is not None:
                if not self.reconnect:
                    raise self._broken
                self._redial()
            try:
                self._hello(method)
                raw = self._roundtrip(method, params, on_notify)
                return Reply(method, raw, decode_result(raw, result_type))
            except (ConnectionClosed, ShuttingDown) as exc:
                # A daemon stopping refuses what it is sent: for a read, as a drop.
                self._broken = _dropped(self.path, exc)
                # A line whose send failed never ended (its newline is its last byte):
                # the daemon ran none of it (an idle connection it closed), so any
                # method goes again on the new connection.
                again = isinstance(exc, _Unsent) and unsent < _UNSENT_RETRIES
                unsent += again
                if self.reconnect and (method in RETRIED or again):
                    continue
                raise
            except (MethodNotFound, InvalidParams, ProtocolViolation):
                if method in m.METHODS and not self._protocol_checked:
                    self.check_protocol()
                raise

    def _redial(self) -> None:
        """Connect again (a fresh session), retrying until reconnect_timeout."""
        deadline = time.monotonic() + self.reconnect_timeout
        delay, longest = RECONNECT_BACKOFF
        self._sock.close()
        while True:
            try:
                self._sock = self._connect()
            except DaemonUnreachable as exc:
                if time.monotonic() + delay > deadline:
                    raise ConnectionClosed(
                        self.path,
                        f"no daemon came back within {self.reconnect_timeout:g}s ({exc.message})",
                    ) from None
                time.sleep(delay)  # backoff between dials, not a synchronisation
                delay = min(delay * 2, longest)
                continue
            break
        self._session = Session()
        self._queued.clear()
        self._broken = None
        self._named = False
        self.reconnects += 1

    def _hello(self, method: str) -> None:
        """Say our name once per connection, before the first call that writes.

        Reset records keep it as who moved the tip; reads do without the
        round trip. A daemon older than `session.hello` is left unnamed.
        """
        known = m.METHODS.get(method)
        if self.name is None or self._named or known is None or not known.mutating:
            return
        self._named = True
        with contextlib.suppress(MethodNotFound):
            self._roundtrip("session.hello", moves.SessionHelloParams(client=self.name))

    def check_protocol(self) -> m.StatusResult | None:
        """Raise ProtocolMismatch unless the daemon speaks our protocol version.

        Returns the status when it also decodes as ours (None otherwise).
        """
        raw = self._roundtrip("daemon.status", m.StatusParams())
        try:
            theirs = msgspec.json.decode(raw, type=_ProtocolOnly)
        except msgspec.ValidationError as exc:
            raise ProtocolViolation(f"daemon.status: {exc}") from None
        if theirs.protocol != m.PROTOCOL_VERSION:
            raise ProtocolMismatch(m.PROTOCOL_VERSION, theirs.protocol, theirs.version)
        self._protocol_checked = True
        try:
            return msgspec.json.decode(raw, type=m.StatusResult)
        except msgspec.ValidationError:
            return None

    def _roundtrip(
        self,
        method: str,
        params: Any,
        on_notify: Callable[[ServerMessage], None] | None = None,
    ) -> bytes:
        rid, data = self._session.request(method, params)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # A daemon that refuses us (peer check, connection cap) writes its
            # reason and hangs up, maybe before we wrote: read the reason first.
            self._raise_parting_error()
            raise _Unsent(self.path) from None
        except TimeoutError:
            raise DaemonTimeout(self.path, method, self.timeout or 0) from None
        answer: Response | ErrorResponse | None = None
        while answer is None:
            # Keep every notification of a read, even those after our answer.
            for event in self._read(deadline, method):
                if isinstance(event, ServerMessage):
                    if on_notify is None:
                        self._queued.append(event)
                    else:
                        on_notify(event)
                elif event.id == rid or (isinstance(event, ErrorResponse) and event.id is None):
                    answer = event
                else:
                    raise ProtocolViolation(f"an answer to id {event.id}, expected {rid}")
        if isinstance(answer, ErrorResponse):
            raise answer.error
        return answer.raw

    def _raise_parting_error(self) -> None:
        try:
            events = self._read(time.monotonic() + 1.0, "the daemon's reason")
        except ClientError:
            return
        for event in events:
            if isinstance(event, ErrorResponse):
                raise event.error

    def _read(
        self, deadline: float | None, what: str
    ) -> list[Response | ErrorResponse | ServerMessage]:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DaemonTimeout(self.path, what, self.timeout or 0)
            self._sock.settimeout(remaining)
        else:
            self._sock.settimeout(None)
        try:
            data = self._sock.recv(_RECV)
        except TimeoutError:
            raise DaemonTimeout(self.path, what, self.timeout or 0) from None
        except ConnectionResetError:
            raise ConnectionClosed(self.path, "reset") from None
        if not data:
            detail = "in the middle of a message" if self._session.partial else ""
            raise ConnectionClosed(self.path, detail)
        return self._session.receive(data)

    def notifications(self, timeout: float | None = None) -> Iterator[ServerMessage]:
        """Messages the daemon pushes (`notify`, `lagged`), in order, forever.

        Blocks between messages (`timeout` bounds each wait; None: forever).
        Ends with ConnectionClosed when the daemon hangs up.
        """
        while True:
            while self._queued:
                yield self._queued.popleft()
            deadline = None if timeout is None else time.monotonic() + timeout
            for event in self._read(deadline, "a notification"):
                if not isinstance(event, ServerMessage):
                    raise ProtocolViolation(f"an answer to id {event.id} nobody waits for")
                self._queued.append(event)

    # -- subscriptions (the helpers of the other methods: reynctl.helpers) ----------------

    def subscribe(self, topics: list[m.Topic] | None = None) -> m.SubscribeResult:
        """subscribe (default: every topic); then read `notifications()`."""
        params = m.SubscribeParams() if topics is None else m.SubscribeParams(topics=topics)
        return self.call("subscribe", params, m.SubscribeResult).value

    def unsubscribe(self, subscription: str) -> m.OkResult:
        """unsubscribe."""
        params = m.UnsubscribeParams(subscription=subscription)
        return self.call("unsubscribe", params, m.OkResult).value


_UNSENT_RETRIES = 3  # a daemon that hangs up on every new connection is not waited on forever


class _Unsent(ConnectionClosed):
    """The daemon had hung up before the request's line was sent whole: nothing ran."""


def _dropped(path: Path, exc: ConnectionClosed | ShuttingDown) -> ConnectionClosed:
    if isinstance(exc, ConnectionClosed):
        return exc
    return ConnectionClosed(path, "the daemon is stopping")


def connect(
    socket_path: str | os.PathLike[str] | None = None,
    *,
    timeout: float | None = 30.0,
    daemon_uid: int | None = None,
    reconnect: bool = False,
    reconnect_timeout: float = 10.0,
    name: str | None = None,
) -> Client:
    """Connect to the daemon found by `find_socket`; `daemon_uid` defaults to $REYN_DAEMON_UID."""
    if daemon_uid is None:
        daemon_uid = daemon_uid_from_env()
    return Client(
        find_socket(socket_path),
        timeout=timeout,
        daemon_uid=daemon_uid,
        reconnect=reconnect,
        reconnect_timeout=reconnect_timeout,
        name=name,
    )

"""JSON-RPC 2.0 for the client, without I/O (sans-io).

`Session` turns calls into newline-terminated request bytes and turns bytes
received from the daemon into events: a `Response`, an `ErrorResponse` or a
`ServerMessage` (a notification the daemon pushes, such as `notify`). It never
touches a socket, so the blocking client here and a later asyncio frontend
share the same framing, id matching and error mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeVar

import msgspec

from reynctl.errors import ProtocolViolation
from reynd.protocol.errors import ReyndError
from reynd.protocol.methods import METHODS, Notification

__all__ = [
    "RETRIED",
    "ErrorResponse",
    "Event",
    "Response",
    "ServerMessage",
    "Session",
    "decode_notification",
    "decode_result",
]

T = TypeVar("T")

# A state.get of a long history can be large; this only bounds a runaway line.
DEFAULT_MAX_LINE = 256 * 1024 * 1024

RETRIED: Final = frozenset(
    name for name, d in METHODS.items() if not d.mutating and name != "subscribe"
)
"""Methods a reconnecting client sends again when the connection dropped under them.

They change nothing (the method table does not mark them `mutating`), so a
second delivery is harmless. `subscribe` is renewed by its Subscription instead.
"""
RECONNECT_BACKOFF = (0.05, 1.0)  # first and longest pause between two dials, seconds


class _Request(msgspec.Struct, omit_defaults=True, kw_only=True):
    jsonrpc: str  # no default: omit_defaults would drop it
    method: str
    params: Any = None  # omitted when None, as the spec allows
    id: int | None = None  # omitted for notifications


class _Incoming(msgspec.Struct):
    """Any message the daemon may send; which fields are set tells what it is."""

    jsonrpc: str | msgspec.UnsetType = msgspec.UNSET
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: msgspec.Raw = msgspec.Raw(b"null")
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


@dataclass(frozen=True, slots=True)
class Response:
    """A successful answer. `raw` is the result exactly as the daemon sent it."""

    id: int
    method: str
    raw: bytes


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """An error answer, rebuilt into its `ReyndError` class.

    `id` is None when the daemon could not read our id (a parse error); the
    session then attributes it to the only pending call, if there is one.
    """

    id: int | None
    method: str | None
    error: ReyndError


@dataclass(frozen=True, slots=True)
class ServerMessage:
    """A notification from the daemon (`notify`, `lagged`); `params` is raw JSON."""

    method: str
    params: bytes


Event = Response | ErrorResponse | ServerMessage

_encoder = msgspec.json.Encoder()
_incoming = msgspec.json.Decoder(_Incoming)
_notification = msgspec.json.Decoder(Notification)


class Session:
    """Framing and id matching for one connection."""

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._next_id = 1
        self._pending: dict[int, str] = {}  # id -> method
        self._buffer = bytearray()
        self._searched = 0  # the buffer's bytes known to hold no newline
        self._max_line = max_line

    @property
    def pending(self) -> dict[int, str]:
        """Calls sent and not yet answered, id to method."""
        return dict(self._pending)

    def request(self, method: str, params: Any = None) -> tuple[int, bytes]:
        """Bytes of a request for `method`; the returned id matches its response."""
        rid = self._next_id
        self._next_id += 1
        self._pending[rid] = method
        body = _encoder.encode(_Request(jsonrpc="2.0", method=method, params=params, id=rid))
        return rid, body + b"\n"

    def notify(self, method: str, params: Any = None) -> bytes:
        """Bytes of a client notification (no id, no answer)."""
        return _encoder.encode(_Request(jsonrpc="2.0", method=method, params=params)) + b"\n"

    def receive(self, data: bytes) -> list[Event]:
        """Feed bytes read from the socket; returns the complete messages in them."""
        self._buffer += data
        events: list[Event] = []
        while (end := self._buffer.find(b"\n", self._searched)) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            # From the start again: if the line does not parse, the lines after it stay.
            self._searched = 0
            if line.strip():
                events.append(self._parse(line))
        # Searched up to here: a message of many reads is not searched again each time.
        self._searched = len(self._buffer)
        if len(self._buffer) > self._max_line:
            raise ProtocolViolation(f"a message longer than {self._max_line} bytes")
        return events

    @property
    def partial(self) -> bool:
        """True when part of a message was received but not its end."""
        return bool(self._buffer.strip())

    def _parse(self, line: bytes) -> Event:
        try:
            msg = _incoming.decode(line)
        except msgspec.DecodeError as exc:
            raise ProtocolViolation(f"not a JSON-RPC message ({exc}): {line[:200]!r}") from None
        if msg.jsonrpc != "2.0":
            raise ProtocolViolation(f"missing or wrong jsonrpc version: {line[:200]!r}")
        if not isinstance(msg.method, msgspec.UnsetType):
            if not isinstance(msg.id, msgspec.UnsetType):
                raise ProtocolViolation(f"the daemon sent a request ({msg.method})")
            return ServerMessage(method=msg.method, params=bytes(msg.params))
        if isinstance(msg.id, msgspec.UnsetType):
            raise ProtocolViolation(f"a response without an id: {line[:200]!r}")
        if not isinstance(msg.error, msgspec.UnsetType):
            rid = self._match_error_id(msg.id)
            method = self._pending.pop(rid, None) if rid is not None else None
            return ErrorResponse(id=rid, method=method, error=ReyndError.from_wire(msg.error))
        if isinstance(msg.result, msgspec.UnsetType):
            raise ProtocolViolation(f"a response with neither result nor error: {line[:200]!r}")
        if not isinstance(msg.id, int) or msg.id not in self._pending:
            raise ProtocolViolation(f"a response to an unknown id {msg.id!r}")
        return Response(id=msg.id, method=self._pending.pop(msg.id), raw=bytes(msg.result))

    def _match_error_id(self, rid: int | str | None) -> int | None:
        if isinstance(rid, int) and rid in self._pending:
            return rid
        if rid is None and len(self._pending) == 1:
            return next(iter(self._pending))
        if rid is None:
            return None
        raise ProtocolViolation(f"an error for an unknown id {rid!r}")


def decode_result(raw: bytes, result_type: type[T]) -> T:
    """Decode a result into its msgspec type; ProtocolViolation when it does not fit."""
    try:
        return msgspec.json.decode(raw, type=result_type)
    except msgspec.ValidationError as exc:
        raise ProtocolViolation(f"a result that does not match this protocol: {exc}") from None


def decode_notification(msg: ServerMessage) -> Notification:
    """The params of a `notify` message."""
    try:
        return _notification.decode(msg.params)
    except msgspec.ValidationError as exc:
        raise ProtocolViolation(
            f"a notification that does not match this protocol: {exc}"
        ) from None

"""JSON-RPC 2.0 dispatch, independent of any transport.

`Dispatcher.handle` takes one received message (a line without its newline)
and writes its reply to an `Output`, or nothing when the spec says there is
none (notifications, batches of notifications). The nesting depth is checked
before anything is decoded, and the range of integers before a message (or a
batch member) is. The common case, one request object, is decoded
in a single typed pass (`_Request` with params kept as raw bytes, then the
method's own params decoder); anything unusual falls back to a generic decode
that classifies the message precisely. Nothing a client sends can raise out
of `handle`: a bad message is an error reply, a bug an internal error.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import structlog
import trio

from reynd.daemon.context import CallContext
from reynd.protocol import errors
from reynd.protocol.limits import (
    INT_MAX,
    INT_MIN,
    MAX_BATCH_MEMBERS,
    MAX_DEPTH,
    batch_exceeds,
    integer_exceeds,
    nesting_exceeds,
)
from reynd.protocol.methods import METHODS, MethodDef
from reynd.protocol.validation import validation_details

__all__ = [
    "Dispatcher",
    "Handler",
    "Output",
    "QuickCall",
    "ReplyBudget",
    "Send",
    "encode_error_line",
    "validation_details",
]

log = structlog.get_logger("reynd.rpc")

Id = int | float | str | None
# A method implementation: decoded params Struct and the call's context in, result out.
Handler = Callable[[Any, CallContext], Awaitable[Any]]
Send = Callable[[bytes], Awaitable[None]]


class _Request(msgspec.Struct):
    """Fast-path shape of a well-formed request; anything else takes the slow path."""

    jsonrpc: str
    method: str
    params: msgspec.Raw = msgspec.Raw()
    id: Id | msgspec.UnsetType = msgspec.UNSET


class _Envelope(msgspec.Struct):
    """What is read of a message refused unread: its id for the reply, its method for the log."""

    id: Any = msgspec.UNSET
    method: Any = None


class _Ok(msgspec.Struct):
    jsonrpc: str
    result: Any
    id: Id


class _Err(msgspec.Struct):
    jsonrpc: str
    error: dict[str, Any]
    id: Id


_ENCODER = msgspec.json.Encoder()
_REQUEST_DECODER = msgspec.json.Decoder(_Request)
_ENVELOPE_DECODER = msgspec.json.Decoder(_Envelope)
_ANY_DECODER = msgspec.json.Decoder()
# Members stay raw: each is then answered like a message of its own.
_BATCH_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_EMPTY = msgspec.Raw()
_ID_TYPES = (int, float, str, type(None))
# First byte of raw params that is allowed: absent, object, array, null.
_STRUCTURED = frozenset((b"", b"{", b"[", b"n"))
_PARAMS_SHAPE = '"params" must be an object or array'


def encode_error_line(err: errors.ReyndError, id: Id = None) -> bytes:
    """One encoded JSON-RPC error response (used by the transport for framing errors)."""
    return _ENCODER.encode(_Err("2.0", err.to_wire(), id))


@dataclass(frozen=True, slots=True)
class _Method:
    definition: MethodDef
    handler: Handler
    decoder: msgspec.json.Decoder[Any]
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QuickCall:
    """A request `Dispatcher.quick_call` decoded and found quick: answered as it is."""

    entry: _Method
    params: Any
    id: Id | msgspec.UnsetType


class _Reply:
    """Marker for 'no reply' (a notification) distinct from any result."""


_NO_REPLY = _Reply()


class ReplyBudget:
    """Bytes of reply made for one connection and not yet written, against a limit.

    Replies count from when they are made (a batch's collected ones too) until
    the socket took them. While more than `limit` bytes wait, no new work for
    the connection starts (`room`): a client that does not read its replies
    stops its own requests instead of filling the daemon's memory.
    """

    __slots__ = ("_waiting", "limit", "throttled", "unsent")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.unsent = 0
        self.throttled = False  # the limit was exceeded at some point
        self._waiting = trio.lowlevel.ParkingLot()

    @property
    def exceeded(self) -> bool:
        return self.unsent > self.limit

    def hold(self, size: int) -> None:
        self.unsent += size
        if self.unsent > self.limit:
            self.throttled = True

    def release(self, size: int) -> None:
        self.unsent -= size
        if self.unsent <= self.limit and self._waiting:
            self._waiting.unpark_all()

    async def room(self) -> None:
        """Return once the unsent bytes are within the limit: at once (no checkpoint) if they are.

        Whoever holds unsent bytes must never wait here, or nothing would be
        written again; the caller produces its reply without a checkpoint
        after this returns, so the limit is overshot by about one reply.
        """
        while self.unsent > self.limit:
            await self._waiting.park()


class Output(Protocol):
    """Where the replies to one message go (a connection)."""

    @property
    def closed(self) -> bool:
        """The client is gone: nothing more is written (nor worth computing)."""

    @property
    def budget(self) -> ReplyBudget:
        """The connection's unsent replies; `line` and `pieces` count what they write."""

    async def line(self, data: bytes) -> None:
        """Write `data` as one whole line."""

    def pieces(self) -> AbstractAsyncContextManager[Send]:
        """Write one line in pieces, the newline at exit; no other line interleaves."""


class Dispatcher:
    """Validates, routes and answers JSON-RPC messages; built once per daemon."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        *,
        max_batch_members: int = MAX_BATCH_MEMBERS,
        quick: Mapping[str, Callable[[Any], bool]] | None = None,
        brief: Collection[str] = (),
    ) -> None:
        """`quick`: methods whose handler answers without waiting for anything, when their
        params pass the test (see `quick_call`; the daemon's table is daemon/quick.py).
        `brief`: methods that wait, but never for long (a sync): `quick_call` takes them
        too when the caller says the call is its connection's only one."""
        unknown = set(handlers) - set(METHODS)
        if unknown:
            raise ValueError(f"handlers for methods not in METHODS: {sorted(unknown)}")
        self._methods: dict[str, _Method] = {
            name: _Method(
                METHODS[name],
                handler,
                msgspec.json.Decoder(METHODS[name].params),
                METHODS[name].params.__struct_fields__,
            )
            for name, handler in handlers.items()
        }
        self._max_batch = max_batch_members
        self._refusal: errors.ReyndError | None = None
        self._quick = {name: (self._methods[name], test) for name, test in (quick or {}).items()}
        self._brief = {n: (self._methods[n], _always) for n in brief if n in self._methods}
        # Decided once: logging is configured before the daemon builds its dispatcher.
        self._debug: bool = log.bind().is_enabled_for(logging.DEBUG)

    def quick_call(self, line: bytes, *, alone: bool = False) -> QuickCall | None:
        """`line` decoded, when it is one well-formed request answered without waiting.

        The server may then run it in the connection's reader (`handle` with
        the QuickCall: nothing is checked or decoded twice), saving the hand-
        over to a request task, a good part of a small read's cost. Anything
        unusual, bad params included, is None: `handle` answers it the usual
        way, errors and all. Never raises.

        `alone`: the call is its connection's only one (none in flight, no
        line after it): a `brief` method is taken too. Its client waits for
        the reply, so the reader has nothing else to read meanwhile.
        """
        # What `handle` and `_answer` check before decoding comes first here too.
        if (
            line[:1] != b"{"
            or self._refusal is not None
            or nesting_exceeds(line)
            or not line.isascii()
            or integer_exceeds(line)
        ):
            return None
        try:
            req = _REQUEST_DECODER.decode(line)
        except msgspec.DecodeError:
            return None
        quick = self._quick.get(req.method)
        if quick is None and alone:
            quick = self._brief.get(req.method)
        if quick is None or req.jsonrpc != "2.0":
            return None
        entry, test = quick
        if memoryview(req.params)[:1].tobytes() not in _STRUCTURED:
            return None
        try:
            params = _decode_params(entry, req.params)
            return QuickCall(entry, params, req.id) if test(params) else None
        except Exception:
            return None

    def refuse_all(self, err: errors.ReyndError | None) -> None:
        """Answer every later call with `err` (e.g. ShuttingDown) instead of running it."""
        self._refusal = err

    async def handle(
        self, line: bytes, ctx: CallContext, out: Output, quick: QuickCall | None = None
    ) -> None:
        """Answer one message (a line without its newline) on `out`; nothing when none is due.

        `quick`: what `quick_call` made of this very line, answered as it is
        unless the connection's budget makes it wait first (a shutdown may have
        begun meanwhile, the tip moved): then it is decided again, the usual way.
        """
        if out.budget.exceeded:
            await out.budget.room()
            quick = None
        if quick is not None:
            reply = await self._invoke(
                quick.entry, quick.params, quick.id, ctx, time.perf_counter()
            )
            if reply is not _NO_REPLY:
                await out.line(_ENCODER.encode(reply))
            return
        # Before any decoding: decoders recurse, and what is accepted here may
        # become a WAL record that every component must be able to handle.
        if nesting_exceeds(line):
            await out.line(encode_error_line(_too_deep()))
            return
        if not line.isascii():
            # Checked whole, up front: strings the decoders skip (params kept
            # raw, unknown members) would otherwise go unchecked or fail late.
            try:
                line.decode()
            except UnicodeDecodeError as exc:
                await out.line(encode_error_line(_not_utf8(exc)))
                return
        if line.lstrip()[:1] == b"[":
            await self._batch(line, ctx, out)
            return
        reply = await self._answer(line, ctx)
        if reply is not _NO_REPLY:
            await out.line(_ENCODER.encode(reply))

    async def _answer(self, message: bytes | msgspec.Raw, ctx: CallContext) -> _Ok | _Err | _Reply:
        """The reply to one message that is not a batch (also each member of one)."""
        if integer_exceeds(bytes(message)):
            # Before any decoding: what is accepted may become a WAL record,
            # and every reader of it must hold its integers (snapshots, SQLite).
            return self._refuse_integers(message, ctx)
        # Fast path: one object that has the shape of a request.
        if memoryview(message)[:1].tobytes() == b"{":
            try:
                req = _REQUEST_DECODER.decode(message)
            except msgspec.ValidationError:
                pass  # valid JSON, unusual shape: classify below
            except msgspec.DecodeError as exc:
                return _parse_error(exc)
            else:
                if req.jsonrpc == "2.0":
                    if memoryview(req.params)[:1].tobytes() not in _STRUCTURED:
                        reply_id = None if isinstance(req.id, msgspec.UnsetType) else req.id
                        return _invalid(reply_id, _PARAMS_SHAPE)
                    return await self._call(req.method, req.params, req.id, ctx)
        try:
            message = _ANY_DECODER.decode(message)
        except msgspec.ValidationError as exc:
            # Valid JSON, with a number no decoder holds (e.g. "id": 1e400).
            return _invalid(None, f"a number is out of range ({exc})")
        except msgspec.DecodeError as exc:
            return _parse_error(exc)
        return await self._call_generic(message, ctx)

    def _refuse_integers(self, message: bytes | msgspec.Raw, ctx: CallContext) -> _Err | _Reply:
        """The reply to a message holding an integer out of range: its id kept when readable."""
        reply_id: Id = None
        method: Any = None
        notification = False
        try:
            envelope = _ENVELOPE_DECODER.decode(message)
        except msgspec.DecodeError:
            pass  # not an object, or its id is the integer at fault: id null
        else:
            method = envelope.method
            if envelope.id is msgspec.UNSET:
                notification = True
            elif _is_id(envelope.id):
                reply_id = envelope.id
        log.info(
            "rpc",
            method=method if isinstance(method, str) else None,
            outcome=errors.LimitExceeded.name,
            conn=ctx.connection_id,
            notification=notification,
        )
        if notification:
            return _NO_REPLY
        return _Err("2.0", _integer_out_of_range().to_wire(), reply_id)

    async def _members(self, line: bytes, out: Output) -> list[msgspec.Raw] | None:
        """The members of batch `line`; None once the one error reply it gets is written."""
        if batch_exceeds(line, self._max_batch):
            err: errors.ReyndError = errors.LimitExceeded(
                f"Batch too large: more than {self._max_batch} members; "
                "split it into smaller batches",
                {"limit_name": "max_batch_members", "limit": self._max_batch},
            )
            await out.line(encode_error_line(err))
            return None
        try:
            members = _BATCH_DECODER.decode(line)
        except msgspec.DecodeError as exc:
            await out.line(_ENCODER.encode(_parse_error(exc)))
            return None
        if not members:
            err = errors.InvalidRequest("Invalid Request: empty batch", {"reason": "empty batch"})
            await out.line(encode_error_line(err))
            return None
        return members

    async def _batch(self, line: bytes, ctx: CallContext, out: Output) -> None:
        """Members run in order (replies keep the order of the requests), one at a time.

        Each member yields to the other clients first. Replies are collected
        while the connection's unsent replies are within its budget; past
        that, the collected ones are written and the rest is streamed into
        the same line (holding the connection's write lock), so a batch adds
        little memory whatever its replies weigh. A batch whose client is
        gone stops.
        """
        members = await self._members(line, out)
        if members is None:
            return
        budget = out.budget
        collected: list[bytes] = []
        held = 0  # bytes of `collected`, counted in the budget
        try:
            async with contextlib.AsyncExitStack() as stack:
                send: Send | None = None
                for member in members:
                    await trio.lowlevel.checkpoint()
                    if out.closed:
                        return
                    if send is None and budget.exceeded:
                        if collected:
                            # Write what this batch holds rather than wait holding it.
                            send = await stack.enter_async_context(out.pieces())
                            first = b"[" + b",".join(collected)
                            collected.clear()
                            budget.release(held)
                            held = 0
                            await send(first)
                        else:
                            await budget.room()
                    reply = await self._answer(member, ctx)
                    if reply is _NO_REPLY:
                        continue
                    piece = _ENCODER.encode(reply)
                    if send is not None:
                        await send(b"," + piece)
                        continue
                    collected.append(piece)
                    held += len(piece)
                    budget.hold(len(piece))
                if send is not None:
                    await send(b"]")
                elif collected:
                    whole = b"[" + b",".join(collected) + b"]"
                    collected.clear()
                    budget.release(held)  # `line` counts it from here on
                    held = 0
                    await out.line(whole)
        finally:
            budget.release(held)

    async def _call_generic(self, message: Any, ctx: CallContext) -> _Ok | _Err | _Reply:
        """Validate a generically decoded request object, then call it."""
        if not isinstance(message, dict):
            return _invalid(None, f"expected a request object, got {_json_type(message)}")
        raw_id = message.get("id", msgspec.UNSET)
        id_ok = raw_id is msgspec.UNSET or (
            isinstance(raw_id, _ID_TYPES) and not isinstance(raw_id, bool)
        )
        reply_id: Id = raw_id if id_ok and raw_id is not msgspec.UNSET else None
        if message.get("jsonrpc") != "2.0":
            return _invalid(reply_id, '"jsonrpc" must be exactly "2.0"')
        if not id_ok:
            kind = _json_type(raw_id)
            return _invalid(None, f'"id" must be a string, number or null, not {kind}')
        method = message.get("method")
        if not isinstance(method, str):
            what = "missing" if method is None else f"a {_json_type(method)}"
            return _invalid(reply_id, f'"method" must be a string, it is {what}')
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return _invalid(reply_id, f"{_PARAMS_SHAPE}, not {_json_type(params)}")
        return await self._call(method, params, raw_id, ctx)

    async def _call(
        self,
        method: str,
        params: msgspec.Raw | dict[str, Any] | list[Any] | None,
        id: Id | msgspec.UnsetType,
        ctx: CallContext,
    ) -> _Ok | _Err | _Reply:
        """Decode params, run the handler, build the reply (or _NO_REPLY)."""
        start = time.perf_counter()
        entry = self._methods.get(method)
        try:
            if entry is None:
                raise _unknown_method(method)  # noqa: TRY301  (one error path for all)
            if self._refusal is not None:
                raise self._refusal  # noqa: TRY301
            decoded = _decode_params(entry, params)
        except Exception as exc:
            reply, outcome = _failed(exc, method, ctx, id)
            mutating = entry is not None and entry.definition.mutating
            return self._logged(
                reply, outcome, method=method, mutating=mutating, id=id, start=start, ctx=ctx
            )
        return await self._invoke(entry, decoded, id, ctx, start)

    async def _invoke(
        self,
        entry: _Method,
        params: Any,
        id: Id | msgspec.UnsetType,
        ctx: CallContext,
        start: float,
    ) -> _Ok | _Err | _Reply:
        """Run the handler on decoded params; the reply (or _NO_REPLY)."""
        method = entry.definition.name
        try:
            result = await entry.handler(params, ctx)
            # Encoded here so that an unencodable result is an internal error.
            reply_id = None if isinstance(id, msgspec.UnsetType) else id
            reply: _Ok | _Err = _Ok("2.0", msgspec.Raw(_ENCODER.encode(result)), reply_id)
            outcome = "ok"
        except Exception as exc:
            reply, outcome = _failed(exc, method, ctx, id)
        mutating = entry.definition.mutating
        return self._logged(
            reply, outcome, method=method, mutating=mutating, id=id, start=start, ctx=ctx
        )

    def _logged(
        self,
        reply: _Ok | _Err,
        outcome: str,
        *,
        method: str,
        mutating: bool,
        id: Id | msgspec.UnsetType,
        start: float,
        ctx: CallContext,
    ) -> _Ok | _Err | _Reply:
        """Log the call; its reply, or _NO_REPLY for a notification."""
        notification = id is msgspec.UNSET
        # Reads are frequent and cheap: debug (its arguments cost more than the
        # call when debug is off); writes and failures: info.
        if mutating or outcome != "ok" or self._debug:
            emit = log.info if mutating or outcome != "ok" else log.debug
            emit(
                "rpc",
                method=method,
                outcome=outcome,
                duration_ms=round((time.perf_counter() - start) * 1000.0, 3),
                conn=ctx.connection_id,
                notification=notification,
            )
        return _NO_REPLY if notification else reply


def _always(params: object) -> bool:
    return True


def _by_name(entry: _Method, params: list[Any]) -> dict[str, Any]:
    """Positional params as the object they stand for (-32602 if there are too many)."""
    if len(params) > len(entry.fields):
        raise errors.InvalidParams(
            f"Invalid params: {entry.definition.name} takes at most "
            f"{len(entry.fields)} positional params ({', '.join(entry.fields) or 'none'}),"
            f" got {len(params)}",
            {"expected": list(entry.fields), "got": len(params)},
        )
    return dict(zip(entry.fields, params, strict=False))


def _decode_params(entry: _Method, params: msgspec.Raw | dict[str, Any] | list[Any] | None) -> Any:
    """The method's params Struct from raw bytes or a decoded value (-32602 on failure)."""
    params_type = entry.definition.params
    by_position = False  # an error's path starts with the position, not the name
    try:
        if isinstance(params, msgspec.Raw):
            first = memoryview(params)[:1].tobytes()
            if first == b"{":
                return entry.decoder.decode(params)
            if first in (b"", b"n"):  # absent or null: an empty object
                return msgspec.convert({}, params_type)
            by_position = True  # e.g. [1e400]: no double holds it
            params = _ANY_DECODER.decode(params)
            by_position = False
        if params is None:
            return msgspec.convert({}, params_type)
        if isinstance(params, list):
            params = _by_name(entry, params)
        # Strict, as msgspec is by default: an int field takes a JSON integer only (never
        # 1.0, 1e2 or 1e-400, which decode as floats), a str field no number, and so on.
        return msgspec.convert(params, params_type)
    except msgspec.ValidationError as exc:
        field, reason = validation_details(exc)
        if by_position:
            field = _named(field, entry.fields)
        where = f" (field `{field}`)" if field else ""
        if reason.startswith("unknown field") and "." not in field:
            takes = ", ".join(entry.fields) or "no params"
            reason += f" ({entry.definition.name} takes {takes})"
        raise errors.InvalidParams(
            f"Invalid params for {entry.definition.name}{where}: {reason}",
            {"field": field, "reason": reason},
        ) from None
    except msgspec.DecodeError as exc:
        # The first pass only skipped over the params: e.g. invalid UTF-8 in a string.
        raise _parse_failure(exc) from None


def _named(path: str, fields: tuple[str, ...]) -> str:
    """`[1].x` of positional params as `name.x`, the name of the field at position 1."""
    position, sep, rest = path.removeprefix("[").partition("]")
    if not path.startswith("[") or not sep or not position.isdigit():
        return path
    i = int(position)
    return f"{fields[i]}{rest}" if i < len(fields) else path


def _failed(
    exc: Exception, method: str, ctx: CallContext, id: Id | msgspec.UnsetType
) -> tuple[_Err, str]:
    """The error reply to a call that raised, and its outcome (call inside `except`).

    A ReyndError is the client's answer; anything else is a bug: logged with
    its trace, answered with an incident id only.
    """
    if not isinstance(exc, errors.ReyndError):
        incident = uuid.uuid4().hex[:12]
        log.exception(
            "rpc.internal_error", method=method, incident=incident, conn=ctx.connection_id
        )
        exc = errors.InternalError(
            f"Internal error: see the daemon log (incident {incident})", {"incident": incident}
        )
    reply_id = None if isinstance(id, msgspec.UnsetType) else id
    return _Err("2.0", exc.to_wire(), reply_id), exc.name


def _unknown_method(method: str) -> errors.MethodNotFound:
    if method in METHODS:
        return errors.MethodNotFound(
            f"Method not found: {method} is not served by this daemon build",
            {"method": method},
        )
    return errors.MethodNotFound(
        f"Method not found: {method!r}; rpc.discover lists the methods",
        {"method": method},
    )


def _parse_failure(exc: msgspec.DecodeError) -> errors.ParseError:
    return errors.ParseError(
        f"Parse error: the message is not valid JSON ({exc})",
        {"hint": "send one JSON-RPC 2.0 object or array per line, UTF-8 encoded"},
    )


def _parse_error(exc: msgspec.DecodeError) -> _Err:
    return _Err("2.0", _parse_failure(exc).to_wire(), None)


def _not_utf8(exc: UnicodeDecodeError) -> errors.ParseError:
    return errors.ParseError(
        f"Parse error: the message is not valid UTF-8 (byte {exc.start}: {exc.reason})",
        {"hint": "send one JSON-RPC 2.0 object or array per line, UTF-8 encoded"},
    )


def _too_deep() -> errors.LimitExceeded:
    return errors.LimitExceeded(
        f"Message nests arrays and objects more than {MAX_DEPTH} levels deep; send flatter data",
        {"limit_name": "max_depth", "limit": MAX_DEPTH},
    )


def _integer_out_of_range() -> errors.LimitExceeded:
    return errors.LimitExceeded(
        f"Message holds an integer outside the signed 64-bit range, {INT_MIN} to {INT_MAX}; "
        "send larger numbers as strings",
        {"limit_name": "integer_range", "limit": INT_MAX, "min": INT_MIN},
    )


def _is_id(value: Any) -> bool:
    """A valid request id: a string, a number (an integer in range) or null."""
    if isinstance(value, bool) or not isinstance(value, _ID_TYPES):
        return False
    return not isinstance(value, int) or INT_MIN <= value <= INT_MAX


def _invalid(id: Id, reason: str) -> _Err:
    err = errors.InvalidRequest(f"Invalid Request: {reason}", {"reason": reason})
    return _Err("2.0", err.to_wire(), id)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"

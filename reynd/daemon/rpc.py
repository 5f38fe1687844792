"""JSON-RPC 2.0 dispatch, independent of any transport.

`Dispatcher.handle` takes one received message (a line without its newline)
and returns the encoded reply, or None when the spec says there is none
(notifications, batches of notifications). The common case, one request
object, is decoded in a single typed pass (`_Request` with params kept as raw
bytes, then the method's own params decoder); anything unusual falls back to a
generic decode that classifies the message precisely.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from reynd.daemon.context import CallContext
from reynd.protocol import errors
from reynd.protocol.methods import METHODS, MethodDef

__all__ = ["Dispatcher", "Handler", "encode_error_line", "validation_details"]

log = structlog.get_logger("reynd.rpc")

Id = int | float | str | None
# A method implementation: decoded params Struct and the call's context in, result out.
# (Same shape as reynd.daemon.app.Handler; defined here so the dispatcher needs no App.)
Handler = Callable[[Any, CallContext], Awaitable[Any]]


class _Request(msgspec.Struct):
    """Fast-path shape of a well-formed request; anything else takes the slow path."""

    jsonrpc: str
    method: str
    params: msgspec.Raw = msgspec.Raw()
    id: Id | msgspec.UnsetType = msgspec.UNSET


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
_ANY_DECODER = msgspec.json.Decoder()
_EMPTY = msgspec.Raw()
_ID_TYPES = (int, float, str, type(None))
# First byte of raw params that is allowed: absent, object, array, null.
_STRUCTURED = frozenset((b"", b"{", b"[", b"n"))
_PARAMS_SHAPE = '"params" must be an object or array'


def encode_error_line(err: errors.ReyndError, id: Id = None) -> bytes:
    """One encoded JSON-RPC error response (used by the transport for framing errors)."""
    return _ENCODER.encode(_Err("2.0", err.to_wire(), id))


def validation_details(exc: msgspec.ValidationError) -> tuple[str, str]:
    """(field, reason) from msgspec's message, e.g. ("seq", "Expected `int`, got `str`").

    msgspec says `... - at `$.a.b`` for nested values and names the field
    inside the reason for missing or unknown ones; the field is the dotted
    path from the params (or file) root, "" when the message names none.
    """
    text = str(exc)
    reason, sep, path = text.partition(" - at `")
    field = path.rstrip("`").removeprefix("$").removeprefix(".") if sep else ""
    # "Object missing required field `seq`" / "Object contains unknown field `foo`"
    _, tick, rest = reason.partition("field `")
    if tick:
        name = rest.split("`", 1)[0]
        field = f"{field}.{name}" if field else name
    return field, reason


@dataclass(frozen=True, slots=True)
class _Method:
    definition: MethodDef
    handler: Handler
    decoder: msgspec.json.Decoder[Any]
    fields: tuple[str, ...]


class _Reply:
    """Marker for 'no reply' (a notification) distinct from any result."""


_NO_REPLY = _Reply()


class Dispatcher:
    """Validates, routes and answers JSON-RPC messages; built once per daemon."""

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
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
        self._refusal: errors.ReyndError | None = None

    def refuse_all(self, err: errors.ReyndError | None) -> None:
        """Answer every later call with `err` (e.g. ShuttingDown) instead of running it."""
        self._refusal = err

    async def handle(self, line: bytes, ctx: CallContext) -> bytes | None:
        """Answer one message; None when no reply is due."""
        # Fast path: one object that has the shape of a request.
        if line[:1] == b"{":
            try:
                req = _REQUEST_DECODER.decode(line)
            except msgspec.ValidationError:
                pass  # valid JSON, unusual shape: classify below
            except msgspec.DecodeError as exc:
                return self._parse_error(exc)
            else:
                if req.jsonrpc == "2.0":
                    if memoryview(req.params)[:1].tobytes() not in _STRUCTURED:
                        reply_id = None if isinstance(req.id, msgspec.UnsetType) else req.id
                        return _ENCODER.encode(_invalid(reply_id, _PARAMS_SHAPE))
                    reply = await self._call(req.method, req.params, req.id, ctx)
                    return None if reply is _NO_REPLY else _ENCODER.encode(reply)
        try:
            message = _ANY_DECODER.decode(line)
        except msgspec.DecodeError as exc:
            return self._parse_error(exc)
        if isinstance(message, list):
            return await self._batch(message, ctx)
        reply = await self._call_generic(message, ctx)
        return None if reply is _NO_REPLY else _ENCODER.encode(reply)

    def _parse_error(self, exc: msgspec.DecodeError) -> bytes:
        return encode_error_line(
            errors.ParseError(
                f"Parse error: the message is not valid JSON ({exc})",
                {"hint": "send one JSON-RPC 2.0 object or array per line"},
            )
        )

    async def _batch(self, members: list[Any], ctx: CallContext) -> bytes | None:
        if not members:
            return encode_error_line(
                errors.InvalidRequest("Invalid Request: empty batch", {"reason": "empty batch"})
            )
        # Members run in order: replies keep the order of the requests.
        replies = []
        for member in members:
            reply = await self._call_generic(member, ctx)
            if reply is not _NO_REPLY:
                replies.append(reply)
        return _ENCODER.encode(replies) if replies else None

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
        notification = id is msgspec.UNSET
        reply_id: Id = None if isinstance(id, msgspec.UnsetType) else id
        start = time.perf_counter()
        entry = self._methods.get(method)
        mutating = False
        try:
            if entry is None:
                raise _unknown_method(method)  # noqa: TRY301  (one error path for all)
            mutating = entry.definition.mutating
            if self._refusal is not None:
                raise self._refusal  # noqa: TRY301
            decoded = _decode_params(entry, params)
            result = await entry.handler(decoded, ctx)
            # Encoded here so that an unencodable result is an internal error.
            reply: _Ok | _Err = _Ok("2.0", msgspec.Raw(_ENCODER.encode(result)), reply_id)
            outcome = "ok"
        except errors.ReyndError as exc:
            reply, outcome = _Err("2.0", exc.to_wire(), reply_id), exc.name
        except Exception:
            incident = uuid.uuid4().hex[:12]
            log.exception(
                "rpc.internal_error", method=method, incident=incident, conn=ctx.connection_id
            )
            err = errors.InternalError(
                f"Internal error: see the daemon log (incident {incident})", {"incident": incident}
            )
            reply, outcome = _Err("2.0", err.to_wire(), reply_id), err.name
        duration_ms = (time.perf_counter() - start) * 1000.0
        # Reads are frequent and cheap: debug; writes and failures: info.
        emit = log.info if mutating or outcome != "ok" else log.debug
        emit(
            "rpc",
            method=method,
            outcome=outcome,
            duration_ms=round(duration_ms, 3),
            conn=ctx.connection_id,
            notification=notification,
        )
        return _NO_REPLY if notification else reply


def _decode_params(entry: _Method, params: msgspec.Raw | dict[str, Any] | list[Any] | None) -> Any:
    """The method's params Struct from raw bytes or a decoded value (-32602 on failure)."""
    params_type = entry.definition.params
    try:
        if isinstance(params, msgspec.Raw):
            first = memoryview(params)[:1].tobytes()
            if first == b"{":
                return entry.decoder.decode(params)
            if first in (b"", b"n"):  # absent or null: an empty object
                return msgspec.convert({}, params_type)
            params = _ANY_DECODER.decode(params)
        if params is None:
            return msgspec.convert({}, params_type)
        if isinstance(params, list):
            if len(params) > len(entry.fields):
                raise errors.InvalidParams(
                    f"Invalid params: {entry.definition.name} takes at most "
                    f"{len(entry.fields)} positional params ({', '.join(entry.fields) or 'none'}),"
                    f" got {len(params)}",
                    {"expected": list(entry.fields), "got": len(params)},
                )
            params = dict(zip(entry.fields, params, strict=False))
        return msgspec.convert(params, params_type)
    except msgspec.ValidationError as exc:
        field, reason = validation_details(exc)
        where = f" (field `{field}`)" if field else ""
        raise errors.InvalidParams(
            f"Invalid params for {entry.definition.name}{where}: {reason}",
            {"field": field, "reason": reason},
        ) from None


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

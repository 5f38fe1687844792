"""The events `wal.append` accepts: the agent events of `events`, under the rules of `names`.

`events` stays permissive because it decodes records already in the log. The
strict twins here are derived from it field by field, so they cannot drift,
and they only validate what an external runtime sends: the record itself is
still built from the plain type.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Final, Union, get_args, get_origin

import msgspec

from reynd.protocol.events import AgentEvent, AnyEvent
from reynd.protocol.limits import MAX_COUNT
from reynd.protocol.names import AgentName, AgentRef, Ident, Line
from reynd.protocol.schema import inline_schema

__all__ = ["BY_KIND", "DATA_SCHEMA", "KINDS", "strict_type"]

# What each string field of an agent event may hold, by field name. A new
# string field must be listed (importing this module fails until it is): its
# author decides whether it is a name, an identifier, a table line or free text.
_STRINGS: Final[dict[str, Any]] = {
    "agent": AgentRef,  # AgentName where the event creates the agent: _NAMING
    **dict.fromkeys(
        (
            "session",
            "executor",
            "sender",
            "message_id",
            "turn_id",
            "plan_id",
            "run_id",
            "skill",
            "phase",
            "outcome",
            "intervention_id",
            "tool_call_id",
            "id",  # of a tool call
            "name",  # of a tool
        ),
        Ident,
    ),
    "label": Line,
    "steps": Line,  # a plan step's title
    # Free text (messages, answers, results): bounded by the transport's line limit.
    **dict.fromkeys(("text", "reply", "result", "question", "answer", "content", "arguments"), str),
}
# Events that bring a new name in: it must follow today's rules. Every other
# event only refers to an agent, which may carry a name an older release took.
_NAMING: Final = frozenset(("AgentCreated",))
_COUNTS: Final = frozenset(("step", "index", "tokens_in", "tokens_out"))
# Bounded here, not in `events`: a record an older version wrote must still decode.
_COUNT = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
# By the daemon, never by the writer: an external runtime cannot vouch for an `effect`.
_ASSIGNED: Final = frozenset(("seq", "ts", "more", "effect"))


def _constrain(tp: Any, field: str, owner: str) -> Any:
    """`tp` (a field's type) with the rules for `field` applied, recursively."""
    if tp is str:
        if field == "agent" and owner in _NAMING:
            return AgentName
        if field not in _STRINGS:
            raise TypeError(f"{owner}.{field}: add it to _STRINGS in {__name__}")
        return _STRINGS[field]
    if tp is int and field in _COUNTS:
        return _COUNT
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return strict_type(tp)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return Union[tuple(_constrain(arg, field, owner) for arg in get_args(tp))]  # noqa: UP007
    if origin is tuple:
        item, ellipsis = get_args(tp)
        assert ellipsis is Ellipsis, f"{owner}.{field}: only tuple[X, ...] is handled"
        return tuple[_constrain(item, field, owner), ...]  # type: ignore[misc]
    return tp  # Literal, dict[str, Any], float, bool: as in the plain type


_STRICT: dict[type[msgspec.Struct], type[msgspec.Struct]] = {}


def strict_type(cls: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """The strict twin of the event (or nested) Struct `cls`, without seq and ts."""
    if cls in _STRICT:
        return _STRICT[cls]
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(cls):
        if f.name in _ASSIGNED:
            continue
        tp = _constrain(f.type, f.name, cls.__name__)
        if f.default is not msgspec.NODEFAULT:
            fields.append((f.name, tp, f.default))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, tp, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, tp))
    config = cls.__struct_config__
    strict = msgspec.defstruct(
        cls.__name__,
        fields,
        module=__name__,
        kw_only=True,
        frozen=True,
        forbid_unknown_fields=True,
        tag_field=config.tag_field,
        tag=config.tag,
    )
    _STRICT[cls] = strict
    return strict


_AGENT_EVENTS = [cls for cls in get_args(AnyEvent) if issubclass(cls, AgentEvent)]

KINDS: Final[tuple[str, ...]] = tuple(
    sorted(str(cls.__struct_config__.tag) for cls in _AGENT_EVENTS)
)
"""The event kinds `wal.append` takes (reset and lost records are the daemon's own)."""

BY_KIND: Final[dict[str, tuple[type[msgspec.Struct], type[AgentEvent]]]] = {
    str(cls.__struct_config__.tag): (strict_type(cls), cls) for cls in _AGENT_EVENTS
}
"""Each kind's (strict twin, event type): `{"kind", "agent", **data}` is validated against
the twin with msgspec.convert, then built as the event. One concrete type per convert: to the
union of them all it cost ~25 µs (msgspec builds a union's decoder on every convert)."""


def _data_schema(cls: type[msgspec.Struct]) -> dict[str, Any]:
    """What `data` holds for one kind: the strict event without `kind` and `agent`."""
    schema = inline_schema(strict_type(cls))
    tag_field = cls.__struct_config__.tag_field
    for field in (tag_field, "agent"):
        schema["properties"].pop(field, None)
    schema["required"] = [f for f in schema.get("required", ()) if f not in (tag_field, "agent")]
    return schema


_SCHEMA_BY_KIND: Final = {kind: _data_schema(types[1]) for kind, types in BY_KIND.items()}

DATA_SCHEMA: Final[dict[str, Any]] = {
    "description": "The event's fields but `kind` and `agent`: see x-data-by-kind.",
    "anyOf": list(_SCHEMA_BY_KIND.values()),
    "x-data-by-kind": _SCHEMA_BY_KIND,
}
"""JSON Schema of `wal.append`'s `data` (the daemon checks it against `kind`'s event)."""

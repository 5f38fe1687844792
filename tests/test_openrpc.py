"""The OpenRPC document is generated from METHODS and matches the msgspec types."""

from __future__ import annotations

import json
import typing
from typing import Any

import msgspec
import pytest

from reynd.protocol import errors
from reynd.protocol.methods import METHODS, NOTIFICATIONS
from reynd.protocol.openrpc import openrpc_document

DOC = openrpc_document()
BY_NAME = {m["name"]: m for m in DOC["methods"]}
SCHEMAS = DOC["components"]["schemas"]


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    resolved: dict[str, Any] = SCHEMAS[ref.rsplit("/", 1)[1]]
    return resolved


def test_every_method_appears_once() -> None:
    assert [m["name"] for m in DOC["methods"]] == list(METHODS)
    json.dumps(DOC)  # plain JSON all the way down


@pytest.mark.parametrize("name", list(METHODS))
def test_params_match_the_struct(name: str) -> None:
    definition = METHODS[name]
    method = BY_NAME[name]
    info = msgspec.inspect.type_info(definition.params)
    assert isinstance(info, msgspec.inspect.StructType)
    assert [p["name"] for p in method["params"]] == [f.encode_name for f in info.fields]
    hints = typing.get_type_hints(definition.params, include_extras=True)
    for param, field in zip(method["params"], info.fields, strict=True):
        assert param["required"] == field.required
        # Independently derived: msgspec's schema for the field's own annotation.
        standalone = msgspec.json.schema(hints[field.name])
        nested = standalone.pop("$defs", {})
        expected = dict(standalone)  # a default_factory has no schema default
        if field.default is not msgspec.NODEFAULT:
            expected["default"] = msgspec.to_builtins(field.default)
        elif field.default_factory in (dict, list):  # how msgspec stores `= {}` / `= []`
            expected["default"] = field.default_factory()
        got = dict(param["schema"])
        assert json.dumps(got, sort_keys=True).replace("#/components/schemas/", "#/$defs/") == (
            json.dumps(expected, sort_keys=True)
        ), (name, field.name)
        for ref_name, ref_schema in nested.items():
            assert SCHEMAS[ref_name] == json.loads(
                json.dumps(ref_schema).replace("#/$defs/", "#/components/schemas/")
            )


@pytest.mark.parametrize("name", list(METHODS))
def test_result_schema_and_errors(name: str) -> None:
    definition = METHODS[name]
    method = BY_NAME[name]
    result = resolve(method["result"]["schema"])
    if isinstance(definition.result, type) and issubclass(definition.result, msgspec.Struct):
        assert result["title"] == definition.result.__name__
        fields = msgspec.structs.fields(definition.result)
        assert set(result["properties"]) == {f.encode_name for f in fields}
    codes = {e["code"] for e in method["errors"]}
    assert {e.code for e in definition.errors} <= codes
    for e in method["errors"]:
        assert errors.error_class(e["code"]).name == e["message"]


def test_params_validate_what_the_schema_describes() -> None:
    # A required integer with a minimum: the schema and the decoder agree.
    seq = next(p for p in BY_NAME["act_turn.rewind"]["params"] if p["name"] == "seq")
    assert seq == {"name": "seq", "required": True, "schema": {"type": "integer", "minimum": 0}}
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"agent": "a", "seq": -1}, METHODS["act_turn.rewind"].params)


def test_notifications_are_in_the_document() -> None:
    """Server-to-client messages (no id) under x-notifications, from the same types."""
    notices = {n["name"]: n for n in DOC["x-notifications"]}
    assert set(notices) == set(NOTIFICATIONS) == {"notify", "lagged"}
    for name, notice in notices.items():
        params = {p["name"]: p for p in notice["params"]}
        struct, _ = NOTIFICATIONS[name]
        assert set(params) == {f.name for f in msgspec.structs.fields(struct)}, name
        assert all(p["required"] for p in params.values()), name
    assert notices["lagged"]["params"][1]["schema"]["anyOf"][1] == {"type": "null"}

"""The OpenRPC document means what the daemon does, read by validators that are not msgspec.

JSON Schema patterns are ECMA-262 regular expressions while the daemon checks
names with Python's `re`: every pattern must accept exactly the same strings
in both (`regress` is an ECMA-262 engine). Executor options and the events
`wal.append` takes are described by the document, field for field, as the
daemon validates them (`jsonschema`, a validator that is not msgspec).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import regress
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reynd.protocol.appendable import BY_KIND, KINDS
from reynd.protocol.executor import EXECUTOR_NAMES, EXECUTOR_OPTIONS, ExecutorName
from reynd.protocol.openrpc import openrpc_document
from tests.harness import start_daemon

DOC = openrpc_document()
PARAMS = {m["name"]: {p["name"]: p["schema"] for p in m["params"]} for m in DOC["methods"]}


def patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from patterns(value)


PATTERNS = sorted(set(patterns(DOC)))
TRICKY = ["", "a", "a\n", "\n", "a\nb", "a\r", "a\u2028", "\u0085", "é", "a" * 64, "a" * 65, "-a"]


def test_the_document_has_patterns() -> None:
    assert len(PATTERNS) >= 2  # names and identifiers: the test below is not vacuous


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
@example(text="")
def test_pattern_means_the_same_in_ecma262_and_python(pattern: str, text: str) -> None:
    ecma = regress.Regex(pattern, "u")  # JSON Schema: ECMA-262, with Unicode
    for s in (text, *TRICKY, text + "\n", "\n" + text):
        assert (ecma.find(s) is not None) == bool(re.search(pattern, s)), (pattern, s)


def test_a_python_only_pattern_would_be_caught() -> None:
    # Python's `$` also matches before a final newline; ECMA-262's does not.
    assert (regress.Regex("^a$", "u").find("a\n") is None) != (re.search("^a$", "a\n") is None)


def _check(schema: dict[str, Any], value: Any) -> bool:
    validator = jsonschema.Draft202012Validator({**schema, "components": DOC["components"]})
    return bool(validator.is_valid(value))


@pytest.mark.parametrize("method", ["agents.create", "agents.configure"])
def test_executor_options_are_in_the_document(method: str) -> None:
    schema = PARAMS[method]["options"]
    if method == "agents.configure":  # optional there: the options schema or null
        schema, null = schema["anyOf"]
        assert null == {"type": "null"}
    by_executor = schema["x-options-by-executor"]
    assert list(by_executor) == list(EXECUTOR_OPTIONS) == list(EXECUTOR_NAMES)
    cases: list[tuple[ExecutorName, dict[str, Any]]] = [
        ("builtin", {}),
        ("builtin", {"delay": 0.5}),
        ("builtin", {"delay": -1}),
        ("builtin", {"argv": ["x"]}),
        ("command", {}),
        ("command", {"argv": ["./step.sh"], "timeout": 5}),
        ("command", {"argv": []}),
        ("command", {"argv": ["x"], "timeout": 0}),
        ("openai", {"model": "m", "temperature": 0.2}),
        ("openai", {"model": 3}),
        ("openai", {"nonsense": True}),
    ]
    for executor, options in cases:
        daemon_accepts = True
        try:
            msgspec.convert(options, EXECUTOR_OPTIONS[executor])
        except msgspec.ValidationError:
            daemon_accepts = False
        assert _check(by_executor[executor], options) == daemon_accepts, (executor, options)
        # The param schema accepts what any executor accepts.
        if daemon_accepts:
            assert _check(schema, options), (executor, options)


def test_wal_append_kinds_and_their_data_are_in_the_document() -> None:
    params = PARAMS["wal.append"]
    assert sorted(params["kind"]["enum"]) == sorted(KINDS)
    by_kind = params["data"]["x-data-by-kind"]
    assert set(by_kind) == set(KINDS)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("message.received", {"message_id": "m1", "text": "hi"}),
        ("message.received", {"message_id": "m1"}),
        ("message.received", {"message_id": "m1", "text": "hi", "extra": 1}),
        ("turn.started", {"turn_id": "t1", "message_id": "m1"}),
        ("step.committed", {"turn_id": "t1", "step": 0, "messages": [{"role": "user"}]}),
        ("step.committed", {"turn_id": "t1", "step": -1}),
        ("step.committed", {"turn_id": "t1", "step": 2**60}),
        ("turn.ended", {"turn_id": "t1", "reply": "ok"}),
        ("agent.created", {"session": "s", "executor": "builtin", "options": {}}),
    ]
    for kind, data in cases:
        daemon_accepts = True
        try:
            msgspec.convert({"kind": kind, "agent": "ada", **data}, BY_KIND[kind][0])
        except msgspec.ValidationError:
            daemon_accepts = False
        assert _check(by_kind[kind], data) == daemon_accepts, (kind, data)


# -- every declared constraint is the daemon's: violations derived from the document --------

# Numbers a JSON text can hold that are no JSON integer: the daemon must refuse them all
# where the document says "integer" (1e-400 reads as 0.0, 1e2 as 100.0).
NOT_INTEGERS = ("1.0", "0.0", "1e2", "1e-400", "-0.0", "2E0", "1e400")
# Strings that break a pattern, if any does (each is kept only where the document refuses it).
ODD_STRINGS = ("a/b", "-x", "../etc", "", " ", "\u0000", "a\n", "\n", "\u202e", "é", "a b")
_RAW = "\u0001raw:"  # a value sent as its literal JSON text, not as a JSON string


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _resolve(DOC["components"]["schemas"][ref.rsplit("/", 1)[1]])
    return schema


def valid_value(schema: dict[str, Any]) -> Any:
    """A small value the schema accepts, derived from the schema alone."""
    schema = _resolve(schema)
    if "anyOf" in schema:
        for branch in schema["anyOf"]:
            if _resolve(branch).get("type") != "null":
                return valid_value(branch)
        return None
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "integer":
        return max(schema.get("minimum", 0), schema.get("exclusiveMinimum", -1) + 1)
    if kind == "number":
        return max(schema.get("minimum", 0), schema.get("exclusiveMinimum", 0) + 1)
    if kind == "string":
        return "a" * max(schema.get("minLength", 1), 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return [valid_value(schema["items"]) for _ in range(schema.get("minItems", 0))]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: valid_value(props[name]) for name in schema.get("required", ())}
    if kind == "null":
        return None
    raise AssertionError(f"no valid value derived for {schema}")


def candidates(schema: dict[str, Any]) -> Iterator[Any]:
    """Values that break some constraint the schema declares (not all are refused by the whole)."""
    schema = _resolve(schema)
    for branch in schema.get("anyOf", ()):
        yield from candidates(branch)
    if "enum" in schema:
        yield "not-a-member"
        yield 7
    kind = schema.get("type")
    if kind in ("integer", "number"):
        yield "1"
        yield True
        yield None
        if kind == "integer":
            yield from (_RAW + n for n in NOT_INTEGERS)
        if "minimum" in schema:
            yield schema["minimum"] - 1
        if "exclusiveMinimum" in schema:
            yield schema["exclusiveMinimum"]
        if "maximum" in schema:
            yield schema["maximum"] + 1
        if "exclusiveMaximum" in schema:
            yield schema["exclusiveMaximum"]
    elif kind == "string":
        yield 1
        yield None
        yield ["a"]
        if "minLength" in schema:
            yield "a" * (schema["minLength"] - 1)
        if "maxLength" in schema:
            yield "a" * (schema["maxLength"] + 1)
        if "pattern" in schema:
            yield from ODD_STRINGS
    elif kind == "boolean":
        yield "true"
        yield 0
    elif kind == "array":
        yield "x"
        yield {}
        items = schema.get("items")
        if items is not None:
            yield from ([bad] for bad in candidates(items))
        if "minItems" in schema and schema["minItems"] > 0:
            yield []
        if "maxItems" in schema:
            yield [valid_value(items or {})] * (schema["maxItems"] + 1)
    elif kind == "object":
        yield "x"
        yield []
        props = schema.get("properties", {})
        base = valid_value(schema)
        for name in schema.get("required", ()):
            yield {k: v for k, v in base.items() if k != name}
        if schema.get("additionalProperties") is False:
            yield {**base, "no_such_field": 1}
        for name, prop in props.items():
            yield from ({**base, name: bad} for bad in candidates(prop))


def _python(value: Any) -> Any:
    """`value` as the daemon's JSON decoder would read it (for the validator)."""
    if isinstance(value, str) and value.startswith(_RAW):
        return json.loads(value.removeprefix(_RAW))
    if isinstance(value, list):
        return [_python(v) for v in value]
    if isinstance(value, dict):
        return {k: _python(v) for k, v in value.items()}
    return value


def _sent(value: Any) -> bool:
    """A value the document refuses: a non-integer number where it says integer counts too."""
    if isinstance(value, str) and value.startswith(_RAW):
        return True
    if isinstance(value, list):
        return any(_sent(v) for v in value)
    if isinstance(value, dict):
        return any(_sent(v) for v in value.values())
    return False


def violations(schema: dict[str, Any]) -> list[Any]:
    """The candidates the whole schema refuses (JSON Schema's 1.0-is-an-integer aside)."""
    out: list[Any] = []
    seen: set[str] = set()
    for value in candidates(schema):
        key = json.dumps(value, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        # JSON Schema counts 1.0 as an integer; the document's integers are JSON
        # integers (docs/protocol.md): a literal with a fraction or exponent is refused.
        if _sent(value) or not _check(schema, _python(value)):
            out.append(value)
    return out


def encode_request(id: int, method: str, params: dict[str, Any] | list[Any]) -> bytes:
    """The request line, `_RAW` values written as their literal JSON text."""
    text = json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    for number in NOT_INTEGERS:
        text = text.replace(json.dumps(_RAW + number), number)
    return text.encode()


_OMITTED = "<omitted>"


def method_cases() -> Iterator[tuple[str, str, dict[str, Any] | list[Any], Any]]:
    """(method, param, params, the value sent) for every violation of every param of every
    method: by name, and by position (the params in the document's order, valid ones first)."""
    for method in DOC["methods"]:
        name = method["name"]
        valid = {p["name"]: valid_value(p["schema"]) for p in method["params"]}
        base = {p["name"]: valid[p["name"]] for p in method["params"] if p["required"]}
        order = list(valid)
        for i, param in enumerate(method["params"]):
            if param["required"]:
                yield (
                    name,
                    param["name"],
                    {k: v for k, v in base.items() if k != param["name"]},
                    _OMITTED,
                )
            for bad in violations(param["schema"]):
                yield name, param["name"], {**base, param["name"]: bad}, bad
                yield name, param["name"], [*(valid[k] for k in order[:i]), bad], bad
        yield name, "no_such_param", {**base, "no_such_param": 1}, 1


def test_valid_values_are_valid() -> None:
    """The derived params are ones the document accepts (else the cases below prove little)."""
    for method in DOC["methods"]:
        for param in method["params"]:
            value = valid_value(param["schema"])
            assert _check(param["schema"], value), (method["name"], param["name"], value)


def test_violations_include_what_the_issue_names() -> None:
    cases: dict[tuple[str, str], list[str]] = {}
    for m, p, _, sent in method_cases():
        cases.setdefault((m, p), []).append(json.dumps(sent))
    for method in ("rewind", "checkout", "state.get"):
        wanted = {json.dumps(v) for v in (_RAW + "0.0", _RAW + "1e-400", "1", -1)}
        assert wanted <= set(cases[(method, "seq")]), method
    assert json.dumps("<omitted>") in cases[("act_turn.rewind", "seq")]
    wanted = {json.dumps(v) for v in ("", "\u0000", "a" * 129, 1, "<omitted>")}
    assert wanted <= set(cases[("interventions.answer", "intervention_id")])
    assert len(cases) >= 100
    # `a/b`, `-x` and `../etc` are identifiers the document allows (1-128 characters, no
    # control characters): the daemon taking them is the document's word, not a gap in it.
    schema = PARAMS["interventions.answer"]["intervention_id"]
    assert all(_check(schema, v) for v in ("a/b", "-x", "../etc"))


def test_every_declared_constraint_is_enforced_by_the_daemon(short_tmp: Path) -> None:
    """Each violation, sent to the real daemon: -32602 naming the field, and the head stays."""
    d = start_daemon(short_tmp)
    try:
        with d.connect() as c:
            # "a", the agent the derived params name, runs a builtin executor: its options
            # are checked (an external agent's are not); "b" has some history.
            c.call("agents.create", {"name": "a"})
            c.call("wal.append", {"agent": "b", "kind": "agent.created"})
            for i in range(3):
                data = {"message_id": f"m{i}", "text": "x"}
                c.call("wal.append", {"agent": "b", "kind": "message.received", "data": data})
            head = c.call("daemon.status")["head"]
            failures: list[str] = []
            count = 0
            for count, (method, param, params, sent) in enumerate(method_cases(), 1):
                c.send(encode_request(count, method, params) + b"\n")
                reply = c.recv_json()
                err = reply.get("error") or {}
                # `data.field` is the param or a path inside it (`events[0].kind`).
                field = str((err.get("data") or {}).get("field", ""))
                root = re.match(r"[^.\[]*", field)
                named = root is not None and root[0] == param and param in err.get("message", "")
                if err.get("code") != -32602 or not named:
                    failures.append(f"{method} {param}={sent!r} in {params!r}: {reply}")
            moved = c.call("daemon.status")["head"]
        report = "\n".join(failures[:80])
        assert not failures, f"{len(failures)} of {count} accepted or misreported:\n{report}"
        assert moved == head, "a refused call moved the head"
    finally:
        d.stop()

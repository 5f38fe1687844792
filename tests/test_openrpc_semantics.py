"""The OpenRPC document means what the daemon does, read by validators that are not msgspec.

JSON Schema patterns are ECMA-262 regular expressions while the daemon checks
names with Python's `re`: every pattern must accept exactly the same strings
in both (`regress` is an ECMA-262 engine). Executor options and the events
`wal.append` takes are described by the document, field for field, as the
daemon validates them (`jsonschema`, a validator that is not msgspec).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from typing import Any

import jsonschema
import msgspec
import pytest
import regress
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reynd.protocol.agent_methods import ExecutorName
from reynd.protocol.appendable import KINDS, STRICT_EVENT
from reynd.protocol.executor import EXECUTOR_OPTIONS
from reynd.protocol.openrpc import openrpc_document

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
    return validator.is_valid(value)


@pytest.mark.parametrize("method", ["agents.create", "agents.configure"])
def test_executor_options_are_in_the_document(method: str) -> None:
    schema = PARAMS[method]["options"]
    if method == "agents.configure":  # optional there: the options schema or null
        schema, null = schema["anyOf"]
        assert null == {"type": "null"}
    by_executor = schema["x-options-by-executor"]
    assert set(by_executor) == set(EXECUTOR_OPTIONS) == set(typing.get_args(ExecutorName))
    cases: list[tuple[str, dict[str, Any]]] = [
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
            msgspec.convert({"kind": kind, "agent": "ada", **data}, STRICT_EVENT)
        except msgspec.ValidationError:
            daemon_accepts = False
        assert _check(by_kind[kind], data) == daemon_accepts, (kind, data)

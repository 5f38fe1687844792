"""How ReyndSaver holds a serialized value in a record (pure): packed, or compressed against
its frozen preset dictionary, whichever takes fewer bytes; both read back exactly."""

from __future__ import annotations

import base64
import hashlib
import random
import zlib
from typing import Any

import msgspec
import pytest

pytest.importorskip("langgraph.checkpoint.serde.jsonplus")

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from reynctl.langgraph.stored import _MEM_LEVEL, DICTIONARY, ZIP, ZIP_MIN, loads, stored
from reynctl.langgraph.view import pack

SERDE = JsonPlusSerializer()


def test_the_dictionary_is_frozen() -> None:
    """Records name it (`z1:`): changing it would make every one of them unreadable."""
    assert ZIP == "z1:"
    assert hashlib.sha256(DICTIONARY).hexdigest() == (
        "5722582da6b0cd6c54c9b7510221bf3cd57baf078c37e7e162855beb61bc09a0"
    )


def _forms(type_: str, data: bytes) -> dict[str, int]:
    """Bytes of JSON each form takes in a record (its type and text): packed, compressed."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15, _MEM_LEVEL, zdict=DICTIONARY)
    zipped = base64.b64encode(deflate.compress(data) + deflate.flush()).decode()
    return {
        "packed": len(msgspec.json.encode([type_, pack(data)])),
        "z1": len(msgspec.json.encode([f"z1:{type_}", zipped])),
    }


MESSAGES = [
    HumanMessage(content="What is the status of ticket 12? The CI check keeps failing."),
    AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": 12}, "id": "c-12"}]),
    ToolMessage(content="ticket 12: open, assigned to the build team", tool_call_id="c-12"),
    AIMessage(content="Here is what I found: the ticket is open. I will follow up."),
]


@pytest.mark.parametrize("kind", ["message", "noise", "letters", "short"])
def test_a_value_is_held_in_the_smaller_of_its_two_forms(kind: str) -> None:
    rng = random.Random(7)
    value: Any = {
        "message": MESSAGES[1],  # about half of its packed size
        "noise": rng.randbytes(4096),  # packed: ~2.1 bytes of JSON a byte; base64: 1.33
        "letters": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1500)),
        "short": "ok",  # below ZIP_MIN: packed, not tried
    }[kind]
    type_, data = SERDE.dumps_typed(value)
    t, text = stored(type_, data)
    forms = _forms(type_, data)
    if kind == "short":
        assert len(data) < ZIP_MIN and (t, text) == (type_, pack(data))
    else:
        assert len(msgspec.json.encode([t, text])) == min(forms.values())
        assert t == (type_ if forms["packed"] <= forms["z1"] else f"z1:{type_}")
    if kind in ("message", "noise"):
        assert t == f"z1:{type_}"
    if kind == "message":
        assert forms["z1"] < 0.6 * forms["packed"]
    assert loads(SERDE, t, text) == value


@given(st.lists(st.sampled_from(MESSAGES), max_size=30), st.binary(max_size=600))
def test_every_value_reads_back_and_takes_no_more_than_packed(items: list[Any], raw: bytes) -> None:
    for value in (items, raw, {"messages": items}):
        type_, data = SERDE.dumps_typed(value)
        t, text = stored(type_, data)
        took = len(msgspec.json.encode([t, text]))
        assert took <= len(msgspec.json.encode([type_, pack(data)]))
        assert loads(SERDE, t, text) == value


def test_a_value_an_older_saver_packed_reads_as_it_did() -> None:
    type_, data = SERDE.dumps_typed(MESSAGES)
    assert loads(SERDE, type_, pack(data)) == MESSAGES

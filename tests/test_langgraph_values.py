"""ReyndSaver's storage forms (pure): list deltas and checkpoint diffs give values back exactly."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.serde.jsonplus")

from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from reynctl.langgraph.checkpoints import apply_diff, diff
from reynctl.langgraph.values import MAX_DEPTH, Previous, base_for, decode, encode
from reynctl.langgraph.view import Blob, pack, unpack

SERDE = JsonPlusSerializer()
versions = st.dictionaries(st.sampled_from("abcdef"), st.text(max_size=5), max_size=6)
checkpoints = st.fixed_dictionaries(
    {
        "v": st.integers(1, 2),
        "id": st.text(max_size=8),
        "ts": st.text(max_size=8),
        "channel_versions": versions,
        "versions_seen": st.dictionaries(st.sampled_from("xyz"), versions, max_size=3),
        "updated_channels": st.none() | st.lists(st.text(max_size=3), max_size=3),
    }
)


@given(checkpoints, checkpoints)
def test_a_diff_applied_to_its_base_gives_the_checkpoint(old: Any, new: Any) -> None:
    d = diff(old, new)
    assert d is not None
    assert apply_diff(old, d) == new


def test_a_value_json_cannot_hold_is_stored_whole() -> None:
    old = {"v": 1, "id": "a"}
    assert diff(old, {"v": 1, "id": "a", "pending_sends": (1, 2)}) is None


def _store(writes: list[list[int]]) -> tuple[dict[tuple[str, str, Any], Blob], int]:
    """Write successive versions of one list channel; returns the blobs and the deltas used."""
    blobs: dict[tuple[str, str, Any], Blob] = {}
    prev: Previous | None = None
    deltas = 0
    for version, value in enumerate(writes):
        enc = encode(SERDE, version, value, base_for(value, ("", "m", version), blobs, [prev]))
        r = enc.record
        blobs[("", "m", version)] = Blob(
            r["t"], r["b"], r.get("base"), r.get("depth", 0), r.get("acc", 0), r.get("whole", 0)
        )
        deltas += r.get("base") is not None
        prev = enc.previous
    return blobs, deltas


@given(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4), min_size=1, max_size=40))
def test_every_version_of_a_growing_list_reads_back(appends: list[list[int]]) -> None:
    value: list[int] = [7] * 50  # a first value large enough that deltas pay
    writes = [value]
    for extra in appends:
        value = [*value, *extra]  # a new list of the same items, as add_messages makes
        writes.append(value)
    blobs, _ = _store(writes)
    for version, expected in enumerate(writes):
        assert decode(SERDE, blobs, ("", "m", version)) == (True, expected)


def test_appends_are_deltas_and_whole_values_come_back_as_they_add_up() -> None:
    value = list(range(20))
    writes = [value]
    for i in range(300):
        value = [*value, i]
        writes.append(value)
    blobs, deltas = _store(writes)
    wholes = len(writes) - deltas
    assert 1 < wholes < deltas  # mostly deltas, and a whole value now and then
    # Between two whole values, the deltas add up to less than the first one.
    for b in blobs.values():
        assert b.depth <= MAX_DEPTH and b.acc < b.whole
    # A list that is not an extension (an item replaced) is written whole.
    replaced = [-1, *value[1:]]
    prev = Previous(99, value, 0, 0, 10_000)
    blobs[("", "m", 99)] = Blob("json", "", None, 0, 0, 10_000)
    assert base_for(replaced, ("", "m", 1000), blobs, [prev]) is None
    assert base_for([*value, 1], ("", "m", 1000), blobs, [prev]) is prev


def test_a_delta_extends_the_longest_stored_base_it_begins_with() -> None:
    items = [object() for _ in range(6)]
    blobs = {("", "m", v): Blob("json", "", None, 0, 0, 10_000) for v in (1, 2)}
    short, long = Previous(1, items[:2], 0, 0, 10_000), Previous(2, items[:4], 0, 0, 10_000)
    gone = Previous(3, items[:5], 0, 0, 10_000)  # not stored on the lineage (a rewind took it)
    other = Previous(2, [object()], 0, 0, 10_000)  # stored, but other items
    assert base_for(items, ("", "m", 4), blobs, [short, None, long, gone, other]) is long
    assert base_for(items, ("", "m", 4), blobs, [gone, other]) is None
    assert base_for(items, ("", "x", 4), blobs, [long]) is None  # another channel's version
    assert base_for("text", ("", "m", 4), blobs, [long]) is None
    # A version put again is stored whole: as a delta its chain could run back through it.
    assert base_for(items, ("", "m", 2), blobs, [short, long]) is None


def test_a_version_put_again_after_a_later_one_reads_back() -> None:
    """v3 is a delta of v2; v2 put again (a retried put) must not become a delta of v3."""
    v1 = list(range(50))
    v2 = [*v1, 50]
    blobs, _ = _store([v1, v2, list(v2)])  # versions 0, 1, 2: 2 extends 1 by nothing
    prev = Previous(2, list(v2), blobs[("", "m", 2)].depth, blobs[("", "m", 2)].acc, 10_000)
    assert base_for(v2, ("", "m", 1), blobs, [prev]) is None
    enc = encode(SERDE, 1, v2, None)
    r = enc.record
    blobs[("", "m", 1)] = Blob(r["t"], r["b"], r.get("base"), 0, 0, r.get("whole", 0))
    assert decode(SERDE, blobs, ("", "m", 1)) == (True, v2)
    assert decode(SERDE, blobs, ("", "m", 2)) == (True, v2)


def test_a_chain_of_deltas_back_to_itself_reads_as_gone() -> None:
    """As a saver before base_for refused it wrote a version put again: no endless walk."""
    blobs = {
        ("", "m", 1): Blob("json", "", 1, 1, 0, 10_000),
        ("", "m", 2): Blob("json", "", 3, 1, 0, 10_000),
        ("", "m", 3): Blob("json", "", 2, 1, 0, 10_000),
    }
    assert decode(SERDE, blobs, ("", "m", 1)) == (False, None)
    assert decode(SERDE, blobs, ("", "m", 2)) == (False, None)


def test_packed_bytes_round_trip() -> None:
    data = bytes(range(256)) * 2
    assert unpack(pack(data)) == data


def test_a_large_value_is_stored_compressed_and_a_packed_one_still_reads() -> None:
    texts = [f"message {i}: the CI check on module {i % 37} keeps failing" for i in range(200)]
    enc = encode(SERDE, 1, texts, None)
    t, b = enc.record["t"], enc.record["b"]
    type_, data = SERDE.dumps_typed(texts)
    assert t == f"z1:{type_}" and len(b) < len(data) / 4
    assert enc.record["whole"] == len(data)  # the policy counts serialized bytes, as before
    # A delta is compressed too; a tiny one is packed as before.
    more = [*texts, *(f"{t} again" for t in texts[:40])]
    delta = encode(SERDE, 2, more, enc.previous).record
    assert delta["t"].startswith("z1:") and delta["base"] == 1
    small = encode(SERDE, 3, [*more, "ok"], Previous(2, more, 1, 1, 10**9)).record  # < ZIP_MIN
    assert small["t"] == type_ and unpack(small["b"]) == SERDE.dumps_typed(["ok"])[1]
    blobs = {
        ("", "m", r["v"]): Blob(r["t"], r["b"], r.get("base"), r.get("depth", 0))
        for r in (enc.record, delta, small)
    }
    assert decode(SERDE, blobs, ("", "m", 3)) == (True, [*more, "ok"])
    # Written by an older saver: the same value packed whole.
    blobs[("", "m", 1)] = Blob(type_, pack(data))
    assert decode(SERDE, blobs, ("", "m", 2)) == (True, more)

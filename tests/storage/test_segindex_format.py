"""The segment index format and the catalog pieces it fills, as pure code (no files).

A chunk round-trips exactly (any agents, past 256 too, any labels, any
workspace.files seqs); a catalog
extended by chunks equals one fed entry by entry; and a chunk whose checksums
are right but whose content does not hang together is refused, never loaded,
and so is a chunk of version 1 (it does not list the workspace.files seqs).
"""

from __future__ import annotations

import struct
import zlib
from array import array

import msgspec
import pytest
from helpers import frame_chunk
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.catalog import KINDS, Catalog
from reynd.core.labels import Labels, Packed
from reynd.protocol.events import GenerationKind
from reynd.storage.segindex import (
    HEADER_SIZE,
    INDEX_VERSION,
    Chunk,
    IndexUnusable,
    _Payload,
    decode_index,
    encode_chunk,
)

entries = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 299), st.floats(0, 2e9), st.text(max_size=9)),
    max_size=40,
)


def _entries(cat: Catalog) -> list[object]:
    return list(cat.newest_first())


@settings(max_examples=150, deadline=None)
@given(
    rows=entries,
    n_agents=st.sampled_from([1, 3, 256, 257, 300]),
    resets=st.lists(st.integers(0, 5), max_size=4),
    files=st.sets(st.integers(0, 100)),
    first=st.integers(2, 10**12),
)
def test_chunk_round_trip_and_catalog_extend(
    rows: list[tuple[GenerationKind, int, float, str]],
    n_agents: int,
    resets: list[int],
    files: set[int],
    first: int,
) -> None:
    agents = [f"agent-{k}-é" for k in range(n_agents)]
    count = 2 * len(rows) + 3

    def fill(cat: Catalog) -> Catalog:
        for i, (kind, agent, ts, label) in enumerate(rows):
            cat.add(first + 2 * i, kind, agents[agent % n_agents], ts, label)
        return cat

    source = fill(Catalog())
    reset_seqs = sorted({first + 1 + 2 * k for k in resets if 2 * k + 1 < count})
    chunk = Chunk(
        first,
        array("Q", range(0, 100 * count, 100)),
        100 * count,
        0xDEADBEEF,
        1.5,
        tuple((s, s - 1) for s in reset_seqs),
        source.columns(first, first + count - 1),
        array("Q", sorted(first + k for k in files if k < count)),
    )
    (back,) = decode_index(encode_chunk(chunk), first)
    assert back == chunk
    # Extending a catalog whose agent ids differ from the chunk's lists what adding each
    # entry would.
    extended, expected = Catalog(), Catalog()
    for cat in (extended, expected):
        cat.add(first - 1, "turn", "another agent", 0.0, "before")
    extended.extend(back.generations)
    assert _entries(extended) == _entries(fill(expected))


def test_labels_runs_of_both_kinds_read_back_and_pack() -> None:
    labels = Labels()
    labels.append("a")
    labels.extend_packed(Packed.pack(["bé", "", "c"]))
    labels.append("d")
    labels.append("e")
    labels.extend_packed(Packed.pack(["f"]))
    want = ["a", "bé", "", "c", "d", "e", "f"]
    assert [labels[i] for i in range(len(labels))] == want
    for a in range(len(want) + 1):
        for b in range(a, len(want) + 1):
            packed = labels.packed(a, b)
            assert [packed[i] for i in range(len(packed))] == want[a:b]
    with pytest.raises(IndexError):
        labels[len(want)]


def test_damaged_label_bytes_read_as_replacement_characters() -> None:
    packed = Packed(b"ok\xff", array("I", [2, 3]))
    assert [packed[0], packed[1]] == ["ok", "\ufffd"]


def _chunk_bytes(payload: object, first: int = 1, count: int = 1) -> bytes:
    """A chunk of this version with valid checksums around any payload."""
    return frame_chunk(payload, first, count, INDEX_VERSION)


GOOD = _Payload(offsets=memoryview(struct.pack("<Q", 0)), end=50, last_crc=1, last_ts=1.0)


def _one_generation(**changes: object) -> _Payload:
    """GOOD with one valid generation at seq 1, then `changes`."""
    gen = msgspec.structs.replace(
        GOOD,
        gen_seqs=struct.pack("<Q", 1),
        gen_kinds=b"\0",
        gen_agents=b"\0",
        gen_times=struct.pack("<d", 0),
        agents=["a"],
        label_ends=struct.pack("<I", 0),
    )
    return msgspec.structs.replace(gen, **changes)


def _two(**changes: object) -> _Payload:
    """GOOD with two records, then `changes`."""
    two = msgspec.structs.replace(GOOD, offsets=struct.pack("<2Q", 0, 20))
    return msgspec.structs.replace(two, **changes)


@pytest.mark.parametrize(
    ("payload", "first", "count", "why"),
    [
        (GOOD, 2, 1, "expected 1 onwards"),
        (GOOD, 1, 0, "expected 1 onwards"),
        (GOOD, 1, 2, "holds 1 offsets, not 2"),
        (msgspec.structs.replace(GOOD, offsets=b"\0" * 7), 1, 1, "not a whole number"),
        (msgspec.structs.replace(GOOD, offsets=struct.pack("<Q", 8)), 1, 1, "starts at offset 8"),
        (msgspec.structs.replace(GOOD, end=0), 1, 1, "ends before its last record"),
        (msgspec.structs.replace(GOOD, resets=[(1, 1)]), 1, 1, "impossible reset"),
        (msgspec.structs.replace(GOOD, resets=[(2, 0)]), 1, 1, "impossible reset"),
        (_one_generation(), 1, 1, None),
        (_one_generation(gen_kinds=b"\3"), 1, 1, "unknown generation kind"),
        (_one_generation(gen_agents=b"\1"), 1, 1, "unknown agent"),
        (
            _one_generation(gen_agents=struct.pack("<I", 300), agents=[str(k) for k in range(300)]),
            1,
            1,
            "unknown agent",
        ),
        (_one_generation(gen_seqs=struct.pack("<Q", 9)), 1, 1, "outside its seqs"),
        (_one_generation(gen_times=b""), 1, 1, "differ in length"),
        (_one_generation(label_data=b"xy", label_ends=struct.pack("<I", 1)), 1, 1, "disagree"),
        (msgspec.structs.replace(GOOD, file_seqs=struct.pack("<Q", 1)), 1, 1, None),
        (msgspec.structs.replace(GOOD, file_seqs=b"\0" * 9), 1, 1, "not a whole number"),
        (msgspec.structs.replace(GOOD, file_seqs=struct.pack("<Q", 2)), 1, 1, "out of order"),
        (msgspec.structs.replace(GOOD, file_seqs=struct.pack("<Q", 0)), 1, 1, "or range"),
        (_two(file_seqs=struct.pack("<2Q", 2, 1)), 1, 2, "out of order or range"),
        (_two(file_seqs=struct.pack("<2Q", 1, 1)), 1, 2, "out of order or range"),
        (_two(file_seqs=struct.pack("<2Q", 1, 2)), 1, 2, None),
    ],
)
def test_checksummed_nonsense_is_refused(
    payload: _Payload, first: int, count: int, why: str | None
) -> None:
    if why is None:  # the control: the same payload, sound
        assert len(decode_index(_chunk_bytes(payload, first, count), 1)) == 1
        return
    with pytest.raises(IndexUnusable, match=why):
        decode_index(_chunk_bytes(payload, first, count), 1)


def test_header_damage_and_tears_are_refused() -> None:
    data = _chunk_bytes(GOOD)
    assert len(decode_index(data, 1)) == 1
    with pytest.raises(IndexUnusable, match="torn chunk header"):
        decode_index(data[: HEADER_SIZE - 1], 1)
    with pytest.raises(IndexUnusable, match="torn chunk at"):
        decode_index(data[:-1], 1)
    with pytest.raises(IndexUnusable, match="bad magic"):
        decode_index(b"X" + data[1:], 1)
    with pytest.raises(IndexUnusable, match="does not decode"):
        decode_index(_chunk_bytes([1, 2]), 1)


def test_a_version_1_chunk_is_refused_saying_why() -> None:
    """Version 1 (before workspace rewind was tied to the WAL) has no `file_seqs`: what it
    lists is right but incomplete, so the segment is scanned (tests/storage/test_segment_index.py
    shows the rest: the same store, and the index written again as version 2)."""
    v1 = {k: v for k, v in msgspec.structs.asdict(GOOD).items() if k != "file_seqs"}
    assert INDEX_VERSION == 5
    assert len(decode_index(frame_chunk(v1, 1, 1, 2), 1)) == 1  # the same payload, sound
    with pytest.raises(IndexUnusable, match="version 1, written before the index listed"):
        decode_index(frame_chunk(v1, 1, 1, 1), 1)


def test_a_version_2_chunk_is_still_used_and_a_version_3_one_too() -> None:
    """Version 3 (issue 24) describes the same payload as 2: a chunk written before it is
    complete (its writer wrote no reset record with a reason), so it is used as it is."""
    payload = msgspec.structs.asdict(GOOD)
    two = decode_index(frame_chunk(payload, 1, 1, 2), 1)
    three = decode_index(frame_chunk(payload, 1, 1, 3), 1)
    assert two == three and len(two) == 1


def test_a_version_4_chunk_is_used_as_it_is_and_version_5_is_deflated() -> None:
    """Migration: version 5 (issue 29) deflates the payload; the version 4 chunks an older
    reynd wrote (the msgpack as it is) read the same, with no rescan."""
    payload = msgspec.structs.asdict(_one_generation())
    four = frame_chunk(payload, 1, 1, 4)
    five = frame_chunk(payload, 1, 1, 5)
    assert decode_index(four, 1) == decode_index(five, 1)
    then = msgspec.structs.replace(GOOD, offsets=memoryview(struct.pack("<Q", 50)), end=90)
    assert decode_index(four + frame_chunk(then, 2, 1, 5), 1)[1].first == 2  # mixed in a file
    written = encode_chunk(decode_index(four, 1)[0])
    assert struct.unpack_from("<I", written, 8)[0] == 5
    assert zlib.decompress(written[HEADER_SIZE:]) == msgspec.msgpack.encode(_Payload(**payload))


def test_a_version_5_payload_that_does_not_inflate_makes_the_index_unusable() -> None:
    body = b"not a deflate stream"
    head = struct.pack("<8sIQQQI", b"REYNSIDX", 5, 1, 1, len(body), zlib.crc32(body))
    with pytest.raises(IndexUnusable, match="does not inflate"):
        decode_index(head + struct.pack("<I", zlib.crc32(head)) + body, 1)

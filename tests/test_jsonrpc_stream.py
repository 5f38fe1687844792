"""The client session cuts a byte stream into messages, however the reads cut it.

A message split across any number of reads comes out whole and once; the
session searches only the bytes it had not searched (a big `wal.read` page
arrives in many reads).
"""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from reynctl.errors import ProtocolViolation
from reynctl.jsonrpc import Response, Session


@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=30), st.data())
def test_messages_come_out_whole_however_the_stream_is_cut(
    sizes: list[int], data: st.DataObject
) -> None:
    session = Session()
    ids = [session.request("wal.read", {})[0] for _ in sizes]
    stream = b"".join(
        msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": {"pad": "z" * size}}) + b"\n"
        for rid, size in zip(ids, sizes, strict=True)
    )
    cuts = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=len(stream) - 1))))
    got: list[Response] = []
    for lo, hi in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += [e for e in session.receive(stream[lo:hi]) if isinstance(e, Response)]
    assert [r.id for r in got] == ids
    assert [len(msgspec.json.decode(r.raw)["pad"]) for r in got] == sizes
    assert not session.partial


def test_a_read_that_starts_with_the_end_of_a_message() -> None:
    session = Session()
    ids = [session.request("daemon.status", {})[0] for _ in range(3)]
    lines = [msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": {}}) for rid in ids]
    got = []
    for line in lines:  # each newline arrives first in the next read
        got += session.receive(line)
        got += session.receive(b"\n")
    assert [e.id for e in got if isinstance(e, Response)] == ids


def test_the_lines_after_one_that_does_not_parse_are_still_read() -> None:
    session = Session()
    ids = [session.request("daemon.status", {})[0] for _ in range(2)]
    good = [msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": {}}) + b"\n" for rid in ids]
    try:
        session.receive(b"not json\n" + good[0] + good[1])
    except ProtocolViolation:
        pass
    else:
        raise AssertionError("a line that is not JSON-RPC must be refused")
    got = session.receive(b"")
    assert [e.id for e in got if isinstance(e, Response)] == ids

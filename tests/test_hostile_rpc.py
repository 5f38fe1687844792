"""Hostile JSON-RPC input against the real daemon: it survives, others are served, nothing moves.

Every case here once killed, bricked or stalled the daemon (issue 10): deep
nesting raised RecursionError out of the decoder and took the server down;
an acknowledged deeply nested record made every restart fail; a 1 MiB batch
of `1`s produced a ~100 MB reply and stalled every client; subscriptions
piled up without bound; invalid UTF-8 inside params was an internal error
with a logged traceback; an integer past 64 bits (or a token sum past it)
was acknowledged, then killed the daemon at the next snapshot, and again
after every restart.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reynd.protocol.limits import MAX_COUNT, MAX_DEPTH
from reynd.protocol.methods import METHODS
from reynd.storage.framing import encode_frame
from reynd.storage.wal import Wal
from tests.harness import Client, Daemon, short_tempdir, start_daemon
from tests.runtime_helpers import wait_until

LIMIT_EXCEEDED = -32019
LEGACY_DEPTH = 978
MiB = 1024 * 1024
# Room for a 10^6-level nesting in one line, so that it reaches the decoder's door.
CONFIG = f"max_message_bytes = {8 * MiB}\n"


def write_history(c: Client, agents: int, messages: int, text: str = "hello " * 50) -> None:
    for i in range(agents):
        c.call("wal.append", {"agent": f"a{i}", "kind": "agent.created"})
    for j in range(messages):
        data = {"message_id": f"m{j}", "text": text}
        c.call("wal.append", {"agent": f"a{j % agents}", "kind": "message.received", "data": data})


@pytest.fixture(scope="module")
def hostile() -> Iterator[Daemon]:
    """One daemon for the module, with history to read; tests must leave its head alone."""
    with short_tempdir() as path:
        d = start_daemon(path, config=CONFIG)
        with d.connect() as c:
            write_history(c, 3, 17)
        yield d
        d.stop()


def status(d: Daemon) -> dict[str, Any]:
    result: dict[str, Any] = d.call("daemon.status")
    return result


def rss_kib(d: Daemon, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{d.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {d.pid}")


def assert_limit(reply: dict[str, Any], name: str) -> None:
    error = reply["error"]
    assert error["code"] == LIMIT_EXCEEDED, reply
    assert error["data"]["limit_name"] == name, reply
    assert str(error["data"]["limit"]) in error["message"]


def nested(levels: int, inner: bytes = b"1", kind: str = "list") -> bytes:
    if kind == "list":
        return b"[" * levels + inner + b"]" * levels
    return b'{"a":' * levels + inner + b"}" * levels


def deep_lines(n: int) -> dict[str, bytes]:
    """A message nesting `n` levels in each place a message can nest."""
    req = b'{"jsonrpc":"2.0","method":"daemon.status"'
    return {
        "open brackets": b"[" * n,
        "batch": nested(n),
        "objects": nested(n, kind="dict"),
        "params": req + b',"id":1,"params":{"x":' + nested(n) + b"}}",
        "id": req + b',"id":' + nested(n) + b"}",
        "unknown member": req + b',"id":1,"junk":' + nested(n, kind="dict") + b"}",
        "notification": req + b',"params":' + nested(n) + b"}",
        "wal.append data": b'{"jsonrpc":"2.0","method":"wal.append","id":1,"params":'
        b'{"agent":"deep","kind":"agent.created","data":{"options":'
        + nested(n, kind="dict")
        + b"}}}",
    }


@pytest.mark.parametrize("n", [10**2, 985, 10**4, 10**5, 10**6])
def test_deep_nesting_is_refused_and_the_daemon_keeps_serving(hostile: Daemon, n: int) -> None:
    head = status(hostile)["head"]
    with hostile.connect() as attacker, hostile.connect() as good:
        for shape, line in deep_lines(n).items():
            attacker.send(line + b"\n")
            reply = attacker.recv_json()
            assert_limit(reply, "max_depth")
            assert reply["id"] is None, shape
            assert good.call("daemon.status")["head"] == head, shape
    assert status(hostile)["head"] == head


def test_depth_limit_is_exact_and_what_passes_survives_a_restart(short_tmp: Path) -> None:
    """Nesting up to the limit is accepted, durable and readable after a restart; deeper is not."""
    d = start_daemon(short_tmp)
    try:
        # message(1) > params(2) > data(3) > options(4) > k lists: depth 4 + k.
        fits = MAX_DEPTH - 4
        ok: dict[str, Any] = {"agent": "deep", "kind": "agent.created", "data": {"options": {}}}
        ok["data"]["options"] = {"x": json.loads(nested(fits))}
        with d.connect() as c:
            seq = c.call("wal.append", ok)["seq"]
            too_deep = json.loads(json.dumps(ok))
            too_deep["agent"] = "deeper"
            too_deep["data"]["options"] = {"x": json.loads(nested(fits + 1))}
            line = {"jsonrpc": "2.0", "method": "wal.append", "id": 1, "params": too_deep}
            c.send_json(line)
            assert_limit(c.recv_json(), "max_depth")  # id null: refused before decoding
            # The case: ~978 levels, acknowledged before, bricking every restart.
            raw = deep_lines(978)["wal.append data"]
            c.send(raw + b"\n")
            assert_limit(c.recv_json(), "max_depth")
            assert c.call("daemon.status")["head"] == seq
    finally:
        d.stop()
    d = start_daemon(short_tmp)
    try:
        options = d.call("state.get", {"agent": "deep"})["agents"]["deep"]["options"]
        assert options == ok["data"]["options"]
    finally:
        d.stop()


def test_a_deep_record_acknowledged_by_an_older_version_does_not_brick_the_state_dir(
    short_tmp: Path,
) -> None:
    """Start-up never fails on a record that was acknowledged: one written before the limit."""
    state_dir = short_tmp / "state"
    # As deep as the old door let through (the record: ~978 levels under
    # `options`), written as bytes: too deep for this process's own decoders.
    record = (
        b'{"kind":"agent.created","seq":1,"ts":1.0,"agent":"o","options":'
        + nested(LEGACY_DEPTH, kind="dict")
        + b"}"
    )
    wal, _ = Wal.open(state_dir / "state" / "wal", 64 * MiB, lambda e, n: None)
    try:
        wal.write_batch([(1, encode_frame(record))])
        wal.sync()
    finally:
        wal.close()
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        assert d.call("daemon.status")["head"] == 1
        with d.connect() as c:
            c.send_json(
                {"jsonrpc": "2.0", "method": "state.get", "id": 1, "params": {"agent": "o"}}
            )
            raw = c.recv_line()  # too deep for this process's json module: checked as bytes
        assert raw.startswith(b'{"jsonrpc":"2.0","result":')
        assert raw.count(b'{"a":') == LEGACY_DEPTH
        d.call("agents.create", {"name": "new"})  # and it keeps working
    finally:
        d.stop()


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"daemon.status","id":1,"params":{"x":"\xff\xfe"}}',
        b'{"jsonrpc":"2.0","method":"wal.append","id":1,"params":{"agent":"a","kind":'
        b'"agent.created","data":{"options":{"x":"\xc3\x28"}}}}',
        b'{"jsonrpc":"2.0","method":"state.get","id":1,"params":["\xed\xa0\x80"]}',
        b'{"jsonrpc":"2.0","method":"daemon.\xff","id":1}',
        b'{"jsonrpc":"2.0","method":"daemon.status","id":"\xff"}',
        b'[{"jsonrpc":"2.0","method":"daemon.status","id":1,"params":{"x":"\xff"}}]',
    ],
)
def test_invalid_utf8_is_a_parse_error_and_logs_no_traceback(hostile: Daemon, line: bytes) -> None:
    log_before = len(hostile.stderr())
    head = status(hostile)["head"]
    with hostile.connect() as c:
        c.send(line + b"\n")
        reply = c.recv_json()
        if isinstance(reply, list):
            (reply,) = reply
        assert reply["error"]["code"] == -32700, reply
        assert "UTF-8" in reply["error"]["message"]
    assert status(hostile)["head"] == head
    logged = hostile.stderr()[log_before:]
    assert "internal_error" not in logged and "Traceback" not in logged, logged


def test_a_huge_batch_is_refused_whole_with_bounded_memory(hostile: Daemon) -> None:
    head = status(hostile)["head"]
    peak_before = rss_kib(hostile, "VmHWM")
    line = b"[" + b"1," * (MiB // 2 - 1) + b"1]"  # 1 MiB, 524,288 members
    with hostile.connect() as c:
        for _ in range(5):
            c.send(line + b"\n")
            reply = c.recv_json()
            assert isinstance(reply, dict), "one error object, not a reply per member"
            assert_limit(reply, "max_batch_members")
    assert status(hostile)["head"] == head
    # Before: a ~100 MB reply and RSS 42 -> 472 MiB. Decoding the members costs
    # some transient memory, never a reply per member.
    assert rss_kib(hostile, "VmHWM") - peak_before < 64 * 1024


def test_a_batch_reply_past_the_buffer_is_streamed_whole_and_in_order(hostile: Daemon) -> None:
    status_line = {"jsonrpc": "2.0", "method": "daemon.status"}
    discover = {"jsonrpc": "2.0", "method": "rpc.discover"}  # ~70 KB of reply each
    batch = [
        {**(discover if i % 50 == 1 else status_line), "id": i} if i % 7 else status_line
        for i in range(1000)
    ]
    with hostile.connect() as c:
        c.send(json.dumps(batch).encode() + b"\n")
        line = c.recv_line()
        # Past the connection's budget of unsent replies: streamed.
        assert len(line) > 1024 * 1024
        replies = json.loads(line)
        assert [r["id"] for r in replies] == [i for i in range(1000) if i % 7]
        for r in replies:
            if r["id"] % 50 == 1:
                assert r["result"]["openrpc"]
            else:
                assert r["result"]["pid"] == hostile.pid
        assert c.call("daemon.status")["pid"] == hostile.pid  # the connection goes on


def test_a_long_batch_yields_to_other_clients(short_tmp: Path) -> None:
    """A batch at the member limit runs member by member; another client is answered meanwhile."""
    d = start_daemon(short_tmp)
    try:
        with d.connect() as c:
            write_history(c, 4, 200, "x" * 1000)
        _long_batch_yields(d)
    finally:
        d.stop()


def _long_batch_yields(d: Daemon) -> None:
    head = status(d)["head"]
    # Each member is real work that never waits for anything and writes nothing
    # (the tip's state, ~200 KB, encoded for a notification): only the
    # dispatcher itself can yield between them.
    read: dict[str, Any] = {"jsonrpc": "2.0", "method": "state.get", "params": {}}
    batch: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "method": "subscribe", "params": {"topics": ["records"]}, "id": 0}
    ]
    batch += [read] * 998 + [{"jsonrpc": "2.0", "method": "daemon.status", "id": 1}]
    with d.connect() as attacker, d.connect() as good:
        attacker.send(json.dumps(batch).encode() + b"\n")
        # The batch has begun once its first member subscribed.
        wait_until(lambda: good.call("daemon.status")["subscriptions"] > 0, "batch started")
        assert good.call("state.get", {})["seq"] == head
        # ... and it is still running: its reply line has not ended yet.
        attacker.sock.setblocking(False)
        try:
            pending = attacker.sock.recv(1 << 20, socket.MSG_PEEK)
        except BlockingIOError:
            pending = b""
        attacker.sock.setblocking(True)
        assert b"\n" not in pending, "the batch finished before the other client was answered"
        attacker.sock.settimeout(120)
        replies = attacker.recv_json()
        assert [r["id"] for r in replies] == [0, 1]
        assert all("result" in r for r in replies)
    wait_until(lambda: status(d)["subscriptions"] == 0, "subscriptions released")


def test_subscriptions_per_connection_are_capped_and_released_on_close(hostile: Daemon) -> None:
    head = status(hostile)["head"]
    rss_before = rss_kib(hostile)
    sub = b'{"jsonrpc":"2.0","method":"subscribe","params":{"topics":["records"]},"id":%d}\n'
    for _ in range(3):
        with hostile.connect() as c:
            # Sent by a thread while this one reads: neither side's buffer fills up.
            flood = b"".join(sub % i for i in range(10_000))
            sender = threading.Thread(target=c.send, args=(flood,), daemon=True)
            sender.start()
            replies = [c.recv_json() for _ in range(10_000)]
            sender.join()
            ok = [r for r in replies if "result" in r]
            refused = [r for r in replies if "error" in r]
            assert len(ok) == 64 and len(refused) == 10_000 - 64
            assert_limit(refused[0], "max_subscriptions_per_connection")
            assert status(hostile)["subscriptions"] == 64
        wait_until(lambda: status(hostile)["subscriptions"] == 0, "subscriptions released")
    assert status(hostile)["head"] == head
    assert rss_kib(hostile) - rss_before < 32 * 1024


# -- integers ----------------------------------------------------------------------------

# Past Python's 4300-digit limit for int(): the door must refuse it without parsing it.
HUGE = b"9" * 5000
BIG_INTS = [
    b"9223372036854775808",  # 2**63
    b"-9223372036854775809",
    b"18446744073709551616",  # 2**64: not even msgpack's unsigned range holds it
    b"-" + b"1" * 40,
    HUGE,
]
SNAPSHOT_EVERY_COMMIT = "[storage]\nsnapshot_min_bytes = 0\n"
STATUS_REQUEST = {"jsonrpc": "2.0", "method": "daemon.status"}


def with_int(template: Any, number: bytes) -> bytes:
    """`template` as one JSON line, each "N" string in it replaced by the integer `number`."""
    return json.dumps(template).encode().replace(b'"N"', number)


def created(agent: str, options: Any) -> dict[str, Any]:
    return {"agent": agent, "kind": "agent.created", "data": {"options": options}}


def append_request(id: Any, params: Any, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "wal.append", "id": id, "params": params, **extra}


# Where a message can hold an integer, and the id its refusal is due.
BIG_PLACES: dict[str, tuple[Any, Any]] = {
    "options": (append_request(1, created("big", {"n": "N"})), 1),
    "nested": (append_request(2, created("big", {"a": [1, {"b": ["N"]}]})), 2),
    "a count": (
        append_request(3, {"agent": "big", "kind": "step.started", "data": {"step": "N"}}),
        3,
    ),
    "positional params": (append_request(4, ["big", "agent.created", {"options": ["N"]}]), 4),
    "agents.create": (
        {
            "jsonrpc": "2.0",
            "method": "agents.create",
            "id": 5,
            "params": {"name": "big", "options": {"n": "N"}},
        },
        5,
    ),
    "unknown member": (append_request("u", created("big", {}), junk="N"), "u"),
    "id": ({"jsonrpc": "2.0", "method": "daemon.status", "id": "N"}, None),
}


def test_an_integer_out_of_range_is_refused_before_anything_is_written(short_tmp: Path) -> None:
    """Anywhere in a message: -32019 with the id kept, nothing written, no traceback.

    Before: it was acknowledged, and the next snapshot (msgpack holds no more
    than 64 bits) killed the daemon, at every restart again.
    """
    d = start_daemon(short_tmp, config=SNAPSHOT_EVERY_COMMIT)
    try:
        head = status(d)["head"]
        with d.connect() as c:
            for number in BIG_INTS:
                for place, (template, reply_id) in BIG_PLACES.items():
                    c.send(with_int(template, number) + b"\n")
                    reply = c.recv_json()
                    assert_limit(reply, "integer_range")
                    assert reply["id"] == reply_id, (place, reply)
                    assert "send larger numbers as strings" in reply["error"]["message"]
                # Each batch member on its own; a notification gets no reply.
                template, _ = BIG_PLACES["options"]
                batch = [{**STATUS_REQUEST, "id": "ok"}, template, {**template, "id": None}]
                notification = {k: v for k, v in template.items() if k != "id"}
                c.send(with_int(batch, number) + b"\n" + with_int(notification, number) + b"\n")
                ok, refused, refused_null = c.recv_json()
                assert ok["id"] == "ok" and "result" in ok
                assert_limit(refused, "integer_range")
                assert refused["id"] == 1
                assert_limit(refused_null, "integer_range")
                assert refused_null["id"] is None
                assert c.call("daemon.status")["head"] == head  # the notification said nothing
            # The bounds themselves are integers like any other, and a snapshot holds them.
            edges = {"max": "N", "min": -(2**63), "float": 1e300}
            line = with_int(append_request(9, created("edges", edges)), b"9223372036854775807")
            c.send(line + b"\n")
            assert "result" in c.recv_json()
        wait_until(lambda: d.call("retention.get")["snapshots"] > 0, "a snapshot")
        options = d.call("state.get", {"agent": "edges"})["agents"]["edges"]["options"]
        assert options == {"max": 2**63 - 1, "min": -(2**63), "float": 1e300}
        logged = d.stderr()
        assert "internal_error" not in logged and "Traceback" not in logged
    finally:
        d.stop()
    d = start_daemon(short_tmp)
    try:
        assert d.call("state.get", {"agent": "edges"})["agents"]["edges"]["options"] == options
    finally:
        d.stop()


def test_counts_are_bounded_and_sums_saturate(short_tmp: Path) -> None:
    """Per record up to MAX_COUNT (-32602 naming the field past it); the agent's sums stop there.

    Before: counts up to 2**63 - 1 were taken and summed, and a sum past 2**64
    killed the snapshotter.
    """
    d = start_daemon(short_tmp, config=SNAPSHOT_EVERY_COMMIT)
    try:
        with d.connect() as c:

            def append(kind: str, **data: Any) -> dict[str, Any]:
                return c.request("wal.append", {"agent": "ext", "kind": kind, "data": data})

            assert "result" in append("agent.created")
            assert "result" in append("message.received", message_id="m", text="hi")
            assert "result" in append("turn.started", turn_id="t", message_id="m")
            for field, value in [
                ("tokens_in", MAX_COUNT + 1),
                ("tokens_out", 2**63 - 1),
                ("step", 2**62),
                ("tokens_in", -1),
            ]:
                data = {"turn_id": "t", "step": 0, field: value}
                error = append("step.committed", **data)["error"]
                assert error["code"] == -32602, error
                assert error["data"]["field"] == f"data.{field}", error
            for step in range(3):
                reply = append("step.committed", turn_id="t", step=step, tokens_in=MAX_COUNT)
                assert "result" in reply, reply
            head = c.call("daemon.status")["head"]
        agent = d.call("state.get", {"agent": "ext"})["agents"]["ext"]
        assert (agent["tokens_in"], agent["tokens_out"]) == (MAX_COUNT, 0)
        wait_until(lambda: d.call("retention.get")["snapshots"] > 0, "a snapshot")
    finally:
        d.stop()
    d = start_daemon(short_tmp)
    try:
        assert d.call("daemon.status")["head"] == head
        assert d.call("state.get", {"agent": "ext"})["agents"]["ext"] == agent
    finally:
        d.stop()


def legacy_record(seq: int, kind: str, **fields: Any) -> bytes:
    """A record as the previous release wrote it; "N" strings become a 4000-digit integer."""
    record = {"kind": kind, "seq": seq, "ts": float(seq), **fields}
    return json.dumps(record).encode().replace(b'"N"', b"8" * 4000)


def message(message_id: str) -> dict[str, Any]:
    data = {"message_id": message_id, "text": "x" * 100}
    return {"agent": "old", "kind": "message.received", "data": data}


def test_huge_integers_acknowledged_by_an_older_version_do_not_brick_the_state_dir(
    short_tmp: Path,
) -> None:
    """Start-up and replay take them; snapshots are skipped (logged) while the state holds one.

    Counts are clamped by the reducer, so only free-form values (options)
    keep a state from a snapshot; once replaced, snapshots resume.
    """
    state_dir = short_tmp / "state"
    big = 2**70
    records = [
        legacy_record(1, "agent.created", agent="old", executor="external", options={"n": "N"}),
        legacy_record(2, "agent.created", agent="neg", executor="external", options={"n": -big}),
        legacy_record(3, "message.received", agent="old", message_id="m", text="hi"),
        legacy_record(4, "turn.started", agent="old", turn_id="t", message_id="m"),
        legacy_record(5, "step.started", agent="old", turn_id="t", step=big),
        legacy_record(6, "step.committed", agent="old", turn_id="t", step=big, tokens_in=big),
        legacy_record(7, "step.committed", agent="old", turn_id="t", step=1, tokens_out=2**64 - 1),
        legacy_record(8, "step.committed", agent="old", turn_id="t", step=2, tokens_out=2**64 - 1),
    ]
    wal, _ = Wal.open(state_dir / "state" / "wal", 64 * MiB, lambda e, n: None)
    try:
        wal.write_batch([(i + 1, encode_frame(r)) for i, r in enumerate(records)])
        wal.sync()
    finally:
        wal.close()
    d = start_daemon(short_tmp, state_dir=state_dir, config=SNAPSHOT_EVERY_COMMIT)
    try:
        assert d.call("daemon.status")["head"] == len(records)
        agents = d.call("state.get")["agents"]
        assert agents["old"]["options"] == {"n": int("8" * 4000)}
        assert agents["neg"]["options"] == {"n": -big}
        assert (agents["old"]["tokens_in"], agents["old"]["tokens_out"]) == (MAX_COUNT, MAX_COUNT)
        steps = agents["old"]["pending_chains"][0]["steps"]
        assert [s["step"] for s in steps] == [MAX_COUNT, 1, 2]
        assert steps[0]["tokens_in"] == MAX_COUNT
        with d.connect() as c:
            for i in range(5):
                c.call("wal.append", message(f"a{i}"))
            wait_until(lambda: "snapshot.skipped" in d.stderr(), "the skipped snapshot logged")
            assert "agent 'old' holds an integer msgpack cannot hold" in d.stderr()
            # Both values replaced: the state is one a snapshot holds again.
            for name in ("old", "neg"):
                configured: dict[str, Any] = {
                    "agent": name,
                    "kind": "agent.configured",
                    "data": {"options": {}},
                }
                c.call("wal.append", configured)
            i = 0
            while c.call("retention.get")["snapshots"] == 0:
                c.call("wal.append", message(f"b{i}"))  # tries grow apart: append until one is due
                i += 1
                assert i < 200, "no snapshot after the values were replaced"
            head = c.call("daemon.status")["head"]
            state = c.call("state.get")
        assert "Traceback" not in d.stderr()
    finally:
        d.stop()
    d = start_daemon(short_tmp, state_dir=state_dir)
    try:
        assert d.call("daemon.status")["head"] == head
        assert d.call("state.get") == state
        assert d.call("state.get", {"seq": 1})["agents"]["old"]["options"] == {"n": int("8" * 4000)}
    finally:
        d.stop()


# -- fuzzing ----------------------------------------------------------------------------

_READ_ONLY = sorted(name for name, d in METHODS.items() if not d.mutating)
_MUTATING = sorted(name for name, d in METHODS.items() if d.mutating)

# Integers past int64 (and one past Python's 4300-digit limit, spliced in by `dumps`).
_HUGE_MARK = "\u2622huge\u2622"
_big = (
    st.integers(min_value=2**63, max_value=2**200)
    | st.integers(min_value=-(2**200), max_value=-(2**63) - 1)
    | st.just(_HUGE_MARK)
)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | _big
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def dumps(value: Any) -> bytes:
    """JSON, with each huge-integer mark (a string) replaced by 5000 digits."""
    return json.dumps(value).encode().replace(json.dumps(_HUGE_MARK).encode(), HUGE)


@st.composite
def _request(draw: st.DrawFn) -> Any:
    """Request-shaped: read-only methods with any params; writes only with params that fail."""
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "1.0", 2]))}
    if draw(st.booleans()):
        msg["method"] = draw(st.sampled_from(_READ_ONLY) | st.text(max_size=12))
        if draw(st.booleans()):
            msg["params"] = draw(_json)
    else:
        msg["method"] = draw(st.sampled_from(_MUTATING))
        # An unknown named param: refused before the handler runs, whatever else is there.
        msg["params"] = {
            **draw(st.dictionaries(st.text(max_size=8), _json, max_size=3)),
            "\u2603": 1,
        }
    if draw(st.booleans()):
        msg["id"] = draw(_json)
    return msg


_deep = st.builds(
    lambda n, kind, inner: nested(n, inner, kind),
    st.sampled_from([65, 200, 985, 5000, 100_000]),
    st.sampled_from(["list", "dict"]),
    st.sampled_from([b"1", b'"\\\\"', b'"]]]"', b"", b"[{"]),
)

_STATE_GET_AGENT = b'{"jsonrpc":"2.0","method":"state.get","id":1,"params":{"agent":"%s"}}'


@st.composite
def _big_append(draw: st.DrawFn) -> bytes:
    """A wal.append (or batch of them) that is valid but for one integer out of range."""
    big = draw(_big)
    where = draw(st.sampled_from(["options", "list", "id", "junk", "count"]))
    options: dict[str, Any] = draw(st.dictionaries(st.text(max_size=8), _json, max_size=3))
    params: dict[str, Any] = {"agent": draw(st.sampled_from(["f0", "f1"])), "kind": "agent.created"}
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": "wal.append", "id": 1, "params": params}
    if where == "options":
        options["\u2603"] = big
    elif where == "list":
        options["\u2603"] = [draw(_json), {"x": big}]
    elif where == "id":
        msg["id"] = big
    elif where == "junk":
        msg["junk"] = big
    elif where == "count":  # the agent never exists: refused at the door all the same
        params.update(kind="step.started", data={"turn_id": "t", "step": big})
    params.setdefault("data", {"options": options})
    if where != "id" and draw(st.booleans()):
        del msg["id"]  # a notification: no reply, nothing written
    line = dumps(msg)
    if draw(st.booleans()):
        line = b"[" + line + b',{"jsonrpc":"2.0","method":"daemon.status","id":2}]'
    return line


_line = st.one_of(
    st.binary(max_size=200),
    _deep,
    _json.map(dumps),
    _request().map(dumps),
    st.lists(_request() | _json, min_size=0, max_size=30).map(dumps),
    _big_append(),
    st.binary(max_size=60).map(
        lambda b: b'{"jsonrpc":"2.0","method":"state.get","id":1,"params":{"agent":"' + b + b'"}}'
    ),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line, min_size=1, max_size=8))
def test_fuzzed_lines_never_hurt_the_daemon(hostile: Daemon, lines: list[bytes]) -> None:
    """Whatever arrives, the daemon lives, a good client is answered and the head stays put."""
    head = status(hostile)["head"]
    with hostile.connect() as attacker, hostile.connect() as good:
        for line in lines:
            attacker.send(line.replace(b"\n", b" ") + b"\n")
        # The attacker's own connection still works: its probe is answered.
        attacker.send(b'{"jsonrpc":"2.0","method":"daemon.status","id":"probe"}\n')
        while True:
            reply = attacker.recv_json()
            for r in reply if isinstance(reply, list) else [reply]:
                assert r.get("error", {}).get("code") != -32603, r
            if isinstance(reply, dict) and reply.get("id") == "probe" and "result" in reply:
                break
        assert good.call("state.get", {})["seq"] == head
    assert status(hostile)["head"] == head


def test_after_the_attacks_memory_is_back_and_nothing_moved(hostile: Daemon) -> None:
    """Runs last in the module: the daemon that took every attack above is still whole."""
    st_ = status(hostile)
    assert st_["subscriptions"] == 0
    with hostile.connect() as c:
        assert c.call("generations.list", {})["generations"] == []
        assert sorted(c.call("state.get", {})["agents"]) == ["a0", "a1", "a2"]

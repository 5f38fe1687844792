"""JSON-RPC 2.0 conformance of the real daemon over its socket (spec section by section)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import structlog
import trio

from reynd.daemon.context import CallContext
from reynd.daemon.rpc import Dispatcher, ReplyBudget
from reynd.protocol import errors
from reynd.protocol.methods import METHODS
from tests.harness import Client, Daemon

STATUS = {"jsonrpc": "2.0", "method": "daemon.status"}


@pytest.fixture
def client(shared_daemon: Daemon) -> Iterator[Client]:
    c = shared_daemon.connect()
    yield c
    c.close()


SENTINEL = json.dumps({**STATUS, "id": "sentinel"}).encode() + b"\n"


def exchange(client: Client, raw: bytes | str) -> Any:
    """Send one line that is due one reply; return it, and check that nothing else follows."""
    data = raw.encode() if isinstance(raw, str) else raw
    client.send(data + b"\n")
    reply = client.recv_json()
    client.send(SENTINEL)
    assert client.recv_json()["id"] == "sentinel"
    return reply


def assert_no_reply(client: Client, raw: bytes | str) -> None:
    """Send one line that is due no reply: the reply to a request sent after it comes first."""
    data = raw.encode() if isinstance(raw, str) else raw
    client.send(data + b"\n" + SENTINEL)
    assert client.recv_json()["id"] == "sentinel"


def assert_error(reply: Any, code: int, id: Any = None) -> dict[str, Any]:
    assert isinstance(reply, dict), reply
    assert reply["jsonrpc"] == "2.0"
    assert "result" not in reply
    assert reply["id"] == id
    assert reply["error"]["code"] == code, reply
    assert isinstance(reply["error"]["message"], str)
    error: dict[str, Any] = reply["error"]
    return error


# -- requests -------------------------------------------------------------------


@pytest.mark.parametrize("id", [1, "abc", 0, -7, 2.5, None])
def test_request_echoes_id(client: Client, id: Any) -> None:
    reply = exchange(client, json.dumps({**STATUS, "id": id}))
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == id
    assert "error" not in reply
    assert {"head", "branch", "version", "pid"} <= set(reply["result"])


def test_params_by_name_by_position_null_and_absent(client: Client) -> None:
    params: Any
    for params in ({}, [], None):
        msg = {**STATUS, "id": 1, "params": params}
        assert "result" in exchange(client, json.dumps(msg))
    named = exchange(
        client, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "state.get", "params": {"seq": 0}})
    )
    positional = exchange(
        client, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "state.get", "params": [0]})
    )
    assert named["result"]["seq"] == positional["result"]["seq"] == 0


def test_whitespace_and_crlf_tolerated(client: Client) -> None:
    reply = exchange(client, '  { "jsonrpc" : "2.0", "method" : "daemon.status", "id" : 3 }\r')
    assert reply["id"] == 3 and "result" in reply


def test_unknown_top_level_members_are_ignored(client: Client) -> None:
    reply = exchange(client, json.dumps({**STATUS, "id": 4, "extra": True}))
    assert "result" in reply


def test_results_are_in_request_order_on_concurrent_ids(client: Client) -> None:
    ids = list(range(100, 150))
    client.send(b"".join(json.dumps({**STATUS, "id": i}).encode() + b"\n" for i in ids))
    got = sorted(client.recv_json()["id"] for _ in ids)
    assert got == ids


# -- notifications ---------------------------------------------------------------


@pytest.mark.parametrize(
    "msg",
    [
        STATUS,
        {"jsonrpc": "2.0", "method": "no.such.method"},
        {"jsonrpc": "2.0", "method": "state.get", "params": {"seq": "x"}},
        {"jsonrpc": "2.0", "method": "state.get", "params": {"bogus": 1}},
    ],
)
def test_notifications_get_no_reply_even_on_error(client: Client, msg: dict[str, Any]) -> None:
    assert_no_reply(client, json.dumps(msg))


# -- batches ----------------------------------------------------------------------


def test_batch_mixed(client: Client) -> None:
    batch = [
        {**STATUS, "id": "1"},
        STATUS,  # notification: no reply
        {"jsonrpc": "2.0", "method": "nope", "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "state.get", "params": {"seq": "x"}, "id": "3"},
    ]
    replies = exchange(client, json.dumps(batch))
    assert isinstance(replies, list) and len(replies) == 4
    assert replies[0]["id"] == "1" and "result" in replies[0]
    assert_error(replies[1], -32601, "2")
    assert_error(replies[2], -32600, None)
    assert_error(replies[3], -32602, "3")


def test_empty_batch_is_one_invalid_request(client: Client) -> None:
    reply = exchange(client, "[]")
    assert isinstance(reply, dict)
    assert_error(reply, -32600)


@pytest.mark.parametrize("batch", ["[1]", "[1,2,3]", '["x", null, true]'])
def test_invalid_batch_members_get_individual_errors(client: Client, batch: str) -> None:
    replies = exchange(client, batch)
    members = json.loads(batch)
    assert isinstance(replies, list) and len(replies) == len(members)
    for reply in replies:
        assert_error(reply, -32600)


def test_batch_of_notifications_gets_no_reply(client: Client) -> None:
    assert_no_reply(client, json.dumps([STATUS, STATUS, {**STATUS, "params": []}]))


def test_invalid_json_batch_is_one_parse_error(client: Client) -> None:
    raw = '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0"'
    assert_error(exchange(client, raw), -32700)


# -- parse error and invalid request ---------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
        b"not json",
        b"\xff\xfe\x00garbage",
        b'{"jsonrpc": "2.0", "method": "daemon.status", "id": 1',
    ],
)
def test_parse_error(client: Client, raw: bytes) -> None:
    error = assert_error(exchange(client, raw), -32700)
    assert error["data"]["error"] == "parse_error"


@pytest.mark.parametrize(
    ("msg", "reply_id"),
    [
        ({"jsonrpc": "1.0", "method": "daemon.status", "id": 5}, 5),
        ({"method": "daemon.status", "id": 5}, 5),
        ({"jsonrpc": 2.0, "method": "daemon.status", "id": 5}, 5),
        ({"jsonrpc": "2.0", "method": "daemon.status", "id": {"a": 1}}, None),
        ({"jsonrpc": "2.0", "method": "daemon.status", "id": [1]}, None),
        ({"jsonrpc": "2.0", "method": "daemon.status", "id": True}, None),
        ({"jsonrpc": "2.0", "id": 6}, 6),
        ({"jsonrpc": "2.0", "method": 1, "params": "bar"}, None),
        ({"jsonrpc": "2.0", "method": "daemon.status", "params": "bar", "id": 7}, 7),
        ({"jsonrpc": "2.0", "method": "daemon.status", "params": 3, "id": 8}, 8),
        ({"jsonrpc": "2.0", "method": "daemon.status", "params": True, "id": 9}, 9),
        ("a string", None),
        (42, None),
    ],
)
def test_invalid_request(client: Client, msg: Any, reply_id: Any) -> None:
    error = assert_error(exchange(client, json.dumps(msg)), -32600, reply_id)
    assert error["data"]["reason"]


@pytest.mark.parametrize(
    "raw",
    [
        '{"jsonrpc": "2.0", "method": "daemon.status", "id": 1e400}',
        '{"jsonrpc": "2.0", "method": "daemon.status", "id": -1e400, "params": {}}',
        '{"jsonrpc": "1.0", "method": "daemon.status", "id": 2, "params": [1e999]}',
        "1e400",
    ],
)
def test_a_number_no_double_holds_is_an_invalid_request(client: Client, raw: str) -> None:
    """Valid JSON (the grammar has no bound), but not a request this daemon can read."""
    error = assert_error(exchange(client, raw), -32600)
    assert "out of range" in error["data"]["reason"]
    (reply,) = exchange(client, f"[{raw}]")  # the same as a batch member
    assert_error(reply, -32600)


# -- method and params errors ------------------------------------------------------


def test_unknown_method(client: Client) -> None:
    error = assert_error(exchange(client, '{"jsonrpc":"2.0","method":"x.y","id":1}'), -32601, 1)
    assert error["data"]["method"] == "x.y"
    assert "rpc.discover" in error["message"]


@pytest.mark.parametrize(
    ("method", "params", "field", "says"),
    [
        ("state.get", {"seq": "ten"}, "seq", "must be an integer or null, not a string"),
        ("state.get", {"seq": -1}, "seq", "must be 0 or more"),
        (
            "state.get",
            {"sek": 1},
            "sek",
            "unknown field `sek` (state.get takes seq, agent, at, tag, history_last)",
        ),
        ("rewind", {}, "seq", "missing field `seq`: give exactly one of seq / tag / at / back"),
        ("generations.list", {"limit": 0}, "limit", "must be 1 or more"),
        ("subscribe", {"topics": ["nope"]}, "topics[0]", "'nope' is not one of the allowed"),
        ("state.get", ["ten"], "seq", "not a string"),
        ("agents.create", {"name": "a\nb"}, "name", "must be 1-64 ASCII letters, digits"),
    ],
)
def test_invalid_params_say_which_field_and_why(
    client: Client, method: str, params: Any, field: str, says: str
) -> None:
    msg = {"jsonrpc": "2.0", "method": method, "params": params, "id": 11}
    error = assert_error(exchange(client, json.dumps(msg)), -32602, 11)
    assert error["data"]["field"] == field
    assert says in error["data"]["reason"]
    assert field in error["message"] and says in error["message"]


def test_too_many_positional_params(client: Client) -> None:
    msg = {"jsonrpc": "2.0", "method": "daemon.status", "params": [1], "id": 12}
    error = assert_error(exchange(client, json.dumps(msg)), -32602, 12)
    assert error["data"]["got"] == 1
    msg = {"jsonrpc": "2.0", "method": "state.get", "params": [0, None, 3], "id": 13}
    assert_error(exchange(client, json.dumps(msg)), -32602, 13)


def test_application_error_has_stable_code_and_data(client: Client) -> None:
    msg = {"jsonrpc": "2.0", "method": "state.get", "params": {"seq": 10**9}, "id": 14}
    error = assert_error(exchange(client, json.dumps(msg)), errors.SeqOutOfRange.code, 14)
    assert error["data"]["error"] == "seq_out_of_range"


def test_rpc_discover_lists_every_method(client: Client) -> None:
    doc = client.call("rpc.discover")
    assert doc["openrpc"].startswith("1.")
    assert {m["name"] for m in doc["methods"]} == set(METHODS)


# -- internal errors (the dispatcher alone: nothing in the daemon fails on purpose) --


class Lines:
    """An rpc.Output that keeps what the dispatcher writes."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.closed = False
        self.budget = ReplyBudget(1024 * 1024)

    async def line(self, data: bytes) -> None:
        self.lines.append(data)

    @contextlib.asynccontextmanager
    async def pieces(self) -> AsyncIterator[Callable[[bytes], Awaitable[None]]]:
        parts: list[bytes] = []

        async def send(data: bytes) -> None:
            parts.append(data)

        yield send
        self.lines.append(b"".join(parts))


async def answer(dispatcher: Dispatcher, line: bytes, ctx: CallContext) -> bytes | None:
    """The dispatcher's one reply line to `line`, or None."""
    out = Lines()
    await dispatcher.handle(line, ctx, out)
    assert len(out.lines) <= 1
    return out.lines[0] if out.lines else None


async def test_internal_error_is_logged_not_leaked() -> None:
    async def broken(params: Any, ctx: CallContext) -> Any:
        raise ZeroDivisionError("secret detail")

    dispatcher = Dispatcher({"daemon.status": broken})
    ctx = CallContext(connection_id=1, peer=None)
    with structlog.testing.capture_logs() as logs:
        raw = await answer(dispatcher, b'{"jsonrpc":"2.0","method":"daemon.status","id":1}', ctx)
    assert raw is not None
    reply = json.loads(raw)
    error = assert_error(reply, -32603, 1)
    assert "daemon log" in error["message"]
    assert "secret" not in raw.decode() and "Traceback" not in raw.decode()
    logged = [e for e in logs if e["event"] == "rpc.internal_error"]
    assert logged and logged[0]["incident"] == error["data"]["incident"]
    assert logged[0]["exc_info"] is True
    # A notification that fails internally still gets no reply.
    assert await answer(dispatcher, b'{"jsonrpc":"2.0","method":"daemon.status"}', ctx) is None


async def test_unencodable_result_is_an_internal_error() -> None:
    async def odd(params: Any, ctx: CallContext) -> Any:
        return {"x": object()}

    dispatcher = Dispatcher({"daemon.status": odd})
    with structlog.testing.capture_logs():
        raw = await answer(
            dispatcher, b'{"jsonrpc":"2.0","method":"daemon.status","id":2}', CallContext(1, None)
        )
    assert raw is not None
    assert_error(json.loads(raw), -32603, 2)


async def test_cancellation_is_not_an_error() -> None:
    async def slow(params: Any, ctx: CallContext) -> Any:
        await trio.sleep_forever()

    dispatcher = Dispatcher({"daemon.status": slow})
    with trio.move_on_after(0.01) as scope:
        await answer(
            dispatcher, b'{"jsonrpc":"2.0","method":"daemon.status","id":3}', CallContext(1, None)
        )
    assert scope.cancelled_caught


def test_an_integer_is_a_json_integer_never_a_float(daemon: Daemon) -> None:
    """1.0, 1e2 or 1e-400 where an integer is due: -32602 naming the field, nothing runs.

    Once taken as the integer (1e-400 reads as 0.0): a typo sent `rewind` to genesis.
    """
    with daemon.connect() as c:
        c.call("wal.append", {"agent": "ada", "kind": "agent.created"})
        for i in range(3):
            data = {"message_id": f"m{i}", "text": "x"}
            c.call("wal.append", {"agent": "ada", "kind": "message.received", "data": data})
        head = c.call("daemon.status")["head"]
        started = {"turn_id": "t", "message_id": "m0"}
        lines = [
            ('"rewind", "params": {"seq": 0.0}', "seq"),
            ('"rewind", "params": {"seq": 1e-400}', "seq"),
            ('"checkout", "params": {"seq": 2.0}', "seq"),
            ('"state.get", "params": {"seq": 2.0}', "seq"),
            ('"state.get", "params": [3.0]', "seq"),  # by position too
            ('"state.get", "params": {"seq": 1e2}', "seq"),
            ('"wal.read", "params": {"agent": "ada", "limit": 1E1}', "limit"),
            (
                '"wal.append", "params": {"agent": "ada", "kind": "step.started", "data": '
                '{"turn_id": "t", "step": 0.0, "input": {}}}',
                "data.step",
            ),
        ]
        c.call("wal.append", {"agent": "ada", "kind": "turn.started", "data": started})
        head += 1
        for n, (body, field) in enumerate(lines):
            c.send(f'{{"jsonrpc": "2.0", "id": {n}, "method": {body}}}\n'.encode())
            reply = c.recv_json()
            assert "error" in reply, (body, reply)
            err = reply["error"]
            assert err["code"] == -32602 and err["data"]["field"] == field, (body, err)
            assert f"`{field}`" in err["message"] and "integer" in err["message"], err
        assert c.call("daemon.status")["head"] == head
        # Free-form data keeps its floats; a float field takes an integer.
        step = {"turn_id": "t", "step": 0, "input": {"ratio": 1.0}}
        c.call("wal.append", {"agent": "ada", "kind": "step.started", "data": step})
        assert c.call("state.get", {"seq": 2})["seq"] == 2


def test_quick_calls_are_only_plain_well_formed_requests() -> None:
    """Lines the server may answer in the connection's reader (`handle` answers them either
    way, errors included): calls that cannot wait; deciding never raises."""

    async def handler(params: Any, ctx: CallContext) -> Any:
        raise AssertionError("quick_call never calls a handler")

    head = 7
    dispatcher = Dispatcher(
        {"daemon.status": handler, "state.get": handler, "wal.append": handler},
        quick={"daemon.status": lambda p: True, "state.get": lambda p: p.seq in (None, head)},
    )
    quick = [
        b'{"jsonrpc":"2.0","method":"daemon.status","id":1}',
        b'{"jsonrpc":"2.0","method":"daemon.status"}',
        b'{"method":"state.get","params":{"seq":7},"jsonrpc":"2.0","id":"x"}',
        b'{"jsonrpc":"2.0","method":"state.get","params":[null],"id":2}',
    ]
    not_quick = [
        b'{"jsonrpc":"2.0","method":"state.get","params":{"seq":6},"id":1}',  # a past seq
        b'{"jsonrpc":"2.0","method":"state.get","params":{"seq":-1},"id":1}',  # invalid
        b'{"jsonrpc":"2.0","method":"state.get","params":{"sek":7},"id":1}',  # unknown field
        b'{"jsonrpc":"2.0","method":"wal.append","params":{},"id":1}',  # not declared quick
        b'{"jsonrpc":"2.0","method":"nope","id":1}',
        b'[{"jsonrpc":"2.0","method":"daemon.status","id":1}]',  # a batch
        b'{"jsonrpc":"2.0","method":"daemon.status","id":1',  # cut short
        b'{"jsonrpc":"2.0","method":"daemon.status","params":' + b"[" * 100_000 + b"}",
        '{"jsonrpc":"2.0","method":"daemon.status","id":"é"}'.encode(),
        b'{"jsonrpc":"2.0","method":"daemon.status","id":"\xff"}',
    ]
    assert all(dispatcher.quick_call(line) is not None for line in quick)
    assert [dispatcher.quick_call(line) for line in not_quick] == [None] * len(not_quick)


async def test_calls_are_logged_by_level_and_quick_calls_answer_like_the_rest() -> None:
    """Reads log at debug (skipped whole when debug is off); writes and failures at info.

    A line `quick_call` decoded is answered by `handle` exactly as the line itself.
    """

    async def ok(params: Any, ctx: CallContext) -> Any:
        return {"seq": params.seq}

    async def refuse(params: Any, ctx: CallContext) -> Any:
        raise errors.UnknownAgent("Unknown agent: nobody", {})

    saved = structlog.get_config()
    ctx = CallContext(1, None)
    read = b'{"jsonrpc":"2.0","method":"state.get","params":{"seq":3},"id":1}'
    failing = b'{"jsonrpc":"2.0","method":"generations.list","id":2}'
    write = b'{"jsonrpc":"2.0","method":"daemon.shutdown","id":3}'
    for level in (logging.INFO, logging.DEBUG):
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
        try:
            dispatcher = Dispatcher(
                {"state.get": ok, "generations.list": refuse, "daemon.shutdown": ok},
                quick={"state.get": lambda p: True},
            )
            with structlog.testing.capture_logs() as logs:
                replies = [await answer(dispatcher, line, ctx) for line in (read, failing, write)]
                out = Lines()
                await dispatcher.handle(read, ctx, out, dispatcher.quick_call(read))
        finally:
            structlog.configure(**saved)
        assert replies[0] is not None
        assert out.lines == [replies[0]] and json.loads(replies[0])["result"] == {"seq": 3}
        logged = [(e["method"], e["log_level"]) for e in logs if e["event"] == "rpc"]
        expected = [("generations.list", "info"), ("daemon.shutdown", "info")]
        if level == logging.DEBUG:
            expected = [("state.get", "debug"), *expected, ("state.get", "debug")]
        assert logged == expected


async def test_a_quick_call_that_waits_for_the_budget_is_decided_again() -> None:
    """What `quick_call` decided holds only if nothing waits before it runs.

    The budget of a client that leaves replies unread parks the call; a
    shutdown begun meanwhile must refuse it like any other call.
    """

    async def status(params: Any, ctx: CallContext) -> Any:
        return {"ok": True}

    dispatcher = Dispatcher({"daemon.status": status}, quick={"daemon.status": lambda p: True})
    line = b'{"jsonrpc":"2.0","method":"daemon.status","id":3}'
    quick = dispatcher.quick_call(line)
    assert quick is not None
    out = Lines()
    unread = out.budget.limit + 1
    out.budget.hold(unread)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatcher.handle, line, CallContext(1, None), out, quick)
        await trio.testing.wait_all_tasks_blocked()
        assert out.lines == []
        dispatcher.refuse_all(errors.ShuttingDown("The daemon is shutting down"))
        out.budget.release(unread)
    assert_error(json.loads(out.lines[0]), errors.ShuttingDown.code, 3)

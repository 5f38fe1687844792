"""The client library against a real daemon: AsyncClient under asyncio and trio, Client.

Each test body is one coroutine run by `anyio.run` on each backend: the same
client code must work on the loop textual uses (asyncio) and on trio.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.abc
import pytest

from reynctl import aio, client
from reynctl import errors as reynctl_errors
from reynctl.errors import ConnectionClosed, NoDaemon
from reynd.protocol import errors
from reynd.protocol import errors as daemon_errors
from reynd.protocol import methods as m
from reynd.storage.crashpoints import CRASH_ENV
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import restart

BACKENDS = ["asyncio", "trio"]
DEADLINE = 30.0


def run(backend: str, fn: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(DEADLINE):
            await fn()

    anyio.run(bounded, backend=backend)


def events(*texts: str) -> list[m.BatchEvent]:
    return [
        m.BatchEvent(kind="message.received", data={"message_id": f"m-{t}", "text": t})
        for t in texts
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_and_daemon_errors_as_typed_exceptions(daemon: Daemon, backend: str) -> None:
    async def body() -> None:
        async with aio.connect(daemon.socket) as c:
            created = await c.append_batch(
                agent="ext", events=[m.BatchEvent(kind="agent.created"), *events("a", "b")]
            )
            assert len(created.seqs) == 3
            assert (await c.status()).head == created.seqs[-1]
            inbox = (await c.state(agent="ext")).agents["ext"].inbox
            assert [i.text for i in inbox] == ["a", "b"]
            # Calls overlap on one connection.
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(c.status)
            with pytest.raises(errors.UnknownAgent) as unknown:
                await c.append_batch(agent="nobody", events=events("x"))
            assert unknown.value.code == -32006
            assert "nobody" in unknown.value.message
            with pytest.raises(errors.InvalidParams) as bad:
                await c.append_batch(agent="ext", events=[*events("c"), m.BatchEvent(kind="nope")])
            assert bad.value.code == -32602 and bad.value.data["field"] == "events[1].kind"
            await c.rewind(seq=created.seqs[0])
            with pytest.raises(errors.StaleBranch) as stale:
                await c.append_batch(agent="ext", events=events("d"), based_on=created.seqs[-1])
            assert stale.value.code == -32005 and stale.value.data["based_on"] == created.seqs[-1]

    run(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subscription_is_an_async_iterator(daemon: Daemon, backend: str) -> None:
    async def body() -> None:
        async with aio.connect(daemon.socket) as c:
            sub = await c.subscribe(["records"])
            got = await c.append_batch(
                agent="ext", events=[m.BatchEvent(kind="agent.created"), *events("a", "b")]
            )
            seen: list[int] = []
            async with sub:
                async for n in sub:
                    assert isinstance(n, m.Notification) and n.topic == "records"
                    seen.append(n.seq)
                    if len(seen) == 3:
                        break
            assert seen == got.seqs

    run(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reconnect_after_the_daemon_restarts(short_tmp: Path, backend: str) -> None:
    d = start_daemon(short_tmp)

    async def body() -> None:
        nonlocal d
        async with aio.connect(d.socket, reconnect_timeout=20) as c:
            await c.append_batch(agent="ext", events=[m.BatchEvent(kind="agent.created")])
            sub = await c.subscribe(["records"])
            head = (await c.status()).head
            await anyio.to_thread.run_sync(d.stop)
            d = await anyio.to_thread.run_sync(restart, d, short_tmp)
            # A read is sent again on a new connection, transparently.
            assert (await c.status()).head == head
            assert c.reconnects == 1
            # The subscriber learns that it may have missed something, then goes on.
            first = await sub.__anext__()
            assert first == aio.Resync("reconnected", head)
            got = await c.append_batch(agent="ext", events=events("after"))
            n = await sub.__anext__()
            assert isinstance(n, m.Notification) and n.seq == got.seqs[0]

    try:
        run(backend, body)
    finally:
        d.stop()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_in_flight_when_the_daemon_dies_is_not_retried(
    short_tmp: Path, backend: str
) -> None:
    # The daemon kills itself once the batch is durable, before it answers.
    d = start_daemon(short_tmp, env={CRASH_ENV: "wal.after_sync:2"})

    async def body() -> None:
        async with aio.connect(d.socket, reconnect_timeout=0.5) as c:
            await c.append_batch(agent="ext", events=[m.BatchEvent(kind="agent.created")])
            with pytest.raises(ConnectionClosed):
                await c.append_batch(agent="ext", events=events("maybe"))
            assert c.reconnects == 0
            # Nobody restarts it: the next read gives up after reconnect_timeout.
            with pytest.raises(ConnectionClosed, match="no daemon came back"):
                await c.status()

    try:
        run(backend, body)
    finally:
        d.stop(signal.SIGKILL, expect=None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_reconnect_a_dropped_connection_is_final(short_tmp: Path, backend: str) -> None:
    d = start_daemon(short_tmp)

    async def body() -> None:
        c = await aio.open_client(d.socket)
        try:
            await c.status()
            await anyio.to_thread.run_sync(d.stop)
            with pytest.raises(ConnectionClosed):
                await c.status()
            assert c.closed is not None
        finally:
            await c.aclose()
        with pytest.raises(NoDaemon):
            await aio.open_client(d.socket)

    run(backend, body)


# -- the blocking client ----------------------------------------------------------------


def test_blocking_client_reads_ride_over_a_restart_writes_do_not(short_tmp: Path) -> None:
    # The daemon kills itself when the second batch is durable, before answering.
    d = start_daemon(short_tmp, env={CRASH_ENV: "wal.after_sync:2"})
    try:
        with client.connect(d.socket, reconnect=True, reconnect_timeout=20) as c:
            c.append_batch(agent="ext", events=[m.BatchEvent(kind="agent.created")])
            with pytest.raises(ConnectionClosed):
                c.append_batch(agent="ext", events=events("maybe"))
            assert c.reconnects == 0
            d.wait()
            d = restart(d, short_tmp)
            # The next call dials again; the interrupted write was durable: the
            # caller finds out by reading, never by a silent second append.
            head = c.status().head
            assert c.reconnects == 1
            inbox = c.state(agent="ext").agents["ext"].inbox
            assert [i.text for i in inbox] == ["maybe"] and head == 2
            d.stop()
            d = restart(d, short_tmp)
            assert c.status().head == head  # a read after a clean restart, again
            assert c.reconnects == 2
    finally:
        d.stop(signal.SIGKILL, expect=None)


def test_blocking_client_without_reconnect_stays_closed(daemon: Daemon) -> None:
    with client.connect(daemon.socket) as c:
        c.status()
        c._sock.shutdown(2)  # the connection drops under the client
        with pytest.raises(ConnectionClosed):
            c.status()
        with pytest.raises(ConnectionClosed):
            c.status()
        assert c.reconnects == 0


# -- the public surface ------------------------------------------------------------------


def test_the_public_surface_is_small_and_typed() -> None:
    assert sorted(aio.__all__) == [
        "AsyncClient",
        "Resync",
        "Subscription",
        "connect",
        "open_client",
    ]
    assert sorted(client.__all__) == ["Client", "Reply", "config_socket", "connect", "find_socket"]
    # Every daemon error class, by its stable code, importable from reynctl.errors.
    codes = {
        cls.code
        for cls in vars(daemon_errors).values()
        if isinstance(cls, type) and issubclass(cls, daemon_errors.ReyndError)
    }
    assert set(range(-32021, -32000)) <= codes  # the application codes, none skipped
    for code in codes:
        cls = reynctl_errors.error_class(code)
        assert cls.code == code and cls.__name__ in reynctl_errors.__all__
        assert getattr(reynctl_errors, cls.__name__) is cls
    unknown = reynctl_errors.ReyndError.from_wire({"code": -32999, "message": "new"})
    assert unknown.code == -32999 and unknown.message == "new"
    root = Path(reynctl_errors.__file__).parent
    assert (root / "py.typed").exists() and (root.parent / "reynd" / "py.typed").exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_cancelled_while_sending_drops_the_connection(short_tmp: Path, backend: str) -> None:
    """A peer that stops reading (a stalled daemon) holds a large request half sent; a
    cancel then must not leave the cut message for the next one to follow on the same
    connection (misframed): the client closes it, promptly, and dials anew on next use."""
    path = short_tmp / "stalled.sock"
    big = "x" * (4 << 20)  # far more than a Unix socket's buffer

    async def body() -> None:
        got, ended = anyio.Event(), anyio.Event()
        received: list[bytearray] = []

        async def serve(conn: anyio.abc.SocketStream) -> None:
            data = bytearray(await conn.receive())
            received.append(data)
            got.set()
            if len(received) == 1:  # the first connection: read nothing more until closed
                await ended.wait()
                return
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while b"\n" not in data:
                    data.extend(await conn.receive())

        async with await anyio.create_unix_listener(path) as listener:
            c = await aio.open_client(path, timeout=None, reconnect=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, serve)
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as calls:
                        params = m.WalAppendParams(agent="a", kind="note", data={"t": big})
                        calls.start_soon(c.call, "wal.append", params, m.WalAppendResult)
                        await got.wait()  # part of it is on the wire, the rest waits
                        scope.cancel()
                assert scope.cancelled_caught  # promptly, though the peer never reads again
                ended.set()
                # The next call goes out whole on a new connection, not after the cut one.
                with anyio.CancelScope() as second:
                    got = anyio.Event()
                    async with anyio.create_task_group() as calls:
                        calls.start_soon(c.call, "daemon.status", m.StatusParams(), m.StatusResult)
                        await got.wait()
                        second.cancel()
                await c.aclose()
                tg.cancel_scope.cancel()
        assert b"\n" not in received[0]  # cut, and never completed on that connection
        assert len(received) == 2 and received[1].startswith(b"{")

    run(backend, body)

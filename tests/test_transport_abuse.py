"""Misbehaving clients never stall the daemon or the other clients (real daemon, real socket)."""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import IO_TIMEOUT, Client, Daemon, start_daemon

LIMIT = 4096
MAX_CONNECTIONS = 6
CONFIG = f"max_message_bytes = {LIMIT}\nmax_connections = {MAX_CONNECTIONS}\n"
STATUS = b'{"jsonrpc":"2.0","method":"daemon.status","id":"ok"}\n'


@pytest.fixture
def small(short_tmp: Path) -> Iterator[Daemon]:
    """A daemon with a small message limit and connection cap."""
    d = start_daemon(short_tmp, config=CONFIG)
    yield d
    d.stop()


def assert_serving(d: Daemon) -> None:
    """Another client gets a prompt answer."""
    with d.connect() as other:
        other.send(STATUS)
        assert other.recv_json()["id"] == "ok"


def error_code(reply: dict[str, object]) -> object:
    error = reply["error"]
    assert isinstance(error, dict)
    return error["code"]


def test_garbage_then_valid_requests_on_the_same_connection(small: Daemon) -> None:
    with small.connect() as c:
        c.send(b"\x00\x01\x02\xff garbage }{ \n" + STATUS)
        assert error_code(c.recv_json()) == -32700
        assert c.recv_json()["id"] == "ok"
        assert_serving(small)


def test_blank_lines_are_ignored(small: Daemon) -> None:
    with small.connect() as c:
        c.send(b"\n\n  \n\r\n" + STATUS)
        assert c.recv_json()["id"] == "ok"


@pytest.mark.parametrize("pieces", [1, 7])
def test_oversized_line_is_refused_and_skipped(small: Daemon, pieces: int) -> None:
    big = b'{"jsonrpc":"2.0","method":"daemon.status","id":"big","params":{"x":"'
    big += b"a" * (LIMIT * 50) + b'"}}\n'
    step = len(big) // pieces + 1
    with small.connect() as c:
        for i in range(0, len(big), step):
            c.send(big[i : i + step])
            if pieces > 1:
                assert_serving(small)  # a partial giant line stalls no one
        c.send(STATUS)
        reply = c.recv_json()
        assert error_code(reply) == -32008 and reply["id"] is None
        assert str(LIMIT) in reply["error"]["message"]
        # Exactly one error for the line, then the connection goes on.
        assert c.recv_json()["id"] == "ok"


def test_line_at_the_limit_is_accepted(small: Daemon) -> None:
    head = b'{"jsonrpc":"2.0","method":"daemon.status","id":"edge","extra":"'
    tail = b'"}'
    line = head + b"a" * (LIMIT - len(head) - len(tail)) + tail
    assert len(line) == LIMIT
    with small.connect() as c:
        c.send(line + b"\n")
        assert c.recv_json()["id"] == "edge"


def test_half_a_message_then_hang(small: Daemon) -> None:
    with small.connect() as hung:
        hung.send(b'{"jsonrpc":"2.0","method":"daemon.st')
        for _ in range(3):
            assert_serving(small)
        # The hung client finishing its line is answered normally.
        hung.send(b'atus","id":"late"}\n')
        assert hung.recv_json()["id"] == "late"


def test_closing_mid_request_and_half_close(daemon: Daemon) -> None:
    small = daemon  # the default connection cap: 20 quick connections stay under it
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(small.socket))
        s.sendall(STATUS * 5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # with RST: the daemon's writes fail
    assert_serving(small)
    # socat-style: send, shut down writing, read the answer.
    with small.connect() as c:
        c.send(STATUS)
        c.sock.shutdown(socket.SHUT_WR)
        assert c.recv_json()["id"] == "ok"
        assert c.at_eof()


def test_client_that_never_reads_blocks_no_one(small: Daemon) -> None:
    # Far more requests than fit in the socket buffers: the daemon's writes to
    # this client block, its reader stops at the per-connection bound.
    flood = STATUS * 20000
    with small.connect() as stuck:
        stuck.sock.setblocking(False)
        sent = 0
        try:
            while sent < len(flood):
                sent += stuck.sock.send(flood[sent : sent + 65536])
        except BlockingIOError:
            pass  # the daemon stopped reading from us: back-pressure works
        for _ in range(5):
            assert_serving(small)
    assert_serving(small)


def test_a_client_pipelining_quick_calls_does_not_hold_up_the_others(daemon: Daemon) -> None:
    """Quick calls run in their connection's reader, which yields every few of them.

    Before it did, the reader answered a whole 64 KiB read of pipelined
    `daemon.status` lines (~1,300) back to back: another client's round trip
    took 25-39 ms (median) while one client flooded; now about 0.7 ms.
    """
    stop = threading.Event()
    flowing = threading.Event()
    with daemon.connect() as flooder, daemon.connect() as other:

        def send() -> None:
            chunk = STATUS * 1300
            with contextlib.suppress(OSError):
                while not stop.is_set():
                    flooder.sock.sendall(chunk)

        def drain() -> None:
            with contextlib.suppress(OSError):
                while not stop.is_set() and flooder.sock.recv(1 << 20):
                    flowing.set()

        threads = [threading.Thread(target=f, daemon=True) for f in (send, drain)]
        for thread in threads:
            thread.start()
        try:
            assert flowing.wait(IO_TIMEOUT), "the flood got no replies"
            rtts = []
            for _ in range(100):
                start = time.perf_counter()
                other.send(STATUS)
                assert other.recv_json()["id"] == "ok"
                rtts.append(time.perf_counter() - start)
            assert statistics.median(rtts) < 0.01, f"median round trip {statistics.median(rtts)}"
        finally:
            stop.set()
            flooder.sock.shutdown(socket.SHUT_RDWR)
            for thread in threads:
                thread.join()


def test_connection_cap(small: Daemon) -> None:
    held = [small.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        for c in held:  # each is fully accepted before the next test
            c.send(STATUS)
            assert c.recv_json()["id"] == "ok"
        with small.connect() as extra:
            reply = extra.recv_json()
            assert error_code(reply) == -32009 and reply["id"] is None
            assert extra.at_eof()
        held.pop().close()
        # The slot frees once the daemon has seen the close; wait for that condition.
        deadline = time.monotonic() + 10
        while True:
            with small.connect() as again:
                again.send(STATUS)
                reply = again.recv_json()
                if reply.get("id") == "ok":
                    break
                assert error_code(reply) == -32009
                assert time.monotonic() < deadline, "slot never freed"
    finally:
        for c in held:
            c.close()


def test_many_concurrent_clients_each_get_their_own_answers(small: Daemon) -> None:
    clients = [small.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        for n, c in enumerate(clients):
            c.send(
                b"".join(
                    json.dumps(
                        {"jsonrpc": "2.0", "method": "daemon.status", "id": f"{n}-{i}"}
                    ).encode()
                    + b"\n"
                    for i in range(50)
                )
            )
        for n, c in enumerate(clients):
            ids = {c.recv_json()["id"] for _ in range(50)}
            assert ids == {f"{n}-{i}" for i in range(50)}
    finally:
        for c in clients:
            c.close()


def test_client_class_is_a_plain_socket(small: Daemon) -> None:
    # Guard: the harness client really speaks raw newline-delimited JSON.
    c = Client(small.socket)
    try:
        c.send(STATUS)
        assert json.loads(c.recv_line())["id"] == "ok"
    finally:
        c.close()

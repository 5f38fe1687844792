"""Busy polling (`busy_poll_us`): a reader polls briefly for the next line, then sleeps.

Polling after each drained read buys latency with CPU; what must hold is the
bound: connections that have gone quiet cost nothing, whatever state they
were left in, and with polling off the daemon serves the same.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from tests.harness import Client, start_daemon


@pytest.mark.parametrize("busy_poll_us", [100, 10_000])
def test_quiet_connections_cost_no_cpu(short_tmp: Path, busy_poll_us: int) -> None:
    d = start_daemon(short_tmp, config=f"busy_poll_us = {busy_poll_us}\n")
    try:
        with contextlib.ExitStack() as stack:
            clients = [stack.enter_context(d.connect()) for _ in range(16)]
            for i, client in enumerate(clients):
                client.call("daemon.status")
                if i % 2:
                    client.send(b'{"jsonrpc":"2.0","method":"daem')  # half a line, then quiet
            assert d.call("daemon.status")["connections"] == 17
            # A measuring window, not a synchronisation: 16 readers that never
            # stopped polling would burn about a second of CPU in it.
            cpu = d.cpu_seconds()
            time.sleep(1.0)
            assert d.cpu_seconds() - cpu < 0.1
            status = b'{"jsonrpc":"2.0","method":"daemon.status","id":7}\n'
            for client in clients:
                client.send(status)
            for i, client in enumerate(clients):
                if i % 2:  # the half line, completed into one garbled line
                    assert client.recv_json()["error"]["code"] == -32700
                    client.send(status)
                reply = client.recv_json()
                assert reply["id"] == 7 and "result" in reply
    finally:
        d.stop()


def test_polling_off_serves_the_same(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config="busy_poll_us = 0\n")
    try:
        with d.connect() as a, Client(d.socket) as b:
            # Pipelined lines in one write, and one line in pieces.
            a.send(
                b"".join(
                    b'{"jsonrpc":"2.0","method":"daemon.status","id":%d}\n' % i for i in range(5)
                )
            )
            assert sorted(a.recv_json()["id"] for _ in range(5)) == list(range(5))
            for piece in (b'{"jsonrpc":"2.0",', b'"method":"daemon.status",', b'"id":"b"}\n'):
                b.send(piece)
            assert b.recv_json()["id"] == "b"
    finally:
        d.stop()

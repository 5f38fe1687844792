"""Clients that do not read their replies, or leave: bounded memory, no work for nobody.

Each connection has a budget of reply bytes made and not yet written
(`max_unsent_bytes_per_connection`): past it the daemon reads and starts
nothing more of that connection. A client found gone by a write has the rest
of its work cancelled. Before, a client sending 64 lines of 1000-member
batches of `rpc.discover` (70 KB replies) and never reading held ~17 MB of
the daemon per connection, and once it closed, the daemon went on answering
all 64,000 members into the void (~1.5 s of CPU per connection).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import create_program, read_pid, wait_until

MiB = 1024 * 1024
DISCOVER = {"jsonrpc": "2.0", "method": "rpc.discover", "id": 1}
# 64 lines (as many as run at once on a connection) of 1000-member batches.
FLOOD = (json.dumps([DISCOVER] * 1000).encode() + b"\n") * 64


def rss_mib(d: Daemon) -> float:
    for line in Path(f"/proc/{d.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {d.pid}")


def replies_pending(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


def logged(d: Daemon, event: str, **fields: Any) -> list[dict[str, Any]]:
    out = []
    for line in d.stderr().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("event") == event and all(entry.get(k) == v for k, v in fields.items()):
                out.append(entry)
    return out


def flood(d: Daemon, connections: int) -> tuple[list[socket.socket], list[threading.Thread]]:
    """Connections that send FLOOD (each from a thread: the daemon stops reading) and never read."""
    socks, senders = [], []
    for _ in range(connections):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(d.socket))
        sender = threading.Thread(target=_send_quietly, args=(sock, FLOOD), daemon=True)
        sender.start()
        socks.append(sock)
        senders.append(sender)
    return socks, senders


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # closed by the test while the daemon was not reading
        sock.sendall(data)


def test_clients_that_never_read_hold_bounded_memory_and_cost_nothing_once_gone(
    short_tmp: Path,
) -> None:
    d = start_daemon(short_tmp)
    try:
        with d.connect() as good:
            good.call("rpc.discover")  # warm: the baseline has built the reply once
            base = rss_mib(d)
            socks, senders = flood(d, 8)
            # Every flooding connection has been answered into: its replies wait unread.
            wait_until(lambda: all(map(replies_pending, socks)), "replies to every flood")
            for _ in range(20):
                start = time.monotonic()
                assert good.call("daemon.status")["connections"] == 9
                assert time.monotonic() - start < 1.0
            # Before: ~17 MiB per connection (+130 MiB here); now ~2.5.
            assert rss_mib(d) - base < 48, "replies piled up for clients that do not read"
            cpu = d.cpu_seconds()
            for sock in socks:
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            for sender in senders:
                sender.join()
            wait_until(lambda: good.call("daemon.status")["connections"] == 1, "floods closed")
            # Nothing more was done for them: not even one batch of the flood per
            # connection was answered (before: all 64,000 members of each).
            answered = len(logged(d, "rpc", method="rpc.discover")) - 1
            assert answered < 8 * 1000, answered
            assert d.cpu_seconds() - cpu < 0.5
            assert len(logged(d, "connection.close", client_gone=True)) == 8
            # The memory they held is given back (before: ~+110 MiB stayed).
            wait_until(lambda: rss_mib(d) - base < 16, "memory back near the baseline")
            assert good.call("daemon.status")["connections"] == 1
    finally:
        d.stop()


def test_a_slow_reader_gets_every_reply_whole_and_in_order(short_tmp: Path) -> None:
    """Throttled (its replies past the budget), then reading: nothing lost, garbled or stuck."""
    d = start_daemon(short_tmp)
    try:
        status = {"jsonrpc": "2.0", "method": "daemon.status"}
        lines = []
        for i in range(64):
            batch = [{**DISCOVER, "id": f"{i}.0"}] + [
                {**status, "id": f"{i}.{j}"} for j in range(1, 200)
            ]
            lines.append(json.dumps(batch).encode())
            lines.append(json.dumps({**status, "id": f"{i}"}).encode())
        with d.connect() as c:
            sender = threading.Thread(target=c.send, args=(b"\n".join(lines) + b"\n",))
            sender.start()
            wait_until(lambda: logged(d, "connection.throttled"), "the connection throttled")
            c.sock.settimeout(60)
            seen: dict[str, list[str] | None] = {}
            for _ in range(len(lines)):
                reply = c.recv_json()
                if isinstance(reply, list):
                    ids = [r["id"] for r in reply]
                    assert all("result" in r for r in reply)
                    seen[ids[0].split(".")[0] + "[]"] = ids
                else:
                    assert "result" in reply, reply
                    seen[reply["id"]] = None
            sender.join()
            assert c.call("daemon.status")["connections"] == 1
        for i in range(64):
            assert seen[f"{i}"] is None
            assert seen[f"{i}[]"] == [f"{i}.{j}" for j in range(200)]
    finally:
        d.stop()


def test_a_waiting_batch_member_does_not_hold_up_other_replies(short_tmp: Path) -> None:
    """A batch waits on a member without holding the connection while its reply is small."""
    d = start_daemon(short_tmp)
    try:
        create_program(d, "w", short_tmp / "prog")
        with d.connect() as c:
            send = {"agent": "w", "text": "sleep", "wait": True, "timeout": 60}
            batch = [
                DISCOVER,  # ~70 KB of reply first: past the old 64 KiB batch buffer
                {"jsonrpc": "2.0", "method": "agents.send", "params": send, "id": 2},
            ]
            c.send_json(batch)
            prog = short_tmp / "prog"
            pid = read_pid(wait_until(lambda: next(prog.glob("*.pid"), None), "the step running"))
            # The batch now waits on the turn; another request on the connection is answered.
            c.send_json({"jsonrpc": "2.0", "method": "daemon.status", "id": "status"})
            reply = c.recv_json()
            assert isinstance(reply, dict) and reply["id"] == "status", reply
            os.kill(pid, signal.SIGKILL)  # the step fails, the turn ends, the member returns
            replies = c.recv_json()
            assert [r["id"] for r in replies] == [1, 2]
            assert replies[0]["result"]["openrpc"]
    finally:
        d.stop()

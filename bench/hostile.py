"""A good client's latency while hostile clients attack, and the daemon's memory around it.

    python -m bench.hostile [--seconds S] [--rounds R] [--json]

The real `reynd serve` (defaults, state seeded through wal.append). One good
client sends `daemon.status` round trips, one in flight, for S seconds: once
alone (baseline) and once while a separate process attacks, one connection
per attack, all at once: what issue 10 found (a 1 MiB line of ~500,000
nested brackets, a 1 MiB batch of `1`s, a 1000-member batch of `state.get`,
invalid UTF-8 inside params, 10,000 `subscribe` calls on one connection, then
closed), a 5000-digit integer in a `wal.append`, and 1 MiB of short numbers
after a 19-digit one (the integer check's slowest input). The two windows
alternate R times. Printed: the good client's p50 / p99 / max latency in
each and their ratios (attack / baseline), the hostile messages sent, and
the daemon's RSS before, at its peak and after the attackers left (VmRSS,
VmHWM from /proc).

The machine may be shared and noisy: read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from bench.daemon import Client, seed_state, start_reynd, workdir

MiB = 1024 * 1024
STATUS = b'{"jsonrpc":"2.0","method":"daemon.status","id":1}\n'
_SUB = b'{"jsonrpc":"2.0","method":"subscribe","params":{"topics":["records"]},"id":%d}\n'

# Each: (name, one line, replies it is due).
ATTACKS: list[tuple[str, bytes, int]] = [
    ("deep nesting", b"[" * (MiB // 2 - 1) + b"]" * (MiB // 2 - 1), 1),
    ("1 MiB batch of 1s", b"[" + b"1," * (MiB // 2 - 2) + b"1]", 1),
    (
        "1000 x state.get",
        json.dumps(
            [{"jsonrpc": "2.0", "method": "state.get", "id": i} for i in range(1000)]
        ).encode(),
        1,
    ),
    (
        "invalid UTF-8",
        b'{"jsonrpc":"2.0","method":"state.get","id":1,"params":{"agent":"\xff\xfe"}}',
        1,
    ),
    (
        "5000-digit integer",
        b'{"jsonrpc":"2.0","method":"wal.append","id":1,"params":{"agent":"x",'
        b'"kind":"agent.created","data":{"options":{"n":' + b"9" * 5000 + b"}}}}",
        1,
    ),
    (
        "1 MiB of numbers",
        b'{"jsonrpc":"2.0","method":"daemon.status","id":1,"params":[1234567890123456789'
        + b",1" * (MiB // 2 - 64)
        + b"]}",
        1,
    ),
]


def _recv_lines(sock: socket.socket, buf: bytearray, n: int) -> None:
    while n:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the daemon closed the connection")
        n -= chunk.count(b"\n")
        buf += chunk
    buf.clear()


def _attacker(path: str, line: bytes, replies: int, stop: Any, sent: Any) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        buf = bytearray()
        while not stop.is_set():
            sock.sendall(line + b"\n")
            _recv_lines(sock, buf, replies)
            with sent.get_lock():
                sent.value += 1


def _subscriber(path: str, stop: Any, sent: Any) -> None:
    flood = b"".join(_SUB % i for i in range(10_000))
    while not stop.is_set():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            writer = threading.Thread(target=sock.sendall, args=(flood,))
            writer.start()
            _recv_lines(sock, bytearray(), 10_000)
            writer.join()
        with sent.get_lock():
            sent.value += 10_000


def _attack(path: str, stop: Any, sent: Any) -> None:
    threads = [
        threading.Thread(target=_attacker, args=(path, line, replies, stop, sent))
        for _, line, replies in ATTACKS
    ]
    threads.append(threading.Thread(target=_subscriber, args=(path, stop, sent)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _latencies(path: Path, seconds: float) -> list[float]:
    out = []
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        buf = bytearray()
        end = time.perf_counter() + seconds
        while (t := time.perf_counter()) < end:
            sock.sendall(STATUS)
            _recv_lines(sock, buf, 1)
            out.append(time.perf_counter() - t)
    return out


def _summary(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    return {
        "requests": len(lat),
        "p50_ms": statistics.median(lat) * 1e3,
        "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1e3,
        "max_ms": lat[-1] * 1e3,
    }


def _memory(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) // 1024
    return fields


def run(seconds: float, rounds: int) -> dict[str, Any]:
    with workdir() as base:
        daemon = start_reynd("reynd", base / "state", base)
        try:
            seed_state(daemon.socket)
            _latencies(daemon.socket, 0.5)  # warm up
            before = _memory(daemon.proc.pid)
            calm: list[float] = []
            attacked: list[float] = []
            sent = multiprocessing.Value("q", 0)
            for _ in range(rounds):
                calm += _latencies(daemon.socket, seconds)
                stop = multiprocessing.Event()
                attack = multiprocessing.Process(
                    target=_attack, args=(str(daemon.socket), stop, sent)
                )
                attack.start()
                time.sleep(0.5)  # let every attacker get going (load, not synchronisation)
                attacked += _latencies(daemon.socket, seconds)
                stop.set()
                attack.join(120)
            peak = _memory(daemon.proc.pid)["VmHWM"]
            client = Client(daemon.socket)
            while client.call("daemon.status")["subscriptions"]:
                time.sleep(0.05)
            head = client.call("daemon.status")["head"]
            client.close()
            after = _memory(daemon.proc.pid)
        finally:
            daemon.stop()
    c, a = _summary(calm), _summary(attacked)
    return {
        "seconds": seconds,
        "rounds": rounds,
        "hostile_messages": sent.value,
        "baseline": c,
        "under_attack": a,
        "ratios": {k: a[k] / c[k] for k in ("p50_ms", "p99_ms", "max_ms")},
        "rss_mib": {"before": before["VmRSS"], "peak": peak, "after": after["VmRSS"]},
        "head_unchanged": head,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one window")
    ap.add_argument("--rounds", type=int, default=3, help="baseline/attack pairs")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    result = run(args.seconds, args.rounds)
    if args.json:
        print(json.dumps(result))
        return
    c, a, r = result["baseline"], result["under_attack"], result["ratios"]
    print(f"hostile messages sent: {result['hostile_messages']}")
    print(f"{'good client':<14}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}{'requests':>10}")
    for name, s in (("alone", c), ("under attack", a)):
        row = f"{s['p50_ms']:>10.3f}{s['p99_ms']:>10.3f}{s['max_ms']:>10.1f}{s['requests']:>10}"
        print(f"{name:<14}{row}")
    print(f"{'ratio':<14}{r['p50_ms']:>10.1f}{r['p99_ms']:>10.1f}{r['max_ms']:>10.1f}")
    m = result["rss_mib"]
    print(f"daemon RSS MiB: before {m['before']}, peak {m['peak']}, after {m['after']}")


if __name__ == "__main__":
    main()

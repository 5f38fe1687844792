"""Replication to object storage: what it costs the writer, what it ships, how long a restore takes.

    python -m bench.replication [--seconds S] [--rounds R] [--json]

Against a real S3-compatible server on loopback (moto's server mode, as the
tests use), two real `reynd serve` daemons on the same file system: one
without replication, one with `[replicate]` (interval_s = 1, the default).

1. Append throughput: 1 and 16 clients, each with one `wal.append` in flight
   (pre-encoded, from a separate load process), alternating between the two
   daemons R times; printed as replicated / plain (target >= 0.9).
2. Bytes shipped per turn: 200 turns of five records each (message, turn
   start, step start, step commit, turn end) on the replicated daemon, then
   the bytes under its prefix divided by the turns, beside the local WAL's
   bytes per turn.
3. Restore time vs history size: histories of 10^3, 10^4 and 10^5 records
   (written through the storage API, snapshots cut as the daemon cuts them),
   shipped by a daemon, then restored with `reynd restore`'s code; printed
   beside the time to open the same history locally (verify every record,
   rebuild the tip), the floor a restore cannot beat.

The machine may be shared and noisy: read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.daemon import Client, Load, _turn, build_history, start_reynd, workdir
from reynd.replication.objects import Bucket, parse_url
from reynd.replication.restore import restore
from reynd.storage.store import Store

BUCKET = "reynd-bench"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
APPEND = (
    b'{"jsonrpc":"2.0","method":"wal.append","id":1,"params":{"agent":"w",'
    b'"kind":"message.received","data":{"message_id":"m","text":"Please fix the failing '
    b'check in module 7 and run the tests again."}}}\n'
)


def start_moto(base: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=base,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        import boto3

        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
    except BaseException:
        proc.kill()  # e.g. no credentials: the caller never gets the process to stop
        proc.wait()
        raise
    return proc, url


def config(prefix: str, endpoint: str) -> str:
    return f'[replicate]\nurl = "s3://{BUCKET}/{prefix}"\nendpoint = "{endpoint}"\n'


def prefix_bytes(endpoint: str, prefix: str) -> int:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        total += sum(o["Size"] for o in page.get("Contents", ()))
    return total


def wait_shipped(path: Path, timeout: float = 300) -> None:
    client = Client(path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            status = client.call("daemon.status")
            r = status["replication"]
            if r["shipped"] >= status["head"] and r["state"] == "shipping":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not shipped: {r}")
            time.sleep(0.05)
    finally:
        client.close()


def measure_throughput(base: Path, endpoint: str, seconds: float, rounds: int) -> dict[str, Any]:
    plain_dir, repl_dir = base / "plain", base / "repl"
    for d in (plain_dir, repl_dir):
        d.mkdir()
    (repl_dir / "reynd.toml").write_text(config("throughput", endpoint))
    plain = start_reynd("plain", plain_dir, base)
    repl = start_reynd("repl", repl_dir, base)
    load = Load()
    try:
        for proc in (plain, repl):
            c = Client(proc.socket)
            c.call("wal.append", {"agent": "w", "kind": "agent.created"})
            c.close()
        out: dict[str, Any] = {}
        for clients in (1, 16):
            rates: dict[str, list[float]] = {"plain": [], "replicated": []}
            for _ in range(rounds):
                for name, proc in (("plain", plain), ("replicated", repl)):
                    r = load.run_payload(proc, APPEND, clients, seconds)
                    rates[name].append(r["count"] / r["elapsed"])
            p, q = statistics.median(rates["plain"]), statistics.median(rates["replicated"])
            out[f"{clients}_clients"] = {
                "plain_per_s": round(p),
                "replicated_per_s": round(q),
                "ratio": round(q / p, 3),
            }
        wait_shipped(repl.socket)
        return out
    finally:
        load.close()
        plain.stop()
        repl.stop()


def measure_bytes_per_turn(base: Path, endpoint: str, turns: int = 200) -> dict[str, Any]:
    state = base / "turns"
    state.mkdir()
    (state / "reynd.toml").write_text(config("turns", endpoint))
    proc = start_reynd("turns", state, base)
    try:
        c = Client(proc.socket)
        c.call("wal.append", {"agent": "a", "kind": "agent.created"})
        for i in range(turns):
            for e in _turn("a", i):
                data = msgspec.to_builtins(e)
                kind = data.pop("kind")
                for key in ("agent", "seq", "ts"):
                    data.pop(key, None)
                c.call("wal.append", {"agent": "a", "kind": kind, "data": data})
        c.close()
        wait_shipped(proc.socket)
    finally:
        proc.stop()
    wal = sum(f.stat().st_size for f in (state / "state" / "wal").glob("*.jsonl"))
    shipped = prefix_bytes(endpoint, "turns/")
    return {
        "turns": turns,
        "shipped_bytes_per_turn": round(shipped / turns),
        "local_wal_bytes_per_turn": round(wal / turns),
        "ratio": round(shipped / wal, 3),
    }


def measure_restore(base: Path, endpoint: str, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        src = base / f"src-{n}"
        build_history(src, n)
        (src / "reynd.toml").write_text(config(f"restore-{n}", endpoint))
        proc = start_reynd(f"ship-{n}", src, base)
        try:
            wait_shipped(proc.socket)
        finally:
            proc.stop()
        t = time.perf_counter()
        with Store.open(src) as store:
            records = store.head
        open_s = time.perf_counter() - t
        bucket = Bucket(parse_url(f"s3://{BUCKET}/restore-{n}"), endpoint=endpoint)
        report = restore(bucket, base / f"dst-{n}")
        assert report.head == records, (report.head, records)
        rows.append(
            {
                "records": records,
                "wal_mib": round(report.wal_bytes / 2**20, 2),
                "objects": report.objects,
                "restore_s": round(report.duration_s, 3),
                "local_open_s": round(open_s, 3),
                "ratio": round(report.duration_s / open_s, 2),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one load window")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--sizes", default="1000,10000,100000", help="restore history sizes")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    os.environ.update(CREDENTIALS)
    with workdir() as base:
        moto, endpoint = start_moto(base)
        try:
            result: dict[str, Any] = {
                "append_throughput": measure_throughput(base, endpoint, args.seconds, args.rounds),
                "bytes_per_turn": measure_bytes_per_turn(base, endpoint),
                "restore": measure_restore(base, endpoint, [int(s) for s in args.sizes.split(",")]),
            }
        finally:
            moto.kill()
            moto.wait()
    if args.json:
        print(json.dumps(result))
        return
    for clients, r in result["append_throughput"].items():
        print(
            f"wal.append, {clients.replace('_', ' ')}: plain {r['plain_per_s']}/s, "
            f"replicated {r['replicated_per_s']}/s, ratio {r['ratio']} (target >= 0.9)"
        )
    b = result["bytes_per_turn"]
    print(
        f"bytes shipped per turn: {b['shipped_bytes_per_turn']} "
        f"(local WAL {b['local_wal_bytes_per_turn']}, ratio {b['ratio']})"
    )
    for r in result["restore"]:
        print(
            f"restore {r['records']} records ({r['wal_mib']} MiB, {r['objects']} objects): "
            f"{r['restore_s']} s; local open {r['local_open_s']} s; ratio {r['ratio']}"
        )


if __name__ == "__main__":
    main()

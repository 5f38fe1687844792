"""Durable commits against what users would pick instead, side by side in one run.

    python -m bench.commit_peers [--seconds 3] [--rounds 2] [--json]

Every contender writes the same ~200-byte record and acknowledges it only
once it is durable, on the same file system (/tmp):

- `reynd`: `wal.append` of one message over the daemon's socket, from a
  separate load process, one request in flight per client (1 and 64 clients);
- `sqlite`: one INSERT + COMMIT at a time into a table in WAL journal mode
  with synchronous=FULL (every commit fsyncs the WAL), one writer: SQLite
  serializes writers, so one is its best case;
- `postgres`: pgbench (PostgreSQL's own C load generator) running one
  INSERT per transaction, autocommit, on `clients` connections, against a
  server the bench starts itself with fsync and synchronous_commit on
  (bench/postgres.py); 1 and 64 connections;
- the limits: a raw write + fdatasync per record (1 writer) and one per 64
  records (the batched limit), from bench.storage;
- with `--base DIR` (a checkout of an older reynd, e.g. from `git worktree
  add`), `reynd_base`: that version's daemon (PYTHONPATH=DIR) beside this
  one, for before/after ratios measured in the same run.

`cpu_us` is the daemon's user + system CPU per acknowledged append.

Contenders alternate within each round; a figure is the median of the
rounds. Ratios are reynd / other in records per second: above 1, reynd
acknowledges more.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import postgres
from bench.daemon import Client, Load, Proc, start_reynd, workdir
from bench.postgres import Cluster
from bench.replication import APPEND
from bench.storage import raw_fsync_per_batch, raw_fsync_per_record

__all__ = ["run"]

# The body each peer stores: the size of the framed record reynd writes for APPEND.
RECORD_BYTES = 200


def sqlite_commits_per_s(path: Path, seconds: float) -> float:
    """INSERT + COMMIT per record, WAL journal, synchronous=FULL: the durable default."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
        body = "x" * RECORD_BYTES
        count, t0 = 0, time.perf_counter()
        deadline = t0 + seconds
        while True:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t (body) VALUES (?)", (body,))
            conn.execute("COMMIT")
            count += 1
            if (t := time.perf_counter()) >= deadline:
                return count / (t - t0)
    finally:
        conn.close()


def pgbench_tps(pg: Cluster, clients: int, seconds: float, script: Path) -> float:
    """Transactions/s of pgbench: each one INSERT, committed (synchronous_commit on)."""
    bins = postgres.bindir()
    assert bins is not None
    params = dict(p.split("=", 1) for p in pg.conninfo.split())
    load = ["-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1))]
    load += ["-T", str(max(1, round(seconds)))]
    where = ["-h", params["host"], "-p", params["port"], "-U", params["user"], params["dbname"]]
    out = subprocess.run(
        [str(bins / "pgbench"), "-n", "-M", "prepared", "-f", str(script), *load, *where],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    match = re.search(r"tps = ([\d.]+)", out)
    if match is None:
        raise RuntimeError(f"pgbench printed no tps: {out[-500:]}")
    return float(match.group(1))


def _append(k: int) -> bytes:
    """Writer k's request: APPEND's message, to agent w<k>."""
    return APPEND.replace(b'"agent":"w"', b'"agent":"w%d"' % k)


def _pg_setup(pg: Cluster, base: Path) -> Path:
    import psycopg

    with psycopg.connect(pg.conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (id bigserial PRIMARY KEY, body text)")
    script = base / "insert.sql"
    script.write_text(f"INSERT INTO t (body) VALUES (repeat('x', {RECORD_BYTES}));\n")
    return script


def _rounds(
    procs: dict[str, Proc],
    load: Load,
    base: Path,
    pg: Cluster | None,
    script: Path | None,
    *,
    seconds: float,
    rounds: int,
    log: Callable[[str], None],
    cpu: dict[str, list[float]],
) -> dict[str, list[float]]:
    """Every contender's records/s, one window each per round, the order alternating;
    `cpu` gets each daemon's CPU µs per append."""
    rates: dict[str, list[float]] = {}

    def measure(name: str, fn: Callable[[], float]) -> None:
        rates.setdefault(name, []).append(fn())
        log(f"  {name}: {rates[name][-1]:,.0f}/s")

    def reynd(proc: Proc, name: str, clients: int) -> float:
        # One agent per writer, as pgbench's connections insert rows of their own: the
        # appends of one agent are ordered, so they never share a batch.
        r = load.run_payload(proc, [_append(k) for k in range(clients)], clients, seconds)
        cpu.setdefault(name, []).append(r["server_cpu"] / r["count"] * 1e6)
        return float(r["count"] / r["elapsed"])

    for proc in procs.values():
        c = Client(proc.socket)
        for k in range(64):
            c.call("wal.append", {"agent": f"w{k}", "kind": "agent.created"})
        c.close()
    n1 = max(200, int(seconds * 300))
    for r in range(rounds):
        log(f"round {r + 1}/{rounds}")
        d = base / f"round-{r}"
        d.mkdir()

        def daemons(clients: int) -> list[tuple[str, Callable[[], float]]]:
            names = [(f"{label}_{clients}", proc) for label, proc in procs.items()]
            return [(name, partial(reynd, proc, name, clients)) for name, proc in names]

        steps: list[tuple[str, Callable[[], float]]] = [
            *daemons(1),
            ("sqlite_1", partial(sqlite_commits_per_s, d / "sqlite.db", seconds)),
            ("raw_1", partial(raw_fsync_per_record, d / "raw1", n1, RECORD_BYTES)),
            *daemons(64),
            (
                "raw_batched_64",
                partial(raw_fsync_per_batch, d / "raw64", n1 * 16, RECORD_BYTES, 64),
            ),
        ]
        if script is not None and pg is not None:
            steps += [
                ("postgres_1", partial(pgbench_tps, pg, 1, seconds, script)),
                ("postgres_64", partial(pgbench_tps, pg, 64, seconds, script)),
            ]
        if r % 2:
            steps.reverse()
        for name, fn in steps:
            measure(name, fn)
    return rates


def run(
    base: Path,
    pg: Cluster | None,
    *,
    seconds: float,
    rounds: int,
    log: Callable[[str], None],
    before: Path | None = None,
) -> dict[str, Any]:
    """Records/s of every contender at 1 and 64 writers, and the ratios.

    `before`: a checkout of another reynd, run beside this one as `reynd_base`.
    """
    with contextlib.ExitStack() as stack:
        procs = {"reynd": start_reynd("commit", base / "reynd", base)}
        stack.callback(procs["reynd"].stop)
        if before is not None:
            env = {"PYTHONPATH": str(before.resolve())}
            procs["reynd_base"] = start_reynd("commit-base", base / "reynd-base", base, env)
            stack.callback(procs["reynd_base"].stop)
        load = Load()
        stack.callback(load.close)
        script = _pg_setup(pg, base) if pg is not None else None
        cpu: dict[str, list[float]] = {}
        rates = _rounds(
            procs, load, base, pg, script, seconds=seconds, rounds=rounds, log=log, cpu=cpu
        )
    per_s = {name: round(statistics.median(v), 1) for name, v in rates.items()}
    ratios = {
        "1_writer_vs_raw": _ratio(per_s, "reynd_1", "raw_1"),
        "1_writer_vs_sqlite_full": _ratio(per_s, "reynd_1", "sqlite_1"),
        "1_writer_vs_postgres": _ratio(per_s, "reynd_1", "postgres_1"),
        "64_writers_vs_postgres": _ratio(per_s, "reynd_64", "postgres_64"),
        "64_writers_vs_batched": _ratio(per_s, "reynd_64", "raw_batched_64"),
    }
    if before is not None:
        ratios["1_writer_vs_base"] = _ratio(per_s, "reynd_1", "reynd_base_1")
        ratios["64_writers_vs_base"] = _ratio(per_s, "reynd_64", "reynd_base_64")
    return {
        "seconds": seconds,
        "rounds": rounds,
        "record_bytes": RECORD_BYTES,
        "postgres": None if pg is None else pg.version,
        "per_s": per_s,
        "cpu_us": {name: round(statistics.median(v), 1) for name, v in cpu.items()},
        "ratios": ratios,
    }


def _ratio(per_s: dict[str, float], a: str, b: str) -> float | None:
    return round(per_s[a] / per_s[b], 3) if per_s.get(b) and a in per_s else None


def render(res: dict[str, Any]) -> str:
    lines = [
        f"Durable commits of a {res['record_bytes']}-byte record, median of {res['rounds']} "
        f"rounds of {res['seconds']} s (records/s)"
    ]
    lines += [f"  {name:<16} {v:>10,.0f}" for name, v in res["per_s"].items()]
    lines.append("daemon CPU per append (µs, user + system):")
    lines += [f"  {name:<16} {v:>10,.0f}" for name, v in res["cpu_us"].items()]
    lines.append("reynd / other (above 1: reynd acknowledges more):")
    lines += [f"  {k:<26} {v}" for k, v in res["ratios"].items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="one measurement window")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    ap.add_argument("--no-postgres", action="store_true", help="leave PostgreSQL out")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--base", type=Path, help="a checkout of an older reynd to run beside this one")
    args = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    with workdir() as base, contextlib.ExitStack() as stack:
        pg = None if args.no_postgres else stack.enter_context(postgres.cluster_or_none(log))
        res = run(base, pg, seconds=args.seconds, rounds=args.rounds, log=log, before=args.base)
    print(json.dumps(res, indent=2) if args.json else render(res))


if __name__ == "__main__":
    main()

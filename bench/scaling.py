"""Scaling: restart, RSS, rewind, reconstruct and first page vs WAL entries.

State directories of 10^4, 10^5, 10^6 WAL entries are built through the
storage API (bench.storage.build_history: ten agents running skill runs with
phases and answered questions, so the state stays the same size at every
length and only the history varies; snapshots cut by the daemon's default
policy). Then, in rounds that alternate the order of the sizes, the real daemon
is started on each (start to READY=1: crash recovery, which verifies every
record of the WAL and rebuilds the catalog), its RSS read from /proc, and over
its socket: `rewind` near the tip and to the middle (each followed by a
`checkout` back to the tip), `state.get` at past seqs in the middle of the
history (reconstruct: nearest snapshot + replay), `generations.list` first page.

The floor for recovery is reading the same WAL bytes sequentially.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.daemon import Client, start_reynd
from bench.storage import build_history

SNAPSHOT_SPACING = 256 * 1024  # StorageOptions.snapshot_min_bytes: the daemon's default


def _rss_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def read_floor(root: Path) -> tuple[int, float]:
    """Read every WAL segment sequentially (page cache as warm as the daemon's)."""
    files = sorted((root / "state" / "wal").glob("*.jsonl"))
    t = time.perf_counter()
    total = 0
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
    return total, time.perf_counter() - t


def _median_timed(fn: Callable[[], Any], n: int) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def build(base: Path, sizes: list[int], log: Callable[[str], None] = print) -> dict[int, Any]:
    built: dict[int, Any] = {}
    for n in sizes:
        root = base / f"S{n}"
        t = time.perf_counter()
        store = build_history(root, n, SNAPSHOT_SPACING)
        snaps = list(store.snapshots.seqs)
        head = store.head
        store.close()
        built[n] = {
            "root": root,
            "head": head,
            "snapshots": snaps,
            "build_s": time.perf_counter() - t,
        }
        log(f"    built {n:.0e} entries in {built[n]['build_s']:.1f} s ({len(snaps)} snapshots)")
    return built


def _past_seqs(snaps: list[int], below: int) -> list[int]:
    """Seqs at the same distances above the last snapshot at or below `below`.

    Rewind and reconstruct replay the WAL from the nearest snapshot: comparing
    sizes at equal distances above one isolates the length of history.
    """
    anchor = ([s for s in snaps if s <= below] or [0])[-1]
    return [anchor + d for d in (50, 150, 250, 350)]


def _worst_seq(snaps: list[int], head: int) -> int:
    """Just below a snapshot in the middle: the longest replay the policy allows."""
    above = [s for s in snaps if s > head // 2]
    return (above[0] if above else head) - 10


def measure_once(base: Path, info: dict[str, Any], reps: int) -> dict[str, Any]:
    root, head = info["root"], info["head"]
    daemon = start_reynd(f"s{head}", root, base)
    try:
        rss = _rss_kib(daemon.proc.pid)
        client = Client(daemon.socket)
        for _ in range(20):
            client.call("daemon.status")
        tip = int(client.call("daemon.status")["head"])
        out: dict[str, Any] = {
            "restart_s": daemon.ready_s,
            "rss_kib": rss["VmRSS"],
            "hwm_kib": rss["VmHWM"],
        }
        out["status_s"] = _median_timed(lambda: client.call("daemon.status"), 10)
        out["page_s"] = _median_timed(lambda: client.call("generations.list", {"limit": 50}), 10)
        snaps = info["snapshots"]
        past = _past_seqs(snaps, head // 2)
        near_tip = _past_seqs(snaps, head - 500)[2]
        rec = []
        for _ in range(reps):
            for s in past:
                t = time.perf_counter()
                client.call("state.get", {"seq": s})
                rec.append(time.perf_counter() - t)
        out["reconstruct_s"] = statistics.median(rec)
        for label, target in (
            ("rewind_tip_s", near_tip),
            ("rewind_mid_s", past[2]),
            ("rewind_worst_s", _worst_seq(snaps, head)),
        ):
            times, server = [], []
            for _ in range(reps):
                t = time.perf_counter()
                res = client.call("rewind", {"seq": target})
                times.append(time.perf_counter() - t)
                server.append(res["duration_ms"] / 1e3)
                res = client.call("checkout", {"seq": tip})
                tip = int(res["reset_seq"])
            out[label] = statistics.median(times)
            out[label.replace("_s", "_server_s")] = statistics.median(server)
        client.close()
        return out
    finally:
        daemon.stop()


def run(
    base: Path,
    sizes: list[int],
    *,
    rounds: int = 2,
    reps: int = 3,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    built = build(base, sizes, log)
    samples: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    floors: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(rounds):
        order = sizes if r % 2 == 0 else sizes[::-1]
        for n in order:
            nbytes, dt = read_floor(built[n]["root"])
            floors[n].append(dt)
            built[n]["wal_bytes"] = nbytes
            samples[n].append(measure_once(base, built[n], reps))
            log(f"    round {r + 1}: {n:.0e} entries, restart {samples[n][-1]['restart_s']:.2f} s")
    rows = []
    for n in sizes:
        ss = samples[n]
        row: dict[str, Any] = {
            "entries": built[n]["head"],
            "build_s": built[n]["build_s"],
            "snapshots": len(built[n]["snapshots"]),
            "wal_bytes": built[n]["wal_bytes"],
            "read_floor_s": min(floors[n]),
        }
        for key in ss[0]:
            values = [s[key] for s in ss]
            # Best of the rounds for times (noise only ever adds), the last for memory.
            row[key] = min(values) if key.endswith("_s") else values[-1]
            row[key + "_rounds"] = values
        row["restart_vs_floor"] = row["restart_s"] / row["read_floor_s"]
        rows.append(row)
    return rows

"""Scaling: restart, RSS, rewind, reconstruct and first page vs WAL entries.

State directories of 10^4, 10^5, 10^6 WAL entries are built through the
storage API (bench.storage.build_history: ten agents running skill runs with
phases and answered questions, so the state stays the same size at every
length and only the history varies; snapshots cut by the daemon's default
policy; the segment indexes written with them). Then, in rounds that alternate
the order of the sizes, the real daemon is started on each, twice: as it is
(start to READY=1: crash recovery, which takes what the segment indexes
describe and verifies every record after them) and with the indexes moved
aside (the full scan every start made before them: every record verified and
decoded); the indexes are put back as they were after each start, so every
round restarts from the same files. Then, on a third start, its RSS is read
from /proc, and over its socket: `rewind` near the tip and to the middle (each
followed by a `checkout` back to the tip), `state.get` at past seqs in the
middle of the history (reconstruct: nearest snapshot + replay),
`generations.list` first page.

The floor for the full scan is reading the same WAL bytes sequentially.

    python -m bench.scaling [--sizes 10000,1000000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
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


def _open_line(stderr: Path) -> dict[str, Any]:
    """The daemon's `storage.open` log line (JSON)."""
    for line in reversed(stderr.read_text(errors="replace").splitlines()):
        if '"storage.open"' in line:
            return dict(json.loads(line))
    raise RuntimeError(f"no storage.open line in {stderr}")


def _timed_start(base: Path, root: Path, name: str) -> tuple[float, float]:
    """Start to READY=1 and the storage open inside it (s), on a fresh log file."""
    daemon = start_reynd(name, root, base)
    try:
        opened = _open_line(daemon.stderr)
    finally:
        daemon.stop()
    daemon.stderr.unlink()
    return daemon.ready_s, opened["duration_ms"] / 1e3


def measure_restarts(base: Path, info: dict[str, Any]) -> dict[str, float]:
    """A start through the segment indexes, then one by a full scan; the indexes restored."""
    index = info["root"] / "state" / "index"
    kept = base / "index-kept"
    had = index.is_dir()  # a history too short for a snapshot has none
    if had:
        shutil.copytree(index, kept)
    try:
        ready, opened = _timed_start(base, info["root"], f"i{info['head']}")
        shutil.rmtree(index, ignore_errors=True)
        scan_ready, scan_opened = _timed_start(base, info["root"], f"f{info['head']}")
    finally:
        shutil.rmtree(index, ignore_errors=True)
        if had:
            kept.rename(index)
    return {
        "restart_s": ready,
        "open_s": opened,
        "restart_scan_s": scan_ready,
        "open_scan_s": scan_opened,
    }


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
    measure: bool = True,
) -> list[dict[str, Any]]:
    """Rows per size; `measure=False`: the restarts only (no RSS, rewinds, reads)."""
    built = build(base, sizes, log)
    samples: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    floors: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(rounds):
        order = sizes if r % 2 == 0 else sizes[::-1]
        for n in order:
            nbytes, dt = read_floor(built[n]["root"])
            floors[n].append(dt)
            built[n]["wal_bytes"] = nbytes
            sample = measure_restarts(base, built[n])
            if measure:
                sample.update(measure_once(base, built[n], reps))
            samples[n].append(sample)
            log(
                f"    round {r + 1}: {n:.0e} entries, restart {sample['restart_s']:.3f} s, "
                f"by a full scan {sample['restart_scan_s']:.3f} s"
            )
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
        row["restart_scan_vs_floor"] = row["restart_scan_s"] / row["read_floor_s"]
        rows.append(row)
    return rows


def restart_table(rows: list[dict[str, Any]]) -> list[str]:
    """Restart through the indexes and by a full scan, side by side, and both vs the smallest."""
    lo = rows[0]
    vs = f"x {lo['entries']:.0e}"
    out = [
        f"   {'entries':>9} {'WAL MiB':>7} {'restart s':>9} {vs:>7} {'open ms':>8} "
        f"{'full scan s':>11} {vs:>7} {'open ms':>8} {'read ms':>8}",
    ]
    for s in rows:
        out.append(
            f"   {s['entries']:>9,} {s['wal_bytes'] / 2**20:7.1f} {s['restart_s']:9.3f} "
            f"{s['restart_s'] / lo['restart_s']:7.2f} {s['open_s'] * 1e3:8.1f} "
            f"{s['restart_scan_s']:11.3f} {s['restart_scan_s'] / lo['restart_scan_s']:7.2f} "
            f"{s['open_scan_s'] * 1e3:8.1f} {s['read_floor_s'] * 1e3:8.1f}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,1000000", help="WAL entries, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="directory on the file system to measure")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="reynd-scaling-", dir=args.dir))
    try:
        rows = run(
            base,
            sizes,
            rounds=args.rounds,
            log=lambda m: print(m, file=sys.stderr, flush=True),
            measure=False,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return
    print(f"Restart (start to READY=1), best of {args.rounds} alternating rounds")
    print("\n".join(restart_table(rows)))
    lo, hi = rows[0], rows[-1]
    ratio = hi["restart_s"] / lo["restart_s"]

    def median_ratio(key: str) -> float:
        return float(
            statistics.median(hi[key + "_rounds"]) / statistics.median(lo[key + "_rounds"])
        )

    print(
        f"restart {hi['entries']:.0e} vs {lo['entries']:.0e}: x{ratio:.2f} best, "
        f"x{median_ratio('restart_s'):.2f} median (target <= 1.5: "
        f"{'met' if ratio <= 1.5 else 'MISSED'}); by a full scan: "
        f"x{hi['restart_scan_s'] / lo['restart_scan_s']:.2f} best, "
        f"x{median_ratio('restart_scan_s'):.2f} median"
    )


if __name__ == "__main__":
    main()

"""Time lookup vs seq lookup vs a name lookup, at 10^4 and 10^6 records (issue 24).

The index structures are built in-process, as a daemon's start builds them
(no WAL of 10^6 records is needed): a log of N records where every third is
a checkpoint and every 5,000th a reset record (a rewind 100 records back), so
the active lineage holds N / 5,000 intervals. Then, side by side in one run
and in alternating rounds, the median cost of one lookup at random points of
the whole history:

- time: `checkpoint_at` (rewind --at) and `tip_at` (checkout --at);
- seq: what a `rewind SEQ` checks first, `Lineage.is_active` + `Catalog.at`;
- name: a tag's lookup as the daemon makes it (`core.tags.resolve` over the
  tag table, one tag every 100 records); the bare `dict.get` of a dict of the
  same names is timed too, as the floor.

Printed as ratios (time / seq, time / name, and each lookup at 10^6 / 10^4):
the issue asks that time and name lookups stay within 1.5x of each other.

    python -m bench.timeline [--sizes 10000,1000000] [--lookups 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from reynd.core.catalog import Catalog
from reynd.core.lineage import Lineage
from reynd.core.tags import Tags, resolve
from reynd.core.timeline import Timeline

EVERY_CHECKPOINT = 3
EVERY_RESET = 5000
EVERY_TAG = 100
START = 1_767_225_600.0  # 2026-01-01, one record every 10 ms


def build(n: int) -> tuple[Lineage, Catalog, Timeline, float]:
    """The lineage, catalog and time index of an n-record log; and the build's seconds."""
    lineage, catalog = Lineage(), Catalog()
    resets: list[tuple[int, int, float]] = []
    for seq in range(1, n + 1):
        ts = START + seq / 100
        if seq % EVERY_RESET == 0:
            target = seq - 100
            lineage.observe(seq, target)
            resets.append((seq, target, ts))
        else:
            lineage.observe(seq)
            if seq % EVERY_CHECKPOINT == 0:
                catalog.add(seq, "turn", "ada", ts, "")
    t = time.perf_counter()
    seqs, times = catalog.times()
    timeline = Timeline.build(seqs, times, resets)
    return lineage, catalog, timeline, time.perf_counter() - t


def per_call(fn: Callable[[Any], object], args: list[Any]) -> float:
    """Seconds per call of fn over args (one timed loop)."""
    t = time.perf_counter()
    for a in args:
        fn(a)
    return (time.perf_counter() - t) / len(args)


def measure(n: int, lookups: int, rounds: int, rng: random.Random) -> dict[str, Any]:
    lineage, catalog, timeline, built_s = build(n)
    names = {f"tag-{i}": i * EVERY_TAG for i in range(max(1, n // EVERY_TAG))}
    tags = Tags()
    for i, (name, target) in enumerate(names.items()):
        tags.observe((n + 1 + i, name, target))  # tag records after the log's records
    times = [START + rng.uniform(0, n / 100) for _ in range(lookups)]
    seqs = [rng.randrange(1, n + 1) for _ in range(lookups)]
    keys = [f"tag-{rng.randrange(len(names))}" for _ in range(lookups)]

    def seq_lookup(s: int) -> object:
        return lineage.is_active(s) and catalog.at(s)

    def name_lookup(name: str) -> int:
        return resolve(tags, name).target

    cases: dict[str, tuple[Callable[[Any], object], list[Any]]] = {
        "checkpoint_at": (lambda t: timeline.checkpoint_at(t, lineage.active_below), times),
        "tip_at": (timeline.tip_at, times),
        "seq": (seq_lookup, seqs),
        "name": (name_lookup, keys),
        "dict.get": (names.get, keys),
        # A tag resolved to a seq and checked as `rewind SEQ` checks it: a whole address.
        "name+seq": (lambda k: seq_lookup(name_lookup(k)), keys),
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))
        for key in order:
            fn, args = cases[key]
            samples[key].append(per_call(fn, args))
    med = {k: statistics.median(v) * 1e9 for k, v in samples.items()}  # ns
    return {
        "records": n,
        "positions": len(timeline),
        "active_intervals": len(lineage.active_intervals()),
        "build_s": round(built_s, 4),
        "ns": {k: round(v, 1) for k, v in med.items()},
        "ratio": {
            "checkpoint_at/seq": round(med["checkpoint_at"] / med["seq"], 2),
            "tip_at/seq": round(med["tip_at"] / med["seq"], 2),
            "checkpoint_at/name": round(med["checkpoint_at"] / med["name"], 2),
            "tip_at/name": round(med["tip_at"] / med["name"], 2),
            "checkpoint_at/name+seq": round(med["checkpoint_at"] / med["name+seq"], 2),
            "tip_at/name+seq": round(med["tip_at"] / med["name+seq"], 2),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--lookups", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(24)
    sizes = [int(s) for s in args.sizes.split(",")]
    results = [measure(n, args.lookups, args.rounds, rng) for n in sizes]
    small, large = results[0], results[-1]
    growth = {k: round(large["ns"][k] / small["ns"][k], 2) for k in small["ns"]}
    if args.json:
        print(json.dumps({"sizes": results, "growth": growth}))
        return
    for r in results:
        ns = "  ".join(f"{k} {v:.0f} ns" for k, v in r["ns"].items())
        ratios = "  ".join(f"{k} {v}x" for k, v in r["ratio"].items())
        print(f"{r['records']:>9} records ({r['positions']} positions, build {r['build_s']} s)")
        print(f"    {ns}\n    {ratios}")
    grown = "  ".join(f"{k} {v}x" for k, v in growth.items())
    print(f"{large['records']} / {small['records']} records: {grown}")


if __name__ == "__main__":
    main()

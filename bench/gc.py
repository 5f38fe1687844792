"""GC cost vs amount dropped: truncation must cost what it drops, not what it keeps.

    python -m bench.gc [--dir DIR] [--drop N] [--keep N] [--repeat R] [--json]

Two state directories share the same first `--drop` records and differ only
in how much history follows them: `--keep` records (1x) and ten times that
(10x). A collection under `wal_keep_records` then drops the same whole
segments in both (same floor, same entry snapshot, same bytes). Each
collection runs on a fresh copy of the directory, opened first (open is not
timed), R times; the median of `collect` (plan, entry snapshots, trial
reconstruct, retained file, deletions) is reported, and the ratio 10x / 1x
(target: at most 1.3).

The workload keeps the live state the same size whatever the history length
(8 agents whose configuration is rewritten, a rewind every 2,000 records), so
that what differs between the two runs is only the kept history: its
segments, snapshots, catalog entries and reset records. (With a state that
grows with history, the trial reconstruct of the tip loads a bigger snapshot:
that cost follows the state's size, which retention does not change.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from reynd.core.retention import RetentionPolicy, without_horizon
from reynd.protocol import events as ev
from reynd.storage.gc import collect
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

AGENTS = 8
BATCH = 256  # records per append call (one fsync each): building is not what is measured
REWIND_EVERY = 2_000
OPTIONS = StorageOptions(segment_bytes=256 * 1024, snapshot_min_bytes=64 * 1024)


def _event(i: int) -> ev.Event:
    return ev.AgentConfigured(
        agent=f"a{i % AGENTS}", options={"step": i, "note": "n" * 40, "temperature": 0.5}
    )


def build(root: Path, total: int) -> None:
    """`total` records: agents created, then configuration changes, rewinds now and then."""
    with Store.open(root, OPTIONS) as store:
        store.append([ev.AgentCreated(agent=f"a{k}") for k in range(AGENTS)])
        i = store.head
        while store.head < total:
            n = min(BATCH, total - store.head)
            store.append([_event(i + k) for k in range(n)])
            i += n
            if store.head // REWIND_EVERY != (store.head - n) // REWIND_EVERY:
                store.rewind(store.head - 10)  # a branch of 10 abandoned records
            if store.snapshot_due():
                store.snapshot_now()


def measure(template: Path, work: Path, keep: int, repeat: int) -> dict[str, Any]:
    times: list[float] = []
    report = None
    for r in range(repeat):
        root = work / f"run{r}"
        shutil.copytree(template, root)
        os.sync()  # the copy's writeback must not land inside the timed collection
        with Store.open(root, OPTIONS) as store:
            head = store.head
            t = time.perf_counter()
            policy = without_horizon(RetentionPolicy(wal_keep_records=keep, snapshot_keep=0))
            report = collect(store, policy)
            times.append((time.perf_counter() - t) * 1e3)
        shutil.rmtree(root)
    assert report is not None
    return {
        "head": head,
        "floor": report.floor,
        "kept_records": head - report.floor + 1,
        "segments_dropped": report.segments_dropped,
        "bytes_dropped": report.bytes_dropped,
        "snapshots_dropped": report.snapshots_dropped,
        "entry_snapshots": report.snapshots_written,
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "runs_ms": [round(x, 3) for x in times],
    }


def run(base: Path, drop: int, keep: int, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for label, factor in (("1x", 1), ("10x", 10)):
        template = base / f"template-{label}"
        kept = keep * factor
        build(template / "reyn", drop + kept)
        # Keep exactly the records after the first `drop` ones: both runs cut at the same
        # segment boundary (the floor is a segment's first seq).
        results[label] = measure(template / "reyn", base, kept, repeat)
        shutil.rmtree(template)
    one, ten = results["1x"], results["10x"]
    # Timestamps vary in width by a byte or so: segment boundaries may shift by a record.
    same = (
        one["segments_dropped"] == ten["segments_dropped"]
        and abs(one["bytes_dropped"] - ten["bytes_dropped"]) <= 0.01 * one["bytes_dropped"]
    )
    return {
        "drop_records": drop,
        "keep_records": keep,
        "segment_bytes": OPTIONS.segment_bytes,
        "same_amount_dropped": same,
        "1x": one,
        "10x": ten,
        "ratio_10x_over_1x": ten["median_ms"] / one["median_ms"],
        "target": 1.3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gc", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, help="Where to build the state directories.")
    parser.add_argument("--drop", type=int, default=20_000, help="Records dropped (both runs).")
    parser.add_argument("--keep", type=int, default=20_000, help="Records kept in the 1x run.")
    parser.add_argument("--repeat", type=int, default=7, help="Collections timed per run.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="reynd-bench-gc-", dir=args.dir))
    try:
        res = run(base, args.drop, args.keep, args.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"GC cost vs history kept ({res['drop_records']} records dropped in both runs)")
    for label in ("1x", "10x"):
        r = res[label]
        print(
            f"  {label:>3}: kept {r['kept_records']:>7} records, dropped "
            f"{r['segments_dropped']} segments ({r['bytes_dropped'] / 1024:.0f} KiB) and "
            f"{r['snapshots_dropped']} snapshots, wrote {r['entry_snapshots']} entry "
            f"snapshot(s): median {r['median_ms']:.2f} ms (min {r['min_ms']:.2f})"
        )
    verdict = "ok" if res["ratio_10x_over_1x"] <= res["target"] else "ABOVE TARGET"
    print(
        f"  ratio 10x / 1x: {res['ratio_10x_over_1x']:.2f} (target <= {res['target']}: {verdict})"
    )
    if not res["same_amount_dropped"]:
        print("  warning: the two runs did not drop the same segments")


if __name__ == "__main__":
    main()

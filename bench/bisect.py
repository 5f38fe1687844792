"""A bisect step vs one `state.get` at the same seqs (issue 27).

A state directory of N records (10^5, and 10^6 with --sizes) is built through the
storage API: ten agents running skill runs, as bench.scaling builds them, with agent
`ada` ending a turn at 1,000 evenly spaced points (1,000 checkpoints), snapshots cut
by the daemon's default policy. The real daemon is started on it. Then, for searches
whose first bad checkpoint is drawn at random, the probes `reynctl bisect` would test
are materialized as `bisect run` does it (reynctl.bisect.checkout: the workspace tree,
here off, and reyn-state.json in a fresh directory; the directory removed after), and
`state.get` is called at the same seqs through the same client, the two alternating
probe by probe. The issue's bound: a step within 2x of one state.get at its seq, at
any history length (a step costs what the state as of its seq costs, not the history).

    python -m bench.bisect [--sizes 100000,1000000] [--searches 5] [--json]

The checkouts go where `bisect run` puts them, under $TMPDIR: on a disk that other
processes keep busy with fsyncs, making and removing a directory can wait on the
file system's journal, which a step pays and a state.get does not. Run it with
TMPDIR=/dev/shm as well to see the bisect's own cost.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.daemon import start_reynd
from reynctl.bisect.checkout import Checkouts
from reynctl.bisect.search import Verdict, next_probe
from reynctl.client import Client
from reynd.protocol import events as ev
from reynd.protocol import methods as m
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

CHECKPOINTS = 1000
SNAPSHOT_SPACING = 256 * 1024  # StorageOptions.snapshot_min_bytes: the daemon's default


def build(root: Path, total: int) -> list[int]:
    """N records with `CHECKPOINTS` turns of ada spread evenly; the turns' seqs."""
    opts = StorageOptions(snapshot_min_bytes=SNAPSHOT_SPACING, snapshot_ratio=1e-9)
    store = Store.open(root, opts)
    agents = [f"a{k}" for k in range(10)]
    store.append([ev.AgentCreated(agent=a) for a in [*agents, "ada"]])
    every = total // CHECKPOINTS
    turns: list[int] = []
    i = 0
    while store.head < total:
        batch: list[ev.Event] = []
        while store.head + len(batch) < (len(turns) + 1) * every - 3:
            a, run = agents[i % 10], f"r{i}"
            batch += [
                ev.SkillStarted(agent=a, run_id=run, skill="build"),
                ev.SkillPhase(agent=a, run_id=run, phase="act"),
                ev.SkillEnded(agent=a, run_id=run),
            ]
            i += 1
        n = len(turns)
        batch += [
            ev.MessageReceived(agent="ada", message_id=f"m{n}", text=f"turn {n}"),
            ev.TurnStarted(agent="ada", turn_id=f"t{n}", message_id=f"m{n}"),
            ev.TurnEnded(agent="ada", turn_id=f"t{n}", reply=f"reply {n}"),
        ]
        store.append(batch)
        turns.append(store.head)
        if store.snapshot_due():
            store.snapshot_now()
    store.close()
    return turns


def probes(turns: list[int], rng: random.Random) -> list[int]:
    """The seqs one search tests, for a first bad checkpoint drawn at random."""
    first_bad = rng.randrange(len(turns))
    verdicts: dict[int, Verdict] = {}
    while (seq := next_probe(turns, verdicts)) is not None:
        verdicts[seq] = "bad" if turns.index(seq) >= first_bad else "good"
    return list(verdicts)


def measure(base: Path, n: int, searches: int, rng: random.Random) -> dict[str, Any]:
    root = base / f"S{n}"
    t = time.perf_counter()
    turns = build(root, n)
    built_s = time.perf_counter() - t
    proc = start_reynd(f"bisect-{n}", root, base)
    step_s: list[float] = []
    get_s: list[float] = []
    steps = 0
    try:
        with Client(proc.socket, timeout=120) as c:
            checkouts = Checkouts(c, None)
            try:
                for _ in range(searches):
                    for k, seq in enumerate(probes(turns, rng)):
                        steps += 1

                        def step(seq: int = seq) -> None:
                            work, _ = checkouts.make(seq)
                            checkouts.remove(work)

                        def get(seq: int = seq) -> None:
                            c.call("state.get", m.StateParams(seq=seq), m.StateResult)

                        pair = [(step, step_s), (get, get_s)]
                        for fn, out in pair if k % 2 == 0 else pair[::-1]:
                            t = time.perf_counter()
                            fn()
                            out.append(time.perf_counter() - t)
            finally:
                checkouts.close()
    finally:
        proc.stop()
    step_ms, get_ms = statistics.median(step_s) * 1e3, statistics.median(get_s) * 1e3
    ratios = sorted(a / b for a, b in zip(step_s, get_s, strict=True))
    return {
        "records": n,
        "checkpoints": len(turns),
        "built_s": round(built_s, 1),
        "steps": steps,
        "steps_per_search": steps / searches,
        "step_ms": round(step_ms, 3),
        "state_get_ms": round(get_ms, 3),
        "ratio": round(step_ms / get_ms, 2),  # of the medians: the bound, <= 2
        "pair_ratio_median": round(statistics.median(ratios), 2),
        "pair_ratio_p90": round(ratios[int(0.9 * (len(ratios) - 1))], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000", help="comma-separated record counts")
    ap.add_argument("--searches", type=int, default=5)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            print(f"  {n:.0e} records ...", file=sys.stderr, flush=True)
            rows.append(measure(Path(tmp), n, args.searches, rng))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        "records  checkpoints  steps/search  step ms  state.get ms  step/get  (pairs: median, p90)"
    )
    for r in rows:
        print(
            f"{r['records']:>7}  {r['checkpoints']:>11}  {r['steps_per_search']:>12.1f}  "
            f"{r['step_ms']:>7.2f}  {r['state_get_ms']:>12.2f}  {r['ratio']:>8.2f}  "
            f"({r['pair_ratio_median']:.2f}, {r['pair_ratio_p90']:.2f})"
        )


if __name__ == "__main__":
    main()

"""One turn written as 4 wal.append calls vs one 4-event wal.append_batch.

    python -m bench.batch [--json] [--seconds S] [--rounds R]

An external runtime's turn is 4 records (message.received, turn.started,
step.committed, turn.ended, as bench/workload.py writes them). Written one
`wal.append` per record, a turn costs 4 round trips and 4 group commits;
with `wal.append_batch` it costs one of each. Both run against the same real
`reynd serve`, from 1 and from 4 client threads (each its own agent),
alternating window by window so that drift hits both alike.

Reported: turns/s and the median turn latency of each, and the ratio
batch/singles (above 1: the batch is faster). The machine is shared and
noisy: read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.daemon import Client, start_reynd

WRITERS = (1, 4)
MODES = ("singles", "batch")


def turn_events(i: int, tag: str) -> list[dict[str, Any]]:
    """The 4 events of one turn, as {kind, data}; texts as bench/peer.py's (no LangGraph here)."""
    msg, turn = f"m{i}{tag}", f"t{i}{tag}"
    user_text = f"Please fix the failing check in module {i % 37}, request {i}"
    reply = f"Done: updated the config and ran the tests for request {i}; all green."
    return [
        {"kind": "message.received", "data": {"message_id": msg, "text": user_text}},
        {"kind": "turn.started", "data": {"message_id": msg, "turn_id": turn}},
        {
            "kind": "step.committed",
            "data": {
                "turn_id": turn,
                "step": 0,
                "messages": [{"role": "assistant", "content": reply}],
            },
        },
        {"kind": "turn.ended", "data": {"turn_id": turn, "reply": reply}},
    ]


def _writer(sock: Path, agent: str, mode: str, deadline: float, out: list[float]) -> None:
    client, i = Client(sock), 0
    try:
        while time.perf_counter() < deadline:
            events = turn_events(i, mode)
            t = time.perf_counter()
            if mode == "batch":
                client.call("wal.append_batch", {"agent": agent, "events": events})
            else:
                for e in events:
                    client.call("wal.append", {"agent": agent, **e})
            out.append(time.perf_counter() - t)
            i += 1
    finally:
        client.close()


def window(sock: Path, agents: list[str], mode: str, seconds: float) -> tuple[list[float], float]:
    """Turns written by len(agents) threads for `seconds`: (latencies, elapsed)."""
    lat: list[list[float]] = [[] for _ in agents]
    deadline = time.perf_counter() + seconds
    threads = [
        threading.Thread(target=_writer, args=(sock, a, mode, deadline, lat[k]))
        for k, a in enumerate(agents)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [x for xs in lat for x in xs], time.perf_counter() - t0


def run(base: Path, seconds: float, rounds: int) -> list[dict[str, Any]]:
    proc = start_reynd("batch", base / "state", base)
    admin = Client(proc.socket)
    try:
        rows = []
        for writers in WRITERS:
            agents = {mode: [f"{mode}{writers}-{k}" for k in range(writers)] for mode in MODES}
            for name in [a for names in agents.values() for a in names]:
                admin.call("wal.append", {"agent": name, "kind": "agent.created"})
            lat: dict[str, list[float]] = {mode: [] for mode in MODES}
            elapsed = dict.fromkeys(MODES, 0.0)
            for r in range(rounds):
                for mode in MODES if r % 2 == 0 else MODES[::-1]:
                    got, took = window(proc.socket, agents[mode], mode, seconds)
                    lat[mode] += got
                    elapsed[mode] += took
            row: dict[str, Any] = {"writers": writers}
            for mode in MODES:
                row[f"{mode}_turns_s"] = len(lat[mode]) / elapsed[mode]
                row[f"{mode}_p50_ms"] = statistics.median(lat[mode]) * 1e3
            row["ratio_turns_s"] = row["batch_turns_s"] / row["singles_turns_s"]
            row["ratio_p50"] = row["singles_p50_ms"] / row["batch_p50_ms"]
            rows.append(row)
        return rows
    finally:
        admin.close()
        proc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="length of one window")
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))  # short: socket path
    try:
        rows = run(base, args.seconds, args.rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"a turn = 4 events; {args.rounds} rounds x {args.seconds:g}s windows, alternating")
    print(f"{'writers':>7} {'mode':>8} {'turns/s':>9} {'p50 ms':>8}")
    for row in rows:
        for mode in MODES:
            print(
                f"{row['writers']:>7} {mode:>8} {row[f'{mode}_turns_s']:>9.0f} "
                f"{row[f'{mode}_p50_ms']:>8.2f}"
            )
        print(
            f"{row['writers']:>7} {'ratio':>8} {row['ratio_turns_s']:>8.2f}x "
            f"{row['ratio_p50']:>7.2f}x   (batch / 4 singles: turns/s; p50 singles / batch)"
        )


if __name__ == "__main__":
    main()

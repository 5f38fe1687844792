"""Agent-runtime benchmark: builtin turns/s vs raw WAL appends of the same records.

    python -m bench.runtime [--json] [--seconds S] [--rounds R] [--history N]

A builtin chat turn is 3 act-steps (a tool call, its result, the reply) and
writes 9 WAL records: message.received (agents.send), turn.started,
3 x (step.started, step.committed), turn.ended. Each record is its own
durable append (one fdatasync unless batched with other agents' appends),
and a step cannot start before the previous record is acknowledged.

Three ways to write those 9 records per turn, measured alternately in the same
run, on the same file system, with 1 and 8 concurrent writers:

- runtime: the real `reynd serve` subprocess; one client thread per builtin
  agent, `agents.send` with wait, back to back (1 request per turn).
- wal.append: the same daemon; one client thread per external agent writing
  the same 9 records (same kinds, same payloads) one `wal.append` per record
  (9 requests per turn): an external runtime driving its own turns.
- committer: in-process Store + Committer (the daemon's group-commit path,
  as bench/storage.py measures it), one trio task per writer appending the
  same 9 records one at a time: the durable-append floor, no RPC, no runtime.

Reported: turns/s and records/s for each, ratios runtime/committer and
runtime/wal.append, the per-record time above the floor, and the daemon's CPU
time per record (read from /proc) for runtime vs wal.append: the runtime's
own cost per step, which the fsync wait hides in the wall-clock figures.

`--history N` also measures one agent's turns/s after N turns of history
(the history handed to every step grows with the agent's life).

This machine is shared and noisy: absolute figures drift, ratios hold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from bench.daemon import Client, Proc, start_reynd
from reynd.daemon.committer import Committer
from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

RECORDS_PER_TURN = 9
WRITERS = (1, 8)


def turn_records(agent: str, i: int) -> list[ev.Event]:
    """The 9 records of one builtin chat turn, payloads as the builtin executor writes them."""
    text, msg, turn = f"message {i}", f"m{i:010d}", f"t{i}"
    call_id = f"{turn}.lookup"
    call = ev.ToolCall(id=call_id, name="notes.lookup", arguments=f'{{"query":"{text}"}}')
    reply = (
        f"[builtin demo executor, no model] You said: {text!r}. "
        f"This is turn {turn}, step 2, with {4 * i + 3} messages of history."
    )
    steps: list[tuple[dict[str, Any], ev.Message]] = [
        ({"tokens_in": 2, "tokens_out": 3}, ev.Message(role="assistant", tool_calls=(call,))),
        ({}, ev.Message(role="tool", tool_call_id=call_id, content="no notes for 0123abcd")),
        (
            {"done": True, "reply": reply, "label": text, "tokens_in": 2, "tokens_out": 20},
            ev.Message(role="assistant", content=reply),
        ),
    ]
    out: list[ev.Event] = [
        ev.MessageReceived(agent=agent, message_id=msg, text=text),
        ev.TurnStarted(agent=agent, turn_id=turn, message_id=msg),
    ]
    for step, (output, message) in enumerate(steps):
        out += [
            ev.StepStarted(
                agent=agent, turn_id=turn, step=step, input={"text": text, "step": step}
            ),
            ev.StepCommitted(
                agent=agent,
                turn_id=turn,
                step=step,
                output=output,
                messages=(message,),
                tokens_in=int(output.get("tokens_in", 0)),
                tokens_out=int(output.get("tokens_out", 0)),
            ),
        ]
    out.append(ev.TurnEnded(agent=agent, turn_id=turn, reply=reply, label=text))
    return out


def _wire(e: ev.Event) -> dict[str, Any]:
    data = msgspec.to_builtins(e)
    for key in ("kind", "agent", "seq", "ts"):
        data.pop(key, None)
    return {"agent": e.agent, "kind": type(e).__struct_config__.tag, "data": data}  # type: ignore[attr-defined]


# -- the three writers ---------------------------------------------------------------------------


def _threads(n: int, seconds: float, work: Callable[[int, float], int]) -> tuple[int, float]:
    """Run `work(index, deadline)` in n threads started together; (total count, elapsed)."""
    barrier = threading.Barrier(n + 1)
    counts = [0] * n
    ends = [0.0] * n
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            barrier.wait()
            counts[k] = work(k, time.perf_counter() + seconds)
        except BaseException as exc:
            errors.append(exc)
        finally:
            ends[k] = time.perf_counter()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(counts), max(ends) - t0


class Daemon:
    """The reynd subprocess and the agents the benchmark made on it."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.client = Client(proc.socket)
        self._n = 0
        self.names: dict[str, list[str]] = {"runtime": []}
        self.single: set[str] = set()  # agents that ran alone (1 writer)

    def head(self) -> int:
        return int(self.client.call("daemon.status")["head"])

    def new_names(self, prefix: str, n: int) -> list[str]:
        names = [f"{prefix}{self._n + k}" for k in range(n)]
        self._n += n
        return names

    def measure(self, mode: str, writers: int, seconds: float) -> dict[str, float]:
        if mode == "runtime":
            names = self.new_names("b", writers)
            self.names["runtime"] += names
            if writers == 1:
                self.single |= set(names)
            for name in names:
                self.client.call("agents.create", {"name": name, "executor": "builtin"})
            work = self._runtime_work(names)
        else:
            names = self.new_names("x", writers)
            for name in names:
                self.client.call("wal.append", {"agent": name, "kind": "agent.created"})
            work = self._wal_append_work(names)
        head, cpu = self.head(), self.proc.cpu_s()
        turns, elapsed = _threads(writers, seconds, work)
        cpu = self.proc.cpu_s() - cpu
        records = self.head() - head
        assert records == turns * RECORDS_PER_TURN, (mode, records, turns)
        return {"turns": turns, "records": records, "elapsed": elapsed, "server_cpu": cpu}

    def _runtime_work(self, names: list[str]) -> Callable[[int, float], int]:
        def work(k: int, deadline: float) -> int:
            client, n = Client(self.proc.socket), 0
            try:
                while time.perf_counter() < deadline:
                    r = client.call(
                        "agents.send", {"agent": names[k], "text": f"message {n}", "wait": True}
                    )
                    assert r["outcome"] == "completed", r
                    n += 1
                return n
            finally:
                client.close()

        return work

    def _wal_append_work(self, names: list[str]) -> Callable[[int, float], int]:
        def work(k: int, deadline: float) -> int:
            client, n = Client(self.proc.socket), 0
            try:
                while time.perf_counter() < deadline:
                    for params in [_wire(e) for e in turn_records(names[k], n)]:
                        client.call("wal.append", params)
                    n += 1
                return n
            finally:
                client.close()

        return work

    def close(self) -> None:
        self.client.close()
        self.proc.stop()


def measure_committer(root: Path, writers: int, seconds: float) -> dict[str, float]:
    """The same records through Store + Committer in-process, one append per record."""
    store = Store.open(root, StorageOptions(snapshot_min_bytes=1 << 40))
    names = [f"c{k}" for k in range(writers)]
    store.append([ev.AgentCreated(agent=name) for name in names])

    async def main() -> tuple[int, float]:
        committer = Committer(store, lambda events: None)
        committer.start()
        counts = [0] * writers

        async def writer(k: int, deadline: float) -> None:
            while time.perf_counter() < deadline:
                for record in turn_records(names[k], counts[k]):
                    await committer.append([record])
                counts[k] += 1

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for k in range(writers):
                nursery.start_soon(writer, k, t0 + seconds)
        elapsed = time.perf_counter() - t0
        await committer.stop()
        return sum(counts), elapsed

    try:
        cpu0 = time.process_time()
        turns, elapsed = trio.run(main)
        cpu = time.process_time() - cpu0
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    return {
        "turns": turns,
        "records": turns * RECORDS_PER_TURN,
        "elapsed": elapsed,
        "server_cpu": cpu,
    }


def measure_history(d: Daemon, turns: int, seconds: float) -> dict[str, float]:
    """One agent's turns/s when fresh vs after `turns` turns of history (same daemon)."""
    (old,) = d.new_names("h", 1)
    d.client.call("agents.create", {"name": old, "executor": "builtin"})
    client = Client(d.proc.socket)
    try:
        for n in range(turns):
            client.call("agents.send", {"agent": old, "text": f"message {n}", "wait": True})
    finally:
        client.close()
    out: dict[str, float] = {"history_turns": turns}
    for label in ("fresh", "old", "fresh2"):
        if label == "old":
            names = [old]
        else:
            names = d.new_names("h", 1)
            d.client.call("agents.create", {"name": names[0], "executor": "builtin"})
        cpu = d.proc.cpu_s()
        n, elapsed = _threads(1, seconds, d._runtime_work(names))
        out[f"{label}_turns_s"] = n / elapsed
        out[f"{label}_server_us_per_turn"] = (d.proc.cpu_s() - cpu) / n * 1e6
    out["fresh_turns_s"] = (out.pop("fresh_turns_s") + out.pop("fresh2_turns_s")) / 2
    out["fresh_server_us_per_turn"] = (
        out.pop("fresh_server_us_per_turn") + out.pop("fresh2_server_us_per_turn")
    ) / 2
    out["ratio_old_vs_fresh"] = out["old_turns_s"] / out["fresh_turns_s"]
    return out


def step_gaps(state_dir: Path, agents: list[str]) -> dict[str, float]:
    """Median time between consecutive records of lone builtin agents, from WAL timestamps.

    `started->committed` is the executor call (instant for builtin) plus one
    durable append; `committed->started` is the runner's work between two
    steps plus one durable append: their difference is the runner's own
    overhead per step, with the fsync cancelled out.
    """
    wanted = set(agents)
    per: dict[str, list[float]] = {"started_to_committed": [], "committed_to_started": []}
    with Store.open(state_dir) as store:
        last: dict[str, ev.Event] = {}
        for e in store.wal.read(1, store.head):
            agent = getattr(e, "agent", None)
            if agent not in wanted:
                continue
            prev = last.get(agent)
            last[agent] = e
            if isinstance(prev, ev.StepStarted) and isinstance(e, ev.StepCommitted):
                per["started_to_committed"].append(e.ts - prev.ts)
            elif isinstance(prev, ev.StepCommitted) and isinstance(e, ev.StepStarted):
                per["committed_to_started"].append(e.ts - prev.ts)
    if not all(per.values()):
        return {}
    out = {f"{k}_us": statistics.median(v) * 1e6 for k, v in per.items()}
    out["runner_us_per_step"] = out["committed_to_started_us"] - out["started_to_committed_us"]
    return out


# -- main ----------------------------------------------------------------------------------


def run(base: Path, seconds: float, rounds: int, history: int) -> dict[str, Any]:
    proc = start_reynd("rt", base / "state", base)
    d = Daemon(proc)
    windows: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        modes = ["runtime", "wal.append", "committer"]
        for r in range(rounds):
            order = modes if r % 2 == 0 else modes[::-1]  # drift hits every mode alike
            for writers in WRITERS:
                for mode in order:
                    if mode == "committer":
                        w = measure_committer(base / f"c{r}-{writers}", writers, seconds)
                    else:
                        w = d.measure(mode, writers, seconds)
                    windows.setdefault((mode, writers), []).append(w)
        hist = measure_history(d, history, seconds) if history else None
        single = [n for n in d.names["runtime"] if n in d.single]
    finally:
        d.close()
    gaps = step_gaps(base / "state", single)
    rows = []
    for writers in WRITERS:
        row: dict[str, Any] = {"writers": writers}
        for mode in modes:
            ws = windows[(mode, writers)]
            turns = sum(w["turns"] for w in ws)
            elapsed = sum(w["elapsed"] for w in ws)
            key = mode.replace(".", "_")
            row[f"{key}_turns_s"] = turns / elapsed
            row[f"{key}_records_s"] = turns * RECORDS_PER_TURN / elapsed
            row[f"{key}_turns_s_rounds"] = [round(w["turns"] / w["elapsed"], 1) for w in ws]
            row[f"{key}_cpu_us_per_record"] = (
                sum(w["server_cpu"] for w in ws) / (turns * RECORDS_PER_TURN) * 1e6
            )
        rt, raw, wa = (
            row["runtime_records_s"],
            row["committer_records_s"],
            row["wal_append_records_s"],
        )
        row["ratio_vs_committer"] = rt / raw
        row["ratio_vs_wal_append"] = rt / wa
        row["runtime_us_per_record_above_floor"] = (1 / rt - 1 / raw) * 1e6
        row["wal_append_us_per_record_above_floor"] = (1 / wa - 1 / raw) * 1e6
        rows.append(row)
    return {
        "records_per_turn": RECORDS_PER_TURN,
        "seconds": seconds,
        "rounds": rounds,
        "rows": rows,
        "history": hist,
        "step_gaps": gaps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one window")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    ap.add_argument(
        "--history",
        type=int,
        default=1000,
        help="turns of history for the aging measurement (0: skip)",
    )
    ap.add_argument("--dir", default=None, help="where to put the state (default /tmp)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rr-", dir=args.dir or "/tmp"))  # short: socket path
    try:
        out = run(base, args.seconds, args.rounds, args.history)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"builtin turn = {RECORDS_PER_TURN} records; {args.rounds} rounds x {args.seconds:g}s "
        "windows, alternating; cpu = daemon CPU per record (committer: in-process)"
    )
    print(
        f"{'writers':>7} {'mode':>10} {'turns/s':>9} {'records/s':>10} {'cpu us/rec':>10}  rounds"
    )
    for row in out["rows"]:
        for mode in ("runtime", "wal_append", "committer"):
            print(
                f"{row['writers']:>7} {mode:>10} {row[f'{mode}_turns_s']:9.1f} "
                f"{row[f'{mode}_records_s']:10.0f} {row[f'{mode}_cpu_us_per_record']:10.0f}  "
                f"{row[f'{mode}_turns_s_rounds']}"
            )
        print(
            f"{'':>7} ratio runtime/committer {row['ratio_vs_committer']:.2f}, "
            f"runtime/wal.append {row['ratio_vs_wal_append']:.2f}; above the floor per record: "
            f"runtime {row['runtime_us_per_record_above_floor']:.0f} us, "
            f"wal.append {row['wal_append_us_per_record_above_floor']:.0f} us"
        )
    g = out["step_gaps"]
    if g:
        print(
            f"lone builtin agent, median between records (WAL timestamps): "
            f"step.started->step.committed {g['started_to_committed_us']:.0f} us, "
            f"step.committed->next step.started {g['committed_to_started_us']:.0f} us: "
            f"runner overhead {g['runner_us_per_step']:.0f} us per step"
        )
    h = out["history"]
    if h:
        print(
            f"one agent after {h['history_turns']} turns: {h['old_turns_s']:.1f} turns/s "
            f"({h['old_server_us_per_turn']:.0f} us daemon CPU/turn) vs fresh "
            f"{h['fresh_turns_s']:.1f} turns/s ({h['fresh_server_us_per_turn']:.0f} us/turn): "
            f"ratio {h['ratio_old_vs_fresh']:.2f}"
        )


if __name__ == "__main__":
    main()

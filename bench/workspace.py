"""Workspace rewind: what a step and a boundary cost with 0, 1 and 10 changed files, 10,000 files.

    python -m bench.workspace [--files N] [--rounds R] [--turns T] [--dir DIR] [--json]

Part 1, in-process (Store + Committer + Workspace, the daemon's own path):
a tree of N files (1-4 KiB each, 100 directories, mtimes 10 s in the past)
is taken as the baseline, then for K in 0, 1, 10, R rounds of:

- a step: K files rewritten, then the step's commit (`record`: drain the
  watcher, read and store the K files, stage a workspace.files record and
  the memo, wait for the fsync); its wall time, the workspace's own part
  (everything but the fsync), files read and bytes stored;
- a boundary: a turn.ended after that step (the tree's changed manifests
  stored before it is staged), and the trees/<seq> file written after it;

and, interleaved with the K = 0 steps, the same memo appended with workspace
rewind off (`Committer.append`): the commit latency a step that changed
nothing pays for workspace rewind is the ratio of the two medians.

Part 2, the real daemon (`reynd serve`, builtin agent, 3 steps per turn):
R rounds of T turns back to back with workspace rewind on (the same 10,000
files) and off, alternating; the ratio of the median time per turn is what
a step costs end to end with nothing changed.

Also: a checkout's cost (dirty check, unrecorded-change scan, restore of 10
files) and a restart's first look (every file read once).

This machine is shared and noisy: absolute figures drift, ratios hold.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.daemon import Client, start_reynd
from reynd.daemon.committer import Committer
from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store
from reynd.workspace import Workspace, WorkspaceConfig

CHANGED = (0, 1, 10)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_tree(ws: Path, files: int) -> list[Path]:
    paths = []
    past = time.time() - 10
    for i in range(files):
        p = ws / f"d{i % 100:02d}" / f"f{i:05d}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes((f"file {i} " * 400)[: 1024 + (i * 37) % 3072].encode())
        os.utime(p, (past, past))
        paths.append(p)
    return paths


def _med(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


async def _in_process(base: Path, files: int, rounds: int) -> dict[str, Any]:
    ws = base / "ws"
    state_dir = ws / ".reyn"
    ws.mkdir()
    paths = write_tree(ws, files)
    store = Store.open(state_dir, StorageOptions(snapshot_min_bytes=1 << 40))
    committer = Committer(store, lambda events: w.committed(events))  # noqa: PLW0108
    committer.start()
    w = Workspace(WorkspaceConfig(enabled=True), state_dir, store)
    out: dict[str, Any] = {"files": files, "tree_bytes": sum(p.stat().st_size for p in paths)}
    try:
        t = time.perf_counter()
        await w.start(0)
        await w.settle()
        out["baseline_ms"] = round((time.perf_counter() - t) * 1e3, 1)
        out["baseline_bytes"] = _du(state_dir / "state")
        await committer.append([ev.AgentCreated(agent="a")])
        n = 0

        def memo() -> ev.StepCommitted:
            return ev.StepCommitted(agent="a", turn_id="t", step=n)

        per_k: dict[str, Any] = {}
        off: list[float] = []
        for k in CHANGED:
            step_ms: list[float] = []
            ws_ms: list[float] = []
            bound_ms: list[float] = []
            ptr_ms: list[float] = []
            step_bytes: list[float] = []
            bound_bytes: list[float] = []
            hashed: list[int] = []
            for _ in range(rounds):
                n += 1
                for j in range(k):
                    paths[(n * 997 + j * 131) % files].write_bytes(
                        f"round {n} file {j} ".encode() * 64
                    )
                t = time.perf_counter()
                await w.record(committer, [memo()])
                step_ms.append((time.perf_counter() - t) * 1e3)
                assert w.last_record is not None and w.last_record.changed == k
                ws_ms.append(w.last_record.duration_ms)
                step_bytes.append(w.last_record.bytes_added)
                hashed.append(w.last_record.hashed)
                if k == 0:  # the same commit with workspace rewind off
                    t = time.perf_counter()
                    await committer.append([memo()])
                    off.append((time.perf_counter() - t) * 1e3)
                t = time.perf_counter()
                (end,) = await w.record(committer, [ev.TurnEnded(agent="a", turn_id=f"t{n}")])
                bound_ms.append((time.perf_counter() - t) * 1e3)
                bound_bytes.append(w.last_record.bytes_added)
                t = time.perf_counter()
                await w.on_generation(end.seq)
                ptr_ms.append((time.perf_counter() - t) * 1e3)
            per_k[str(k)] = {
                "step_ms": _med(step_ms),
                "step_workspace_ms": _med(ws_ms),
                "step_files_read": max(hashed),
                "step_bytes_stored": _med(step_bytes),
                "boundary_ms": _med(bound_ms),
                "boundary_bytes_stored": _med(bound_bytes),
                "tree_file_ms": _med(ptr_ms),
            }
        out["per_changed"] = per_k
        out["step_commit_off_ms"] = _med(off)
        out["step_commit_ratio"] = round(per_k["0"]["step_ms"] / _med(off), 3)
        out["checkout"] = await _checkout(w, committer, store, paths)
        w.close()
        w2 = Workspace(WorkspaceConfig(enabled=True), state_dir, store)
        t = time.perf_counter()
        await w2.start(store.head)
        await w2.settle()
        out["restart_ms"] = round((time.perf_counter() - t) * 1e3, 1)
        w2.close()
    finally:
        await committer.stop()
        store.close()
    return out


async def _checkout(
    w: Workspace, committer: Committer, store: Store, paths: list[Path]
) -> dict[str, float]:
    """Rewind one turn that changed 10 files: the phases of a checkout, timed."""
    before = store.head
    for j in range(10):
        paths[j * 7].write_bytes(f"checkout {j} ".encode() * 64)
    await w.record(committer, [ev.StepCommitted(agent="a", turn_id="t", step=10**6)])
    await w.record(committer, [ev.TurnEnded(agent="a", turn_id="tc")])
    t0 = time.perf_counter()
    await w.before_reset(before, False, before)
    t1 = time.perf_counter()
    extra, _ = await w.reset_records(before, before)
    t2 = time.perf_counter()
    reset = store.prepare_reset(before)
    *_, durable = await committer.append(store.reset_batch(reset, extra))
    t3 = time.perf_counter()
    await w.after_reset(before, durable.seq)
    t4 = time.perf_counter()
    return {
        "dirty_check_ms": round((t1 - t0) * 1e3, 1),
        "unrecorded_scan_ms": round((t2 - t1) * 1e3, 1),
        "reset_record_ms": round((t3 - t2) * 1e3, 1),
        "restore_10_files_ms": round((t4 - t3) * 1e3, 1),
    }


def _daemon_turns(base: Path, files: int, turns: int, rounds: int) -> dict[str, Any]:
    """Builtin turns through the real daemon, workspace rewind on vs off."""
    procs = {}
    for mode in ("on", "off"):
        project = base / f"daemon-{mode}"
        project.mkdir()
        if mode == "on":
            write_tree(project, files)
        state_dir = project / ".reyn"
        state_dir.mkdir()
        (state_dir / "reynd.toml").write_text(
            f"[workspace]\nenabled = {str(mode == 'on').lower()}\n"
        )
        procs[mode] = start_reynd(f"ws-{mode}", state_dir, base)
    clients = {m: Client(p.socket) for m, p in procs.items()}
    times: dict[str, list[float]] = {"on": [], "off": []}
    try:
        for c in clients.values():
            c.call("agents.create", {"name": "a", "executor": "builtin"})
            c.call("agents.send", {"agent": "a", "text": "warm up", "wait": True})
        for r in range(rounds):
            for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
                c = clients[mode]
                t = time.perf_counter()
                for i in range(turns):
                    reply = c.call("agents.send", {"agent": "a", "text": f"m {i}", "wait": True})
                    assert reply["outcome"] == "completed", reply
                times[mode].append((time.perf_counter() - t) * 1e3 / turns)
    finally:
        for c in clients.values():
            c.close()
        for p in procs.values():
            p.stop()
    on, off = _med(times["on"]), _med(times["off"])
    pairs = [a / b for a, b in zip(times["on"], times["off"], strict=True)]
    return {
        "turn_ms_on": on,
        "turn_ms_off": off,
        "ratio": round(on / off, 3),
        "ratio_median_of_rounds": round(statistics.median(pairs), 3),
        "turns": turns * rounds,
    }


def run(base: Path, files: int, rounds: int, turns: int) -> dict[str, Any]:
    (base / "inproc").mkdir()
    out = trio.run(_in_process, base / "inproc", files, rounds)
    out["daemon"] = _daemon_turns(base, files, turns, rounds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--turns", type=int, default=20, help="daemon turns per round")
    ap.add_argument("--dir", type=Path, default=None, help="file system to measure (default: /tmp)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="reynd-bench-ws-", dir=args.dir) as tmp:
        out = run(Path(tmp), args.files, args.rounds, args.turns)
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return
    print(f"workspace: {out['files']} files, {out['tree_bytes'] / 1e6:.1f} MB")
    mb = out["baseline_bytes"] / 1e6
    print(f"  baseline (first start)   {out['baseline_ms']:8.1f} ms, {mb:.1f} MB stored")
    print("  changed   step ms (workspace)  read  stored B | boundary ms  stored B | tree file ms")
    for k, r in out["per_changed"].items():
        print(
            f"  {k:>7}   {r['step_ms']:7.3f} ({r['step_workspace_ms']:7.3f})    "
            f"{r['step_files_read']:4d}  {r['step_bytes_stored']:8.0f} | "
            f"{r['boundary_ms']:11.3f}  {r['boundary_bytes_stored']:8.0f} | "
            f"{r['tree_file_ms']:8.3f}"
        )
    print(
        f"  step that changed nothing: {out['per_changed']['0']['step_ms']:.3f} ms vs "
        f"{out['step_commit_off_ms']:.3f} ms with rewind off: {out['step_commit_ratio']:.2f}x"
    )
    c = out["checkout"]
    print(
        f"  checkout: dirty check {c['dirty_check_ms']} ms, unrecorded scan "
        f"{c['unrecorded_scan_ms']} ms, reset record {c['reset_record_ms']} ms, "
        f"restore 10 files {c['restore_10_files_ms']} ms"
    )
    print(f"  restart: first look at every file {out['restart_ms']} ms")
    d = out["daemon"]
    print(
        f"  daemon, builtin turn (3 steps), {d['turns']} turns each: {d['turn_ms_on']:.3f} ms on "
        f"vs {d['turn_ms_off']:.3f} ms off: {d['ratio']:.2f}x "
        f"(median of per-round ratios {d['ratio_median_of_rounds']:.2f}x)"
    )


if __name__ == "__main__":
    main()

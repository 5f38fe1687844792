"""Storage-core benchmark: WAL appends vs the disk's limits; reconstruct and open vs history.

    python -m bench.storage [--dir DIR] [--big N] [--json]

`Store.open` (what a restart does before the daemon serves) is timed at 10^4
entries and at --big entries, through the segment indexes and by a full scan
(the indexes moved aside), in interleaved rounds.

Everything is measured side by side in one run on the same file system, and
reported as ratios (this machine is shared and noisy: absolute figures drift,
ratios hold).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import msgspec
import trio

from reynd.daemon.committer import Committer
from reynd.protocol import events as ev
from reynd.storage.framing import encode_frame
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store


def _record(i: int) -> ev.Event:
    return ev.MessageReceived(agent="bench", message_id=f"m{i:08d}", text="x" * 16)


def _frame_len() -> int:
    e = msgspec.structs.replace(_record(0), seq=1_000_000, ts=time.time())
    return len(encode_frame(msgspec.json.encode(e)))


def raw_fsync_per_record(path: Path, n: int, size: int) -> float:
    """write + fdatasync per record: the physical limit at one writer."""
    rec = b"x" * (size - 1) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    try:
        t = time.perf_counter()
        for _ in range(n):
            os.write(fd, rec)
            os.fdatasync(fd)
        return n / (time.perf_counter() - t)
    finally:
        os.close(fd)


def raw_fsync_per_batch(path: Path, n: int, size: int, batch: int) -> float:
    """One write + fdatasync per `batch` records: the limit with batching."""
    rec = (b"x" * (size - 1) + b"\n") * batch
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    try:
        t = time.perf_counter()
        for _ in range(n // batch):
            os.write(fd, rec)
            os.fdatasync(fd)
        return (n // batch) * batch / (time.perf_counter() - t)
    finally:
        os.close(fd)


def wal_appends(root: Path, n: int, writers: int) -> float:
    """Acknowledged appends/s through the daemon's group-commit path."""
    store = Store.open(root, StorageOptions(snapshot_min_bytes=1 << 40))
    store.append([ev.AgentCreated(agent="bench")])
    per_writer = n // writers

    async def main() -> float:
        committer = Committer(store, lambda events: None)
        committer.start()

        async def writer(w: int) -> None:
            for i in range(per_writer):
                await committer.append([_record(w * per_writer + i)])

        t = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for w in range(writers):
                nursery.start_soon(writer, w)
        dt = time.perf_counter() - t
        await committer.stop()
        return per_writer * writers / dt

    try:
        return trio.run(main)
    finally:
        store.close()


def trio_ack_floor(n: int, writers: int) -> float:
    """Acknowledgements/s of `writers` trio tasks woken in batches, with no I/O at all.

    The scheduling floor of any one-task-per-writer design in trio: each
    append is at least one park and one reschedule of its task.
    """

    async def main() -> float:
        pending: list[trio.lowlevel.Task] = []
        have = trio.Event()
        per = n // writers

        async def writer() -> None:
            nonlocal have
            for _ in range(per):
                pending.append(trio.lowlevel.current_task())
                have.set()
                await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)

        async def driver() -> None:
            nonlocal have, pending
            done = 0
            while done < per * writers:
                await have.wait()
                have = trio.Event()
                await trio.lowlevel.checkpoint()
                batch, pending = pending, []
                for task in batch:
                    trio.lowlevel.reschedule(task)
                done += len(batch)

        t = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(writers):
                nursery.start_soon(writer)
            nursery.start_soon(driver)
        return per * writers / (time.perf_counter() - t)

    return trio.run(main)


def build_history(root: Path, total: int, spacing_bytes: int) -> Store:
    """`total` entries over 10 agents, a snapshot every ~spacing_bytes of WAL.

    The workload keeps the state bounded (skill runs that start, move through
    phases and end; questions asked and answered), so that a reconstruct at
    the tip loads the same amount of state at any history length: what is
    left to vary is the history itself.
    """
    opts = StorageOptions(snapshot_min_bytes=spacing_bytes, snapshot_ratio=1e-9)
    store = Store.open(root, opts)
    agents = [f"a{k}" for k in range(10)]
    store.append([ev.AgentCreated(agent=a) for a in agents])
    i = 0
    while store.head < total:
        batch: list[ev.Event] = []
        for _ in range(64):
            a, run = agents[i % 10], f"r{i}"
            batch += [
                ev.SkillStarted(agent=a, run_id=run, skill="build"),
                ev.SkillPhase(agent=a, run_id=run, phase="plan"),
                ev.InterventionAsked(agent=a, intervention_id=run, question="go on?"),
                ev.InterventionAnswered(agent=a, intervention_id=run, answer="yes"),
                ev.SkillPhase(agent=a, run_id=run, phase="act"),
                ev.SkillEnded(agent=a, run_id=run),
            ]
            i += 1
        store.append(batch[: total - store.head])
        if store.snapshot_due():
            store.snapshot_now()
    return store


def open_times(roots: dict[str, Path], rounds: int = 5) -> dict[str, dict[str, float]]:
    """Best Store.open time of each root, through its indexes and by a full scan, interleaved.

    Also what the open took from the indexes and how many records it scanned.
    """
    out: dict[str, dict[str, float]] = {k: {"indexed_s": 1e9, "scan_s": 1e9} for k in roots}
    for r in range(rounds):
        order = list(roots) if r % 2 == 0 else list(roots)[::-1]
        for key in order:
            root = roots[key]
            index, aside = root / "state" / "index", root / "state" / "index-aside"
            for mode in ("indexed_s", "scan_s"):
                if mode == "scan_s":
                    index.rename(aside)
                try:
                    t = time.perf_counter()
                    store = Store.open(root)
                    dt = time.perf_counter() - t
                    out[key][mode] = min(out[key][mode], dt)
                    if mode == "indexed_s":
                        out[key]["records"] = store.recovery.records
                        out[key]["scanned"] = store.recovery.scanned
                    store.close()
                finally:
                    if mode == "scan_s":
                        aside.rename(index)
    return out


def reconstruct_time(store: Store, targets: list[int], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for n in targets:
            store.state_as_of(n)
        best = min(best, (time.perf_counter() - t) / len(targets))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", default=None, help="directory on the file system to measure")
    ap.add_argument("--appends", type=int, default=3000)
    ap.add_argument("--big", type=int, default=1_000_000, help="entries of the large history")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="reynd-bench-", dir=args.dir))
    out: dict[str, float] = {}
    try:
        size = _frame_len()
        n = args.appends
        # Interleave the pairs so drift hits both sides alike.
        raw1 = raw_fsync_per_record(base / "raw1", n, size)
        w1 = wal_appends(base / "w1", n, 1)
        raw64 = raw_fsync_per_batch(base / "raw64", n * 10, size, 64)
        w64 = wal_appends(base / "w64", n * 10, 64)
        raw1b = raw_fsync_per_record(base / "raw1b", n, size)
        raw1 = (raw1 + raw1b) / 2
        floor64 = trio_ack_floor(n * 10, 64)
        out.update(
            record_bytes=size,
            raw_fsync_per_record=raw1,
            wal_1_writer=w1,
            raw_fsync_per_64=raw64,
            wal_64_writers=w64,
            ratio_1_writer=w1 / raw1,
            ratio_64_writers_vs_batched=w64 / raw64,
            ratio_64_writers_vs_single=w64 / raw1,
            trio_ack_floor_64=floor64,
            ratio_trio_floor_vs_batched=floor64 / raw64,
            ratio_64_writers_vs_trio_floor=w64 / floor64,
        )
        spacing = 64 * 1024
        small = build_history(base / "small", 1_000, spacing)
        big = build_history(base / "big", args.big, spacing)

        # Targets at the same distance above a snapshot in both histories.
        def targets(store: Store) -> list[int]:
            snaps = store.snapshots.seqs
            anchor = snaps[-1] if snaps else 0
            return [min(store.head, anchor + d) for d in (50, 150, 250, 350)]

        t_small = reconstruct_time(small, targets(small))
        t_big = reconstruct_time(big, targets(big))
        out.update(
            reconstruct_1e3_ms=t_small * 1e3,
            reconstruct_big_ms=t_big * 1e3,
            big_entries=args.big,
            ratio_reconstruct_big_vs_1e3=t_big / t_small,
        )
        small.close()
        big.close()
        mid = build_history(base / "mid", 10_000, spacing)
        mid.close()
        opens = open_times({"1e4": base / "mid", "big": base / "big"})
        lo, hi = opens["1e4"], opens["big"]
        out.update(
            open_1e4_ms=lo["indexed_s"] * 1e3,
            open_big_ms=hi["indexed_s"] * 1e3,
            open_scan_1e4_ms=lo["scan_s"] * 1e3,
            open_scan_big_ms=hi["scan_s"] * 1e3,
            open_big_scanned=hi["scanned"],
            open_1e4_scanned=lo["scanned"],
            ratio_open_big_vs_1e4=hi["indexed_s"] / lo["indexed_s"],
            ratio_open_scan_big_vs_1e4=hi["scan_s"] / lo["scan_s"],
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"record size: {size} bytes (framed)")
    print(f"raw write+fdatasync per record : {out['raw_fsync_per_record']:10.0f} /s")
    print(
        f"WAL, 1 writer                  : {out['wal_1_writer']:10.0f} /s   "
        f"ratio {out['ratio_1_writer']:.2f}  (target >= 0.7)"
    )
    print(f"raw write+fdatasync per 64     : {out['raw_fsync_per_64']:10.0f} /s")
    print(
        f"WAL, 64 writers                : {out['wal_64_writers']:10.0f} /s   "
        f"ratio {out['ratio_64_writers_vs_batched']:.2f} of batched limit (target >= 0.5)"
    )
    print(
        f"trio floor, 64 tasks, no I/O   : {out['trio_ack_floor_64']:10.0f} /s   "
        f"= {out['ratio_trio_floor_vs_batched']:.2f} of the batched limit; the WAL reaches "
        f"{out['ratio_64_writers_vs_trio_floor']:.2f} of it"
    )
    print(f"reconstruct(N), 1e3 entries    : {out['reconstruct_1e3_ms']:10.3f} ms")
    print(
        f"reconstruct(N), {args.big:.0e} entries : {out['reconstruct_big_ms']:10.3f} ms   "
        f"ratio {out['ratio_reconstruct_big_vs_1e3']:.2f}  (target <= 1.5)"
    )
    print(
        f"Store.open, 1e4 entries        : {out['open_1e4_ms']:10.1f} ms   "
        f"(by a full scan {out['open_scan_1e4_ms']:.1f} ms; "
        f"{out['open_1e4_scanned']:.0f} records after the indexes scanned)"
    )
    print(
        f"Store.open, {args.big:.0e} entries : {out['open_big_ms']:10.1f} ms   "
        f"ratio {out['ratio_open_big_vs_1e4']:.2f}  (by a full scan "
        f"{out['open_scan_big_ms']:.1f} ms, ratio {out['ratio_open_scan_big_vs_1e4']:.1f}; "
        f"{out['open_big_scanned']:.0f} records scanned)"
    )


if __name__ == "__main__":
    main()

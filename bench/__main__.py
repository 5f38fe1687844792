"""reynd vs LangGraph's SQLite checkpointer, vs the disk's limits, and how reynd scales.

    python -m bench [--quick] [--json] [--out DIR]

Three parts, all in one run on the same file system:

1. Workload (bench/workload.py): an agent thread of T turns (user + assistant
   message each; the history grows), list the history, read the state at a
   past point, go back to the middle and continue. reynd is the real daemon
   driven over its socket by an external runtime (wal.append, fsync per
   append); the peer is LangGraph + SqliteSaver (bench/peer.py) in WAL journal
   mode at synchronous=FULL (a commit fsyncs). The two alternate turn by turn.
   Ratios are reynd / peer: below 1, reynd is better.
2. Physical limits (bench/storage.py): write + fdatasync per record and per
   batch, the daemon's own group-commit path in-process, and (in part 3)
   reading the WAL sequentially as the floor for recovery.
3. Scaling (bench/scaling.py): restart (through the segment indexes, and by a
   full scan), RSS, rewind, reconstruct and the first page of generations at
   10^4, 10^5, 10^6 WAL entries.
4. RPC and replication against a trivial echo server and a plain daemon.
5. Commit peers (bench/commit_peers.py): durable records/s over the socket
   against SQLite (WAL, synchronous=FULL), pgbench on a PostgreSQL the bench
   starts itself (bench/postgres.py; skipped, saying how to install it, when
   the server binaries are absent) and the raw fdatasync limits.
6. LangGraph savers (bench/langgraph.py): ReyndSaver, SqliteSaver and
   PostgresSaver, each also with a DeltaChannel, at T = 100 and 1,000 and with
   8 threads at once.

--no-peer leaves out parts 1 and 6 and PostgreSQL.
Writes bench.txt, bench.json and bench.png (latency and bytes per turn vs T)
into --out. Needs the `bench` extra: pip install -e '.[bench]'.
The machine may be shared and noisy: read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec

from bench import commit_peers, daemon, postgres, scaling, workload
from bench.daemon import workdir
from bench.storage import raw_fsync_per_batch, raw_fsync_per_record, trio_ack_floor, wal_appends
from bench.targets import targets
from bench.texts import assistant_text, user_text
from reynd.protocol import events as ev
from reynd.storage.framing import encode_frame


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def machine(base: Path) -> dict[str, str]:
    def sh(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            return "?"

    return {
        "nproc": sh("nproc"),
        "free": sh("free", "-h"),
        "df": sh("df", "-h", str(base)),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": __import__("sqlite3").sqlite_version,
        "langgraph": _version("langgraph"),
        "langgraph-checkpoint-sqlite": _version("langgraph-checkpoint-sqlite"),
        "reynd": _version("reynd"),
    }


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def turn_record_bytes() -> float:
    """Mean framed size of the four WAL records of one turn (at seq ~10^4)."""
    i, a = 5000, workload.AGENT
    events: list[ev.Event] = [
        ev.MessageReceived(agent=a, message_id=f"m{i}", text=user_text(i)),
        ev.TurnStarted(agent=a, turn_id=f"t{i}", message_id=f"m{i}"),
        ev.StepCommitted(
            agent=a,
            turn_id=f"t{i}",
            step=0,
            messages=(ev.Message(role="assistant", content=assistant_text(i)),),
        ),
        ev.TurnEnded(agent=a, turn_id=f"t{i}", reply=assistant_text(i)),
    ]
    sizes = [
        len(
            encode_frame(
                msgspec.json.encode(msgspec.structs.replace(e, seq=10_000 + k, ts=time.time()))
            )
        )
        for k, e in enumerate(events)
    ]
    return sum(sizes) / len(sizes)


def _side_by_side(
    a: Callable[[int], float], b: Callable[[int], float], rounds: int
) -> tuple[list[float], list[float]]:
    """`rounds` results of each, taken in pairs, the order alternating from round to round."""
    got_a: list[float] = []
    got_b: list[float] = []
    for r in range(rounds):
        if r % 2:
            got_b.append(b(r))
            got_a.append(a(r))
        else:
            got_a.append(a(r))
            got_b.append(b(r))
    return got_a, got_b


def limits(base: Path, n: int, rounds: int = 3) -> dict[str, Any]:
    """Raw write + fdatasync, alternating with the daemon's in-process commit path.

    Each commit figure pairs `rounds` windows of the WAL with as many of the
    raw limit; the ratios are the medians of the pairs' ratios (one window
    moved by up to 1.5x between runs on this machine).
    """
    size = round(turn_record_bytes())
    d = base / "limits"
    d.mkdir()
    raw1, wal1 = _side_by_side(
        lambda r: raw_fsync_per_record(d / f"raw1-{r}", n, size),
        lambda r: wal_appends(d / f"wal1-{r}", n, 1),
        rounds,
    )
    raw4 = raw_fsync_per_batch(d / "raw4", n * 4, size, 4)
    raw64, wal64 = _side_by_side(
        lambda r: raw_fsync_per_batch(d / f"raw64-{r}", n * 16, size, 64),
        lambda r: wal_appends(d / f"wal64-{r}", n * 16, 64),
        rounds,
    )
    alone = workload.ReyndThread(d, "alone")  # the workload's turns, with no peer beside
    try:
        turn_alone = [alone.turn(i)[0] for i in range(n // 2)]
    finally:
        alone.close()
    floor64 = trio_ack_floor(n * 16, 64)  # trio's own cost of 64 tasks parked and woken
    per_record = 1 / statistics.median(raw1)  # seconds
    return {
        "record_bytes": size,
        "rounds": rounds,
        "raw_fsync_per_record_s": per_record,
        "raw_fsync_per_record_rounds_per_s": raw1,
        "raw_fsync_batch4_per_record_s": 1 / raw4,
        "raw_fsync_batch64_per_record_s": 1 / statistics.median(raw64),
        "wal_1_writer_per_append_s": 1 / statistics.median(wal1),
        "wal_64_writers_per_append_s": 1 / statistics.median(wal64),
        "wal_1_writer_vs_raw": statistics.median(w / r for w, r in zip(wal1, raw1, strict=True)),
        "wal_64_writers_vs_batched": statistics.median(
            w / r for w, r in zip(wal64, raw64, strict=True)
        ),
        "trio_ack_floor_64_per_append_s": 1 / floor64,
        "reynd_turn_alone_s": statistics.fmean(turn_alone),
        "reynd_turn_alone_median_s": statistics.median(turn_alone),
        # a turn = 4 appends, each waiting for its own fsync
        "turn_floor_s": 4 * per_record,
        "turn_floor_batched_s": 4 / raw4,
    }


# -- the report ---------------------------------------------------------------------------

METRICS = [
    ("write_s", "durable write per turn, mean", "ms", 1e3),
    ("list_s", "list the whole history", "ms", 1e3),
    ("page_s", "first page (50 checkpoints)", "ms", 1e3),
    ("state_at_s", "state at a past point (T/4)", "ms", 1e3),
    ("back_s", "go back to T/2 + 1 new turn", "ms", 1e3),
    ("bytes_per_turn", "bytes on disk per turn", "B", 1),
]


def _fmt(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def workload_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key, label, unit, scale in METRICS:
        for r in runs:
            rv, pv = r["reynd"][key], r["peer"][key]
            rows.append(
                {
                    "metric": key,
                    "label": label,
                    "unit": unit,
                    "T": r["T"],
                    "peer_synchronous": r["peer"]["synchronous"],
                    "reynd": rv * scale,
                    "peer": pv * scale,
                    "ratio": rv / pv,
                    "projected": key in r["peer"]["projected"],
                    "met": rv / pv < 1,
                }
            )
    return rows


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    out = []
    out.append(
        f"reynd {m['reynd']} bench  |  {m['nproc']} cores, kernel {m['kernel']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}  |  {result['mode']} run, "
        f"{result['elapsed_s']:.0f} s"
    )
    out.append(f"reynd: the daemon over its Unix socket, {workload.DRIVER}")
    peer = result["peer"]
    if peer is None:
        out.append("peer:  not run (--no-peer, or the bench extra is not installed)")
    else:
        out.append(
            f"peer:  LangGraph {m['langgraph']} + langgraph-checkpoint-sqlite "
            f"{m['langgraph-checkpoint-sqlite']} (SqliteSaver), journal_mode="
            f"{peer['journal_mode']}, synchronous={'/'.join(peer['modes'])}; SQLite's "
            f"default on this machine is {peer['default_synchronous']}"
            + (" (the same run)" if peer["default_synchronous"] in peer["modes"][:1] else "")
            + "; LangGraph's default durability (async): every checkpoint of a turn is "
            "committed when invoke returns; 3 checkpoints per turn"
        )
    out.append("")
    out.append("1. Workload (ratio = reynd / peer; < 1: reynd better; ~ = projected, see notes)")
    out.append(f"   {'':32} {'T':>6} {'sync':>5} {'reynd':>11} {'peer':>13} {'ratio':>8}")
    for row in result["workload"]:
        mark = "~" if row["projected"] else " "
        out.append(
            f"   {row['label'] + ' (' + row['unit'] + ')':32} {row['T']:>6,} "
            f"{row['peer_synchronous']:>5} {_fmt(row['reynd']):>11} "
            f"{mark + _fmt(row['peer']):>13} {row['ratio']:8.3f}"
            + ("" if row["met"] else "  MISSED")
        )
    sampled = [r for r in result["runs"] if r["peer"]["mode"] == "sampled"]
    for r in sampled:
        p = r["peer"]
        out.append(
            f"   T={r['T']:,}: the peer is sampled (a full thread would take hours and "
            f"tens of GB): {r['T'] - 10:,} turns seeded as one checkpoint, 10 timed turns "
            f"at {p['write_s_measured_at_T'] * 1e3:.0f} ms and "
            f"{p['bytes_per_turn_at_T']:,.0f} B each; ~ = half the cost at T (below a "
            f"full thread's mean: in the peer's favour); listing from "
            f"{p['listed']} checkpoints of ~T turns measured in "
            f"{p['list_s_measured'] * 1e3:.0f} ms, scaled to 3T checkpoints of T/2."
        )
    lim = result["limits"]
    out.append("")
    out.append(
        f"2. Physical limits (same file system; a turn's record is {lim['record_bytes']} B framed)"
    )
    raw1, raw4 = lim["raw_fsync_per_record_s"], lim["raw_fsync_batch4_per_record_s"]
    raw64, wal1 = lim["raw_fsync_batch64_per_record_s"], lim["wal_1_writer_per_append_s"]
    wal64 = lim["wal_64_writers_per_append_s"]
    floor64 = lim["trio_ack_floor_64_per_append_s"]
    out += [
        f"   write+fdatasync per record           {raw1 * 1e3:8.3f} ms"
        f"   -> a turn of 4 fsynced appends: {lim['turn_floor_s'] * 1e3:.2f} ms",
        f"   write+fdatasync per batch of 4       {raw4 * 4e3:8.3f} ms   (one fsync per turn)",
        f"   write+fdatasync per batch of 64      {raw64 * 1e6:8.1f} us/record",
        f"   reynd WAL in-process, 1 writer       {wal1 * 1e3:8.3f} ms/append"
        f"  ({wal1 / raw1:.2f}x raw; medians of {lim['rounds']} alternating rounds)",
        f"   reynd WAL in-process, 64 writers     {wal64 * 1e6:8.1f} us/append"
        f"  ({wal64 / raw64:.2f}x batched raw)",
        f"   trio alone, 64 tasks parked + woken  {floor64 * 1e6:8.1f} us/append"
        f"  (no I/O, no work: the floor of one task per writer)",
        f"   reynd turn over the socket, alone    {lim['reynd_turn_alone_s'] * 1e3:8.3f} ms"
        f"   ({lim['reynd_turn_alone_s'] / lim['turn_floor_s']:.2f}x the 4-fsync floor; "
        f"median {lim['reynd_turn_alone_median_s'] * 1e3:.2f} ms)",
    ]
    for r in result["runs"]:
        w = r["reynd"]["write_s"]
        out.append(
            f"   reynd turn beside the peer, T={r['T']:<6,}  {w * 1e3:8.3f} ms"
            f"   ({w / lim['turn_floor_s']:.2f}x the 4-fsync floor)"
        )
    out.append("")
    out.append(
        "3. Scaling (bounded state, growing history; times best of "
        f"{result['scaling_rounds']} alternating rounds)"
    )
    out.append(
        "   rewind/reconstruct targets sit at the same distances above a snapshot at every "
        "size (near the tip, in the middle), 'worst' just below one (longest replay)"
    )
    out.append(
        f"   {'entries':>9} {'restart s':>9} {'scan s':>7} {'read s':>7} {'RSS MiB':>7} "
        f"{'rewind tip':>10} {'rewind mid':>10} {'worst':>6} {'reconstr.':>9} "
        f"{'1st page':>8}   (ms)"
    )
    for s in result["scaling"]:
        out.append(
            f"   {s['entries']:>9,} {s['restart_s']:9.2f} {s['restart_scan_s']:7.2f} "
            f"{s['read_floor_s']:7.3f} {s['rss_kib'] / 1024:7.1f} "
            f"{s['rewind_tip_s'] * 1e3:10.2f} {s['rewind_mid_s'] * 1e3:10.2f} "
            f"{s['rewind_worst_s'] * 1e3:6.2f} "
            f"{s['reconstruct_s'] * 1e3:9.2f} {s['page_s'] * 1e3:8.2f}"
        )
    out += _render_rpc(result)
    if result.get("commit_peers"):
        out += ["", "5. " + commit_peers.render(result["commit_peers"]).replace("\n", "\n   ")]
    if result.get("langgraph"):
        from bench import langgraph

        out += ["", "6. " + langgraph.render(result["langgraph"]).replace("\n", "\n   ")]
    out.append("")
    out.append("Targets (value vs goal)")
    for t in result["targets"]:
        if t["value"] is None:
            mark, value = "n/a", "-"
        else:
            mark, value = ("met" if t["met"] else "MISSED"), f"{t['value']:.3f}"
        out.append(f"   [{mark}] {t['name']} {value} (goal {t['goal']}): {t['detail']}")
    return "\n".join(out)


def _render_rpc(result: dict[str, Any]) -> list[str]:
    out = []
    rpc = result.get("rpc")
    if rpc:
        out += [
            "",
            f"4. RPC server vs a trivial trio echo server (requests/s, one request in flight per "
            f"client, {result['rpc_rounds']} alternating rounds of {result['rpc_seconds']:g} s)",
            f"   {'method':14} {'clients':>7} {'reynd/s':>9} {'echo/s':>9} {'ratio':>6} "
            f"{'reynd us/req':>12} {'echo us/req':>11} {'reply B':>8}",
        ]
        for row in rpc["rows"]:
            out.append(
                f"   {row['method']:14} {row['clients']:7d} {row['reynd_rps']:9,.0f} "
                f"{row['echo_rps']:9,.0f} {row['ratio']:6.2f} "
                f"{row['reynd_server_us_per_req']:12.1f} {row['echo_server_us_per_req']:11.1f} "
                f"{row['reynd_reply_bytes']:8,d}"
            )
    rep = result.get("replication")
    if rep:
        out += ["", "5. Replication: wal.append/s with [replicate] on vs off (moto on loopback)"]
        for key, r in rep.items():
            out.append(
                f"   {key.replace('_', ' '):10} plain {r['plain_per_s']:7,} replicated "
                f"{r['replicated_per_s']:7,} ratio {r['ratio']:.3f}"
            )
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    ts = [r["T"] for r in runs]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = [
        ("write_s", "durable write per turn (ms)", 1e3),
        ("back_s", "go back to T/2 + 1 turn (ms)", 1e3),
        ("bytes_per_turn", "bytes on disk per turn", 1),
    ]
    for ax, (key, title, scale) in zip(axes, panels, strict=True):
        ax.plot(ts, [r["reynd"][key] * scale for r in runs], "o-", label="reynd")
        peer = [r["peer"][key] * scale for r in runs]
        ax.plot(ts, peer, "s-", label=f"LangGraph SqliteSaver ({runs[0]['peer']['synchronous']})")
        proj = [
            (t, v) for t, v, r in zip(ts, peer, runs, strict=True) if key in r["peer"]["projected"]
        ]
        if proj:
            ax.plot(*zip(*proj, strict=True), "s", mfc="white", color="C1", label="peer, projected")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("T (turns)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"reynd vs LangGraph checkpointing ({result['mode']} run, "
        f"{result['machine']['nproc']} cores)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _peer_available() -> bool:
    try:
        import langgraph  # noqa: F401
    except ImportError:
        return False
    return True


def _rpc(base: Path, seconds: float, rounds: int) -> dict[str, Any]:
    """bench.daemon's requests/s against the echo server (the RPC targets of issue 14)."""
    load = daemon.Load()
    try:
        return daemon.measure_rps(base / "rpc", load, seconds, rounds)
    finally:
        load.close()


def _replication(base: Path, seconds: float, rounds: int) -> dict[str, Any] | None:
    """bench.replication's append throughput, on vs off (issue 15); None without moto."""
    try:
        from bench import replication
    except ImportError:
        return None
    work = base / "replication"
    work.mkdir()
    saved = {k: os.environ.get(k) for k in replication.CREDENTIALS}
    os.environ.update(replication.CREDENTIALS)  # moto's; the daemons inherit them
    moto, endpoint = replication.start_moto(work)
    try:
        return replication.measure_throughput(work, endpoint, seconds, rounds)
    finally:
        moto.kill()
        moto.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="T = 100, 1,000; scaling at 10^4, 10^5; one round, short windows (~4 min)",
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--out", default="bench-out", help="directory for bench.{txt,json,png}")
    ap.add_argument(
        "--peer-full-max",
        type=int,
        default=1000,
        help="largest T the peer runs in full (above: sampled)",
    )
    ap.add_argument("--no-peer", action="store_true", help="skip the workload (needs LangGraph)")
    ap.add_argument("--turns", type=_ints, help="the workload's T values, e.g. 100,1000")
    ap.add_argument("--sizes", type=_ints, help="the scaling's entries, e.g. 10000,100000")
    ap.add_argument("--appends", type=int, help="appends per writer count in the limits")
    ap.add_argument("--seconds", type=float, help="one RPC / replication load window (s)")
    args = ap.parse_args()
    quick = args.quick
    turns = args.turns or ([100, 1000] if quick else [100, 1000, 10_000])
    sizes = args.sizes or ([10**4, 10**5] if quick else [10**4, 10**5, 10**6])
    rounds = 1 if quick else 2
    seconds = args.seconds or (1.0 if quick else 3.0)
    rpc_rounds = 1 if quick else 3
    with_peer = not args.no_peer
    if with_peer and not _peer_available():
        sys.exit(
            "python -m bench: the peer needs the bench extra (pip install -e '.[bench]'); "
            "or pass --no-peer"
        )
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with workdir() as base:
        result: dict[str, Any] = {
            "mode": "quick" if quick else "full",
            "command": " ".join(["python -m bench", *sys.argv[1:]]),
            "machine": machine(base),
            "scaling_rounds": rounds,
            "rpc_seconds": seconds,
            "rpc_rounds": rpc_rounds,
            "peer": None,
        }
        _log("physical limits ...")
        result["limits"] = limits(base, args.appends or (300 if quick else 1000))
        runs = []
        if with_peer:
            from bench.peer import sqlite_default_synchronous

            default_sync = sqlite_default_synchronous()
            modes = ["FULL"] if default_sync == "FULL" else ["FULL", "default"]
            for mode in modes:
                for t in turns:
                    _log(f"workload T={t:,}, peer synchronous={mode} ...")
                    sub = base / f"w-{mode}"
                    sub.mkdir(exist_ok=True)
                    runs.append(
                        workload.run(
                            sub,
                            t,
                            peer_sync=None if mode == "default" else mode,
                            peer_full_max=args.peer_full_max,
                            log=_log,
                        )
                    )
            result["peer"] = {
                "modes": modes,
                "default_synchronous": default_sync,
                "journal_mode": runs[0]["peer"]["journal_mode"],
            }
        result["runs"] = runs
        _log("scaling ...")
        result["scaling"] = scaling.run(base, sizes, rounds=rounds, log=_log)
        _log("rpc ...")
        (base / "rpc").mkdir()
        result["rpc"] = _rpc(base, seconds, rpc_rounds)
        _log("replication ...")
        result["replication"] = _replication(base, seconds, rpc_rounds)
        with contextlib.ExitStack() as stack:
            # The peers users deploy instead: PostgreSQL when it can start here.
            pg = stack.enter_context(postgres.cluster_or_none(_log)) if with_peer else None
            _log("commit peers ...")
            (base / "commit").mkdir()
            result["commit_peers"] = commit_peers.run(
                base / "commit", pg, seconds=seconds, rounds=rpc_rounds, log=_log
            )
            if with_peer:
                result["langgraph"] = _langgraph(base, pg, quick)
    for s in result["scaling"]:
        s.pop("root", None)
    result["workload"] = workload_rows(runs)
    result["elapsed_s"] = time.perf_counter() - t0
    result["targets"] = targets(result)
    text = render(result)
    (out_dir / "bench.txt").write_text(text + "\n")
    (out_dir / "bench.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    written = "bench.txt, bench.json"
    if runs and _has_matplotlib():
        plot(result, out_dir / "bench.png")
        written += ", bench.png"
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(text)
        print(f"\nwritten in {out_dir}: {written}", file=sys.stderr)


def _langgraph(base: Path, pg: Any, quick: bool) -> dict[str, Any]:
    """bench.langgraph's savers side by side: T = 100 (and 1,000), then 8 threads."""
    from bench import langgraph

    why = langgraph.pg_saver_missing()
    if why is not None:
        _log(f"PostgresSaver left out: {why}")
        pg = None
    out: dict[str, Any] = {"runs": [], "postgres": None if pg is None else pg.version}
    for t in [100] if quick else [100, 1000]:
        _log(f"LangGraph savers, T={t} ...")
        d = base / f"lg-{t}"
        d.mkdir()
        out["runs"].append(langgraph.run_one(t, d, pg, _log))
    _log("LangGraph savers, 8 threads ...")
    d = base / "lg-8"
    d.mkdir()
    out["concurrent"] = langgraph.run_concurrent(
        d, pg, threads=8, turns=5 if quick else 25, rounds=1 if quick else 2, log=_log
    )
    return out


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()

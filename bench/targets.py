"""The performance targets, as data: each `{name, value, goal, met}` from one bench result.

Every target of docs/performance.md and of the issues that set one (14: the
commit path, the RPC server, restart; 15: replication) is always listed, so a
reader can rely on the names; one that the run did not measure (a part skipped,
e.g. the peer without the bench extra) has value null and is not met.
`goal` is the bound as text (`"<= 1.5"`: value <= 1.5); `detail` says what
was compared, for people.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

__all__ = ["GOALS", "met", "targets"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">=": operator.ge,
}

# name -> goal, in the order they are reported.
GOALS: dict[str, str] = {
    "workload.ahead_of_peer": "< 1",
    "workload.bytes_per_turn_flat": "<= 1.5",
    "scaling.rewind_tip_flat": "<= 1.5",
    "scaling.rewind_mid_flat": "<= 1.5",
    "scaling.rewind_worst_flat": "<= 1.5",
    "scaling.reconstruct_flat": "<= 1.5",
    "scaling.first_page_flat": "<= 1.5",
    "scaling.restart_flat": "<= 1.5",
    "commit.1_writer_vs_raw": ">= 0.75",
    "commit.64_writers_vs_batched": ">= 0.5",
    "rpc.status_1_client_vs_echo": ">= 0.6",
    "rpc.status_16_clients_vs_echo": ">= 0.6",
    "rpc.state_get_1_client_vs_echo": ">= 0.5",
    "rpc.state_get_16_clients_vs_echo": ">= 0.5",
    "replication.append_1_client_vs_plain": ">= 0.9",
    "replication.append_16_clients_vs_plain": ">= 0.9",
    # Issue 29: against what users would deploy instead (bench/commit_peers.py, over
    # the socket; bench/langgraph.py: the worst reynd/peer ratio of each row).
    "commit.1_writer_socket_vs_raw": ">= 0.7",
    "commit.1_writer_vs_sqlite_full": ">= 1",
    "commit.64_writers_vs_postgres": ">= 2",
    "commit.64_writers_socket_vs_batched": ">= 0.3",
    **{
        f"langgraph.t{t}.{row}_vs_peers": "< 1"
        for t in (100, 1000)
        for row in ("turn", "get_warm", "get_cold", "history_page", "bytes")
    },
    "langgraph.8_threads_vs_peers": ">= 1",
}

# bench/langgraph.py's row keys, by the names of the targets above.
_LANGGRAPH_ROWS = {
    "turn": "turn_ms_mean",
    "get_warm": "get_state_past_ms",
    "get_cold": "get_state_past_cold_ms",
    "history_page": "history_page_ms",
    "bytes": "bytes_per_turn",
}


def met(value: float, goal: str) -> bool:
    """True when `value` meets `goal` (`"<= 1.5"`)."""
    op, bound = goal.split()
    return _OPS[op](value, float(bound))


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of GOALS, measured or not, from a `python -m bench` result."""
    found: dict[str, tuple[float, str]] = {}
    _workload(result, found)
    _scaling(result, found)
    _commit(result, found)
    _rpc(result, found)
    _replication(result, found)
    _commit_peers(result, found)
    _langgraph(result, found)
    out = []
    for name, goal in GOALS.items():
        if name in found:
            value, detail = found[name]
            out.append(
                {
                    "name": name,
                    "value": round(value, 4),
                    "goal": goal,
                    "met": met(value, goal),
                    "detail": detail,
                }
            )
        else:
            out.append(
                {
                    "name": name,
                    "value": None,
                    "goal": goal,
                    "met": False,
                    "detail": "not measured in this run",
                }
            )
    return out


def _workload(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    rows = result.get("workload") or []
    if rows:
        missed = [r for r in rows if not r["met"]]
        worst = max(rows, key=lambda r: r["ratio"])
        detail = (
            f"worst reynd/peer ratio over {len(rows)} rows ({len(rows) - len(missed)} ahead): "
            f"{worst['label']}, T={worst['T']:,}"
        )
        if missed:
            detail += "; missed: " + ", ".join(
                f"{r['label']} T={r['T']:,} ({r['ratio']:.2f})" for r in missed
            )
        found["workload.ahead_of_peer"] = (worst["ratio"], detail)
    runs = result.get("runs") or []
    if len(runs) >= 2:
        bpt = [r["reynd"]["bytes_per_turn"] for r in runs]
        found["workload.bytes_per_turn_flat"] = (
            max(bpt) / min(bpt),
            "max/min of reynd's bytes per turn: " + " / ".join(f"{b:,.0f}" for b in bpt) + " B",
        )


def _scaling(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    sc = result.get("scaling") or []
    if len(sc) < 2:
        return
    lo, hi = sc[0], sc[-1]
    span = f"{lo['entries']:.0e} -> {hi['entries']:.0e} entries"
    for key, name, label in (
        ("rewind_tip_s", "rewind_tip", "rewind near the tip"),
        ("rewind_mid_s", "rewind_mid", "rewind to the middle"),
        ("rewind_worst_s", "rewind_worst", "rewind, longest replay"),
        ("reconstruct_s", "reconstruct", "reconstruct (state.get at a past seq)"),
        ("page_s", "first_page", "generations.list first page"),
    ):
        found[f"scaling.{name}_flat"] = (
            hi[key] / lo[key],
            f"{label}, {span}: {lo[key] * 1e3:.2f} -> {hi[key] * 1e3:.2f} ms",
        )
    found["scaling.restart_flat"] = (
        hi["restart_s"] / lo["restart_s"],
        f"start to READY=1, {span}: {lo['restart_s']:.2f} -> {hi['restart_s']:.2f} s "
        f"(by a full scan {lo['restart_scan_s']:.2f} -> {hi['restart_scan_s']:.2f} s)",
    )


def _commit(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    lim = result.get("limits")
    if not lim:
        return
    for name, ratio_key, raw_key, wal_key, what in (
        (
            "commit.1_writer_vs_raw",
            "wal_1_writer_vs_raw",
            "raw_fsync_per_record_s",
            "wal_1_writer_per_append_s",
            "1 writer, vs write+fdatasync per record",
        ),
        (
            "commit.64_writers_vs_batched",
            "wal_64_writers_vs_batched",
            "raw_fsync_batch64_per_record_s",
            "wal_64_writers_per_append_s",
            "64 writers, vs write+fdatasync per 64 records",
        ),
    ):
        raw, wal = lim[raw_key], lim[wal_key]
        detail = f"acknowledged appends/s, {what}: {1 / wal:,.0f} vs {1 / raw:,.0f}"
        rounds = lim.get("rounds")  # results before the paired rounds: one window each
        if rounds:
            detail += f" (medians; the value is the median ratio of {rounds} alternating pairs)"
        found[name] = (lim.get(ratio_key, raw / wal), detail)
    floor = lim.get("trio_ack_floor_64_per_append_s")
    if floor:
        value, detail = found["commit.64_writers_vs_batched"]
        found["commit.64_writers_vs_batched"] = (
            value,
            f"{detail}; trio alone (64 tasks parked and woken, no I/O) {1 / floor:,.0f}, "
            f"{lim['raw_fsync_batch64_per_record_s'] / floor:.2f} of the batched limit",
        )


def _rpc(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    rpc = result.get("rpc")
    if not rpc:
        return
    names = {"daemon.status": "status", "state.get": "state_get"}
    for row in rpc["rows"]:
        clients = row["clients"]
        name = f"rpc.{names[row['method']]}_{clients}_client{'s' if clients > 1 else ''}_vs_echo"
        found[name] = (
            row["ratio"],
            f"{row['method']} requests/s, {clients} client(s) with one in flight, vs a trivial "
            f"trio echo server: {row['reynd_rps']:,.0f} vs {row['echo_rps']:,.0f} "
            f"(reply {row['reynd_reply_bytes']:,} B)",
        )


def _replication(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    rep = result.get("replication")
    if not rep:
        return
    for clients in (1, 16):
        r = rep.get(f"{clients}_clients")
        if r is None:
            continue
        suffix = "client" if clients == 1 else "clients"
        found[f"replication.append_{clients}_{suffix}_vs_plain"] = (
            r["ratio"],
            f"wal.append/s with [replicate] on vs off, {clients} {suffix}: "
            f"{r['replicated_per_s']:,} vs {r['plain_per_s']:,}",
        )


def _commit_peers(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    cp = result.get("commit_peers")
    if not cp:
        return
    per_s, ratios = cp["per_s"], cp["ratios"]
    for name, key, a, b, what in (
        ("commit.1_writer_socket_vs_raw", "1_writer_vs_raw", "reynd_1", "raw_1", "write+fdatasync"),
        (
            "commit.1_writer_vs_sqlite_full",
            "1_writer_vs_sqlite_full",
            "reynd_1",
            "sqlite_1",
            "SQLite WAL, synchronous=FULL",
        ),
        (
            "commit.64_writers_vs_postgres",
            "64_writers_vs_postgres",
            "reynd_64",
            "postgres_64",
            "pgbench INSERT+COMMIT, 64 connections",
        ),
        (
            "commit.64_writers_socket_vs_batched",
            "64_writers_vs_batched",
            "reynd_64",
            "raw_batched_64",
            "write+fdatasync per 64 records",
        ),
    ):
        if ratios.get(key) is not None:
            found[name] = (
                ratios[key],
                f"durable records/s over the socket vs {what}: {per_s[a]:,.0f} vs {per_s[b]:,.0f}",
            )


def _langgraph(result: dict[str, Any], found: dict[str, tuple[float, str]]) -> None:
    lg = result.get("langgraph")
    if not lg:
        return
    for run in lg["runs"]:
        for row, key in _LANGGRAPH_ROWS.items():
            ratios = {peer: r[key] for peer, r in run["ratios"].items() if r.get(key) is not None}
            if not ratios:
                continue
            worst = max(ratios, key=lambda peer: ratios[peer])
            found[f"langgraph.t{run['turns']}.{row}_vs_peers"] = (
                ratios[worst],
                f"{key}, reynd / the best peer ({worst}); all: "
                + ", ".join(f"{p} {v}" for p, v in ratios.items()),
            )
    conc = lg.get("concurrent")
    if conc and conc["ratios"]:
        worst = min(conc["ratios"], key=lambda peer: conc["ratios"][peer])
        found["langgraph.8_threads_vs_peers"] = (
            conc["ratios"][worst],
            f"turns/s with {conc['threads']} threads, reynd / the best peer ({worst}); all: "
            + ", ".join(f"{p} {v}" for p, v in conc["ratios"].items()),
        )

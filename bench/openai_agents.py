"""One OpenAI Agents SDK session workload through three session stores, side by side.

    python -m bench.openai_agents [--quick] [--items 100,10000] [--json]

The contenders, each on its own fresh store, the same items:

- `reynd`: ReyndSession (reynctl.openai_agents) on a real `reynd serve` over
  its socket: one wal.append_batch (one fsync) per add_items.
- `sqlite`: the SDK's SQLiteSession on a file (WAL journal; SQLite's default
  synchronous=FULL: every commit fsyncs the WAL, as durable as reynd's
  acknowledgement).
- `advanced`: the SDK's AdvancedSQLiteSession on a file, the store that can
  branch (it also writes per-message structure rows).

A turn is one add_items of what a run with a tool call leaves: the user's
message, the function call, its output, the assistant's answer (4 items,
about 900 bytes of JSON). The contenders take turns, one turn each in
rotating order, so that the machine's noise falls on all of them alike.

Reported per N (items in the session at the end, N / 4 turns): add_items
per turn (mean, and the median of the last tenth: the cost at N);
get_items of the whole session and of the last 20 (warm: the instance that
wrote it; for reynd also cold: a new instance, whose first read fetches the
session's records; medians of 5); bytes per turn (reynd: state/, its audit log shown
apart: a second copy for people, never read by recovery, rotated within
`[audit] max_total_bytes`; SQLite: the database after folding its WAL file
back in). Branching, reynd beside AdvancedSQLiteSession: branch from the
middle turn, then switch back to the first branch (reynd: a rewind and a
checkout of the whole system; AdvancedSQLiteSession copies the turns before
it into the new branch). Ratios are reynd / other: below 1, reynd is better.
The machine is shared and noisy: read the ratios.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import SQLiteSession
from agents.extensions.memory import AdvancedSQLiteSession

from bench import sides
from bench.daemon import Proc, start_reynd
from reynctl.openai_agents import ReyndSession

QUICK_ITEMS = (100, 1000)
DEFAULT_ITEMS = (100, 10_000)
READS = 5
LAST = 20


def turn_items(i: int) -> list[dict[str, Any]]:
    """What one run with a tool call leaves in the session: 4 items."""
    call = f"call_{i}"
    return [
        {"role": "user", "content": f"What is the status of ticket {i}? CI on module {i % 37} "
         "keeps failing since the last merge, can you look it up?"},
        {"type": "function_call", "call_id": call, "name": "lookup",
         "arguments": json.dumps({"ticket": i}), "id": f"fc_{i}", "status": "completed"},
        {"type": "function_call_output", "call_id": call,
         "output": f"ticket {i}: open, assigned to the build team, last update 2 days ago"},
        {"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
         "content": [{"type": "output_text", "annotations": [], "text": f"Ticket {i} is open "
                      "and assigned to the build team; I will follow up on the failing check."}]},
    ]  # fmt: skip


@dataclass
class Contender:
    name: str
    session: Any
    disk_bytes: Callable[[], int]
    close: Callable[[], None]
    fresh: Callable[[], Any] | None = None  # a new instance on the same session (cold reads)
    audit_bytes: Callable[[], int] | None = None  # read after close (the log is then flushed)
    times: list[float] = field(default_factory=list)

    def turn(self, i: int) -> None:
        items = turn_items(i)
        t = time.perf_counter()
        asyncio.run(self.session.add_items(items))
        self.times.append(time.perf_counter() - t)


def reynd_contender(base: Path) -> Contender:
    state_dir = base / "reynd-state"
    proc: Proc = start_reynd("oa", state_dir, base)
    session = ReyndSession("bench", str(proc.socket))

    def close() -> None:
        session.close()
        proc.stop()

    return Contender(
        "reynd",
        session,
        lambda: sides.files_bytes((state_dir / "state").rglob("*")),
        close,
        lambda: ReyndSession("bench", str(proc.socket)),
        lambda: sides.files_bytes((state_dir / "events").rglob("*")),
    )


def sqlite_contender(base: Path, advanced: bool) -> Contender:
    name = "advanced" if advanced else "sqlite"
    path = base / f"{name}.db"
    session: Any = (
        AdvancedSQLiteSession(session_id="bench", db_path=path, create_tables=True)
        if advanced
        else SQLiteSession("bench", path)
    )

    def disk() -> int:
        with session._locked_connection() as conn:  # in SQLite's favour: folded back
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sides.files_bytes(p for p in base.glob(f"{name}.db*"))

    return Contender(name, session, disk, session.close)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _median_ms(fn: Callable[[], Any]) -> float:
    return round(statistics.median(_timed(fn)[0] for _ in range(READS)) * 1e3, 3)


def _branching(c: Contender, turns: int) -> dict[str, float]:
    """Branch from the middle turn, then back to the first branch's tip."""
    mid = turns // 2
    if c.name == "reynd":
        first = next(b.id for b in c.session.branches().branches if b.active)
        t_branch, _ = _timed(lambda: c.session.branch_from_turn(mid))
        n = len(asyncio.run(c.session.get_items()))
        t_switch, _ = _timed(lambda: c.session.switch_branch(first))
    else:
        t_branch, _ = _timed(lambda: asyncio.run(c.session.create_branch_from_turn(mid)))
        n = len(asyncio.run(c.session.get_items()))
        t_switch, _ = _timed(lambda: asyncio.run(c.session.switch_to_branch("main")))
    assert n == 4 * (mid - 1), (c.name, n)
    assert len(asyncio.run(c.session.get_items())) == 4 * turns, c.name
    return {"branch_ms": round(t_branch * 1e3, 3), "switch_ms": round(t_switch * 1e3, 3)}


def _getter(session: Any, limit: int | None) -> Callable[[], Any]:
    return lambda: asyncio.run(session.get_items(limit))


def _cold(fresh: Callable[[], Any]) -> Callable[[], Any]:
    """A first get_items by a new instance (closed after)."""

    def read() -> None:
        with fresh() as new:
            asyncio.run(new.get_items())

    return read


RATIO_KEYS = ("add_ms_mean", "add_ms_at_N", "get_all_ms", "get_last_ms", "bytes_per_turn")


def run_one(items: int, base: Path, log: Callable[[str], None]) -> dict[str, Any]:
    turns = items // 4
    contenders = [
        reynd_contender(base),
        sqlite_contender(base, advanced=False),
        sqlite_contender(base, advanced=True),
    ]
    try:
        for i in range(turns):
            k = i % len(contenders)
            for c in contenders[k:] + contenders[:k]:
                c.turn(i)
            if (i + 1) % max(1, turns // 10) == 0:
                log(f"  N={items}: {4 * (i + 1)} items")
        out: dict[str, Any] = {"items": items, "turns": turns, "contenders": {}}
        tail = max(10, turns // 10)
        for c in contenders:
            got = asyncio.run(c.session.get_items())
            assert len(got) == items and got[-4:] == turn_items(turns - 1), c.name
            row: dict[str, Any] = {
                "add_ms_mean": round(statistics.fmean(c.times) * 1e3, 3),
                "add_ms_at_N": round(statistics.median(c.times[-tail:]) * 1e3, 3),
                "get_all_ms": _median_ms(_getter(c.session, None)),
                "get_last_ms": _median_ms(_getter(c.session, LAST)),
                "bytes_per_turn": round(c.disk_bytes() / turns),
            }
            if c.fresh is not None:
                row["get_all_cold_ms"] = _median_ms(_cold(c.fresh))
            out["contenders"][c.name] = row
        for c in contenders:
            if c.name in ("reynd", "advanced"):
                out["contenders"][c.name].update(_branching(c, turns))
        for c in contenders:
            c.close()
        for c in contenders:
            if c.audit_bytes is not None:
                out["contenders"][c.name]["audit_bytes_per_turn"] = round(c.audit_bytes() / turns)
        out["ratios"] = sides.ratios(out["contenders"], (*RATIO_KEYS, "branch_ms", "switch_ms"))
        return out
    except BaseException:
        for c in contenders:
            c.close()
        raise


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "OpenAI Agents SDK session: one add_items of 4 items per turn",
        f"{'N':>6} {'session':<9} {'add ms':>7} {'at N':>7} {'get all':>8} {'cold':>7} "
        f"{'get 20':>7} {'bytes/turn':>11} {'branch':>8} {'switch':>8}",
    ]
    for res in results:
        for name, row in res["contenders"].items():
            cold = row.get("get_all_cold_ms")
            audit = row.get("audit_bytes_per_turn")
            br, sw = row.get("branch_ms"), row.get("switch_ms")
            lines.append(
                f"{res['items']:>6} {name:<9} {row['add_ms_mean']:>7.2f} "
                f"{row['add_ms_at_N']:>7.2f} {row['get_all_ms']:>8.2f} "
                f"{'' if cold is None else f'{cold:.2f}':>7} {row['get_last_ms']:>7.2f} "
                f"{row['bytes_per_turn']:>11,} {'' if br is None else f'{br:.2f}':>8} "
                f"{'' if sw is None else f'{sw:.2f}':>8}"
                + ("" if audit is None else f"   (+ audit log {audit:,})")
            )
        for other, ratios in res["ratios"].items():
            lines.append(
                f"{'':>6} reynd/{other}: "
                + ", ".join(f"{k.replace('_ms', '')} {v}" for k, v in ratios.items())
            )
    return "\n".join(lines)


def main() -> None:
    sides.main(
        __doc__,
        name="items",
        quick=QUICK_ITEMS,
        default=DEFAULT_ITEMS,
        run_one=run_one,
        render=render,
    )


if __name__ == "__main__":
    main()

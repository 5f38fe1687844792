"""One LangGraph workload through three checkpointers, side by side in one run.

    python -m bench.langgraph [--quick] [--turns 100,1000,10000] [--json]

The contenders, each on its own fresh store, the same graph and inputs:

- `reynd`: ReyndSaver (reynctl.langgraph) on a real `reynd serve` over its
  socket: one wal.append (one fsync) per put and per put_writes.
- `sqlite`: LangGraph's SqliteSaver, WAL journal, synchronous=FULL (every
  commit fsyncs, as durable as reynd's acknowledgement).
- `sqlite+delta`: the same SqliteSaver with the message list in a
  `DeltaChannel` (LangGraph's storage-saving channel: only a marker in each
  checkpoint, the writes replayed from the nearest snapshot on read; a
  snapshot every 100 updates, the default).

The graph is a tool-calling chat agent: START -> model -> tools -> model ->
END, the model a deterministic stand-in (no LLM) that asks for a tool call
and then answers, the tools a LangGraph ToolNode; messages accumulate with
`add_messages` (4 per turn, 5 checkpoints per turn). The contenders take
turns, one turn each in rotating order, so that the machine's noise falls
on all of them alike.

Reported per T: time per turn (mean over the run, and the median of the
last tenth: the cost at T), `get_state` at a past checkpoint (the middle
of the thread; warm: the saver that wrote the thread; cold: a new saver's
first read, the median of 5 alternating between the contenders), and bytes per
turn: the store's files at the end, over T (reynd: state/, with its audit
log, events/, shown apart: a second copy of every record for people, never
read by recovery, rotated within `[audit] max_total_bytes`, 1 GiB by default;
SQLite: the database after folding its WAL file back in). SqliteSaver without
DeltaChannel stores the whole state in every checkpoint, so its bytes and
times grow with the square of T: at T = 10,000 it is left out (it would
write hundreds of gigabytes). Ratios are reynd / other: below 1, reynd is
better. The machine is shared and noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from bench import postgres, sides
from bench.daemon import Proc, start_reynd, workdir
from bench.postgres import Cluster
from reynctl.client import connect
from reynctl.langgraph import ReyndSaver, agent_name

THREAD: RunnableConfig = {"configurable": {"thread_id": "bench"}}
QUICK_TURNS = (50, 200)
DEFAULT_TURNS = (100, 1000)
# Beyond this, SqliteSaver without DeltaChannel (whole state per checkpoint) is left out.
PLAIN_SQLITE_MAX = 2000
PAST_READS = 5
COLD_READS = 5  # each by a new saver (the median is reported)
# The first page of history, as a UI lists it (get_state_history(limit=50)).
HISTORY_PAGE = 50


@tool
def lookup(ticket: int) -> str:
    """Look a ticket up in the tracker."""
    return f"ticket {ticket}: open, assigned to the build team, last update 2 days ago"


def _question(i: int) -> str:
    return f"What is the status of ticket {i}? The CI check on module {i % 37} keeps failing."


def _model(state: dict[str, Any]) -> dict[str, list[AnyMessage]]:
    """The model's stand-in: a tool call for a question, then an answer from the tool's result."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        reply = f"Here is what I found: {last.content}. I will follow up on the failing check."
        return {"messages": [AIMessage(content=reply)]}
    ticket = int(str(last.content).split("ticket ")[1].split("?")[0])
    call = {"name": "lookup", "args": {"ticket": ticket}, "id": f"call-{ticket}"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


class _Plain(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class _Delta(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def build(saver: BaseCheckpointSaver[Any], delta: bool = False) -> Any:
    graph: StateGraph[Any] = StateGraph(_Delta if delta else _Plain)
    # _model's parameter is annotated dict, not a state TypedDict, on purpose: LangGraph
    # reads that annotation at run time and would take a TypedDict as the node's own input
    # schema (the _Plain channels in the _Delta graph). Its stubs want a state-like type.
    graph.add_node("model", _model)  # type: ignore[type-var]
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


@dataclass(frozen=True)
class Spec:
    """How a process opens a saver of its own on a contender's store (picklable)."""

    kind: str  # "reynd" | "sqlite" | "postgres"
    where: str  # the daemon's socket, the database file, the conninfo
    delta: bool = False


@contextmanager
def open_saver(spec: Spec) -> Iterator[BaseCheckpointSaver[Any]]:
    """A new saver on `spec`'s store, as a restarted worker or a second process opens one."""
    if spec.kind == "reynd":
        with ReyndSaver(spec.where) as saver:
            yield saver
    elif spec.kind == "sqlite":
        # timeout: the 8-thread row has 8 processes on one file, as users run it.
        conn = sqlite3.connect(spec.where, check_same_thread=False, timeout=60)
        try:
            lite = SqliteSaver(conn)
            lite.setup()  # WAL journal mode
            conn.execute("PRAGMA synchronous=FULL")
            yield lite
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(spec.where) as pg:
            pg.setup()  # its migrations; a no-op once applied
            yield pg


@dataclass
class Contender:
    name: str
    spec: Spec
    graph: Any
    close: Callable[[], None]
    disk_bytes: Callable[[], int]  # read after close (logs flushed, SQLite's WAL folded back)
    audit_bytes: Callable[[], int] | None = None
    parts: Callable[[], dict[str, int]] | None = None  # where the bytes are (reynd)
    times: list[float] = field(default_factory=list)

    def turn(self, i: int) -> None:
        t = time.perf_counter()
        self.graph.invoke({"messages": [HumanMessage(content=_question(i))]}, THREAD)
        self.times.append(time.perf_counter() - t)

    def cold_read(self, config: RunnableConfig) -> int:
        """get_state of a past checkpoint through a new saver: its first read."""
        with open_saver(self.spec) as fresh:
            return len(build(fresh, self.spec.delta).get_state(config).values["messages"])


def _opened(name: str, spec: Spec, disk: Callable[[], int], **kw: Any) -> Contender:
    stack = contextlib.ExitStack()
    saver = stack.enter_context(open_saver(spec))
    return Contender(name, spec, build(saver, spec.delta), stack.close, disk, **kw)


def reynd_contender(base: Path) -> Contender:
    state_dir = base / "reynd-state"
    proc: Proc = start_reynd("lg", state_dir, base)
    c = _opened(
        "reynd",
        Spec("reynd", str(proc.socket)),
        # Everything reynd writes: the WAL, snapshots, indexes, config store (state/)
        # and the audit log (events/), which is also shown apart.
        lambda: sides.files_bytes(state_dir.rglob("*")),
        audit_bytes=lambda: sides.files_bytes((state_dir / "events").rglob("*")),
        parts=lambda: _parts(state_dir),
    )
    close_saver = c.close

    def close() -> None:
        close_saver()
        proc.stop()

    c.close = close
    return c


# Where reynd's bytes are: the state directory's parts (format.md), the audit log.
_PARTS = {
    "wal": "state/wal",
    "snapshots": "state/snapshots",
    "index": "state/index",
    "config": "state/config",
    "audit": "events",
}


def _parts(state_dir: Path) -> dict[str, int]:
    out = {name: sides.files_bytes((state_dir / sub).rglob("*")) for name, sub in _PARTS.items()}
    out["other"] = sides.files_bytes(state_dir.rglob("*")) - sum(out.values())
    return out


def sqlite_contender(base: Path, delta: bool) -> Contender:
    name = "sqlite+delta" if delta else "sqlite"
    path = base / f"{name}.db"
    # Closing the last connection folds SQLite's WAL file back into the database.
    return _opened(
        name, Spec("sqlite", str(path), delta), lambda: sides.files_bytes(base.glob(f"{name}.db*"))
    )


def postgres_contender(pg: Cluster, db: str, delta: bool) -> Contender:
    import psycopg

    with psycopg.connect(pg.conninfo, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db}"')
    conninfo = pg.conninfo.replace("dbname=postgres", f"dbname={db}")

    def disk() -> int:
        # The saver's tables with their indexes and TOAST; the server's own WAL
        # (recycled, shared by all databases) is left out, in PostgreSQL's favour.
        with psycopg.connect(conninfo) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r'"
            ).fetchone()
        return int(row[0]) if row else 0

    name = "postgres+delta" if delta else "postgres"
    return _opened(name, Spec("postgres", conninfo, delta), disk)


RATIO_KEYS = (
    "turn_ms_mean",
    "turn_ms_at_T",
    "get_state_past_ms",
    "get_state_past_cold_ms",
    "history_page_ms",
    "bytes_per_turn",
)


def _history_page(graph: Any) -> int:
    return len(list(graph.get_state_history(THREAD, limit=HISTORY_PAGE)))


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1e3, 3)


def run_one(
    turns: int, base: Path, pg: Cluster | None, log: Callable[[str], None]
) -> dict[str, Any]:
    contenders: list[Contender] = []
    past: dict[str, RunnableConfig] = {}
    try:
        contenders += [reynd_contender(base), sqlite_contender(base, delta=True)]
        if turns <= PLAIN_SQLITE_MAX:
            contenders.append(sqlite_contender(base, delta=False))
        if pg is not None:
            contenders.append(postgres_contender(pg, f"delta_{turns}", delta=True))
            if turns <= PLAIN_SQLITE_MAX:
                contenders.append(postgres_contender(pg, f"plain_{turns}", delta=False))
        for i in range(turns):
            k = i % len(contenders)
            for c in contenders[k:] + contenders[:k]:
                c.turn(i)
                if i == turns // 2:
                    past[c.name] = c.graph.get_state(THREAD).config
            if (i + 1) % max(1, turns // 10) == 0:
                log(f"  T={turns}: {i + 1} turns")
        out: dict[str, Any] = {"turns": turns, "contenders": {}}
        tail = max(10, turns // 10)
        want = 4 * (turns // 2 + 1)
        # Cold reads alternate between the contenders, COLD_READS rounds: one read each is
        # a single sample of a noisy machine.
        cold: dict[str, list[float]] = {c.name: [] for c in contenders}
        for r in range(COLD_READS):
            for c in contenders[r % len(contenders) :] + contenders[: r % len(contenders)]:
                t = time.perf_counter()
                assert c.cold_read(past[c.name]) == want, c.name
                cold[c.name].append(time.perf_counter() - t)
        for c in contenders:
            final = len(c.graph.get_state(THREAD).values["messages"])
            assert final == 4 * turns, (c.name, final)
            cold_ms = round(statistics.median(cold[c.name]) * 1e3, 3)
            out["contenders"][c.name] = {
                "turn_ms_mean": round(statistics.fmean(c.times) * 1e3, 3),
                "turn_ms_at_T": round(statistics.median(c.times[-tail:]) * 1e3, 3),
                "get_state_past_ms": _median_ms(
                    partial(c.graph.get_state, past[c.name]), PAST_READS
                ),
                "get_state_past_cold_ms": cold_ms,
                "history_page_ms": _median_ms(partial(_history_page, c.graph), 3),
            }
            if c.spec.kind == "reynd":
                # What a history UI can list instead: the thread's checkpoints as
                # generations, from the segment index, no value decoded (langgraph.md).
                with connect(c.spec.where) as client:
                    out["contenders"][c.name]["generations_page_ms"] = _median_ms(
                        partial(client.generations, agent=agent_name("bench"), limit=HISTORY_PAGE),
                        3,
                    )
        for c in contenders:
            c.close()
        for c in contenders:
            row = out["contenders"][c.name]
            row["bytes_per_turn"] = round(c.disk_bytes() / turns)
            if c.audit_bytes is not None:
                row["audit_bytes_per_turn"] = round(c.audit_bytes() / turns)
            if c.parts is not None:
                row["bytes_per_turn_parts"] = {k: round(v / turns) for k, v in c.parts().items()}
        out["ratios"] = sides.ratios(out["contenders"], RATIO_KEYS)
        return out
    except BaseException:
        for c in contenders:
            c.close()
        raise


def _thread_worker(spec: Spec, thread_id: str, turns: int, barrier: Any, q: Any) -> None:
    with open_saver(spec) as saver:
        graph = build(saver, spec.delta)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        barrier.wait(timeout=60)
        t = time.perf_counter()
        for i in range(turns):
            graph.invoke({"messages": [HumanMessage(content=_question(i))]}, config)
        q.put(time.perf_counter() - t)


def _turns_per_s(spec: Spec, threads: int, turns: int, tag: str) -> float:
    """`threads` processes, each a saver of its own and a thread of its own, started together."""
    ctx = multiprocessing.get_context("spawn")
    barrier, q = ctx.Barrier(threads), ctx.Queue()
    procs = [
        ctx.Process(target=_thread_worker, args=(spec, f"{tag}-{k}", turns, barrier, q))
        for k in range(threads)
    ]
    try:
        for p in procs:
            p.start()
        spans = [float(q.get(timeout=600)) for _ in procs]
        for p in procs:
            p.join()
            if p.exitcode != 0:
                raise RuntimeError(f"a {spec.kind} worker exited with {p.exitcode}")
        return threads * turns / max(spans)
    finally:
        for p in procs:  # a worker that died leaves the others at the barrier (it breaks, 60 s)
            if p.is_alive():
                p.terminate()
                p.join()


def run_concurrent(
    base: Path,
    pg: Cluster | None,
    *,
    threads: int,
    turns: int,
    rounds: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Turns/s with `threads` threads at once, each contender in turn, alternating rounds."""
    reynd = start_reynd("lg8", base / "reynd-8", base)
    try:
        specs = {
            "reynd": Spec("reynd", str(reynd.socket)),
            "sqlite+delta": Spec("sqlite", str(base / "c-sqlite+delta.db"), delta=True),
            "sqlite": Spec("sqlite", str(base / "c-sqlite.db")),
        }
        if pg is not None:
            import psycopg

            with psycopg.connect(pg.conninfo, autocommit=True) as admin:
                for db in ("c_delta", "c_plain"):
                    admin.execute(f'CREATE DATABASE "{db}"')
            specs["postgres+delta"] = Spec(
                "postgres", pg.conninfo.replace("dbname=postgres", "dbname=c_delta"), delta=True
            )
            specs["postgres"] = Spec(
                "postgres", pg.conninfo.replace("dbname=postgres", "dbname=c_plain")
            )
        for spec in specs.values():
            # Set-up (tables, WAL mode) before the clock, not in 8 racing workers.
            with open_saver(spec):
                pass
        rates: dict[str, list[float]] = {name: [] for name in specs}
        for r in range(rounds):
            names = list(specs)
            names = names[r % len(names) :] + names[: r % len(names)]
            for name in names:
                rates[name].append(_turns_per_s(specs[name], threads, turns, f"r{r}"))
                log(f"  {threads} threads, round {r + 1}: {name} {rates[name][-1]:.1f} turns/s")
    finally:
        reynd.stop()
    per_s = {name: round(statistics.median(v), 2) for name, v in rates.items()}
    return {
        "threads": threads,
        "turns_per_thread": turns,
        "rounds": rounds,
        "turns_per_s": per_s,
        # Above 1: reynd does more turns per second.
        "ratios": {n: sides.ratio(per_s["reynd"], v) for n, v in per_s.items() if n != "reynd"},
    }


def render(results: dict[str, Any]) -> str:
    lines = [
        "LangGraph workload: tool-calling agent, 4 messages and 5 checkpoints per turn",
        f"{'T':>6} {'saver':<15} {'turn ms':>8} {'at T':>8} {'past get':>9} "
        f"{'cold get':>9} {'history':>8} {'bytes/turn':>11}",
    ]
    if results.get("postgres_skipped"):
        lines.append(f"(PostgreSQL skipped: {results['postgres_skipped']})")
    for res in results["runs"]:
        for name, row in res["contenders"].items():
            audit = row.get("audit_bytes_per_turn")
            lines.append(
                f"{res['turns']:>6} {name:<15} {row['turn_ms_mean']:>8.2f} "
                f"{row['turn_ms_at_T']:>8.2f} {row['get_state_past_ms']:>9.2f} "
                f"{row['get_state_past_cold_ms']:>9.2f} {row['history_page_ms']:>8.2f} "
                f"{row['bytes_per_turn']:>11,}"
                + ("" if audit is None else f"   (of which audit log {audit:,})")
                + (
                    f"   generations.list page {row['generations_page_ms']:.2f} ms"
                    if "generations_page_ms" in row
                    else ""
                )
            )
            if "bytes_per_turn_parts" in row:
                parts = row["bytes_per_turn_parts"]
                lines.append(
                    f"{'':>6} {name} bytes/turn by part: "
                    + ", ".join(f"{k} {v:,}" for k, v in parts.items())
                )
        for other, ratios in res["ratios"].items():
            lines.append(
                f"{'':>6} reynd/{other}: " + ", ".join(f"{k} {v}" for k, v in ratios.items())
            )
    conc = results.get("concurrent")
    if conc:
        lines.append(
            f"{conc['threads']} threads at once, {conc['turns_per_thread']} turns each "
            f"(median of {conc['rounds']} rounds): "
            + ", ".join(f"{n} {v} turns/s" for n, v in conc["turns_per_s"].items())
        )
        lines.append(
            "  reynd/other turns/s (above 1: reynd ahead): "
            + ", ".join(f"{n} {v}" for n, v in conc["ratios"].items())
        )
    return "\n".join(lines)


def pg_saver_missing() -> str | None:
    """Why PostgresSaver cannot run here, the server aside (None: it can)."""
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError:
        return "langgraph-checkpoint-postgres is not installed (pip install -e '.[bench]')"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=f"T = {QUICK_TURNS} (a CI-size run)")
    ap.add_argument("--turns", help="comma-separated T values (default 100,1000)")
    ap.add_argument("--threads", type=int, default=8, help="the concurrent row's threads (0: skip)")
    ap.add_argument("--thread-turns", type=int, default=25, help="turns per concurrent thread")
    ap.add_argument(
        "--rounds", type=int, default=2, help="alternating rounds of the concurrent row"
    )
    ap.add_argument("--no-postgres", action="store_true", help="leave PostgresSaver out")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args()
    if args.turns:
        turns = tuple(int(t) for t in args.turns.split(","))
    else:
        turns = QUICK_TURNS if args.quick else DEFAULT_TURNS

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: dict[str, Any] = {"runs": []}
    with contextlib.ExitStack() as stack:
        why = "--no-postgres" if args.no_postgres else pg_saver_missing()
        pg = None if why else stack.enter_context(postgres.cluster_or_none(log))
        if pg is None:
            results["postgres_skipped"] = why or postgres.missing()
        for t in turns:
            with workdir() as base:
                log(f"T={t} in {base} (pid {os.getpid()})")
                results["runs"].append(run_one(t, base, pg, log))
        if args.threads:
            with workdir() as base:
                results["concurrent"] = run_concurrent(
                    base,
                    pg,
                    threads=args.threads,
                    turns=args.thread_turns,
                    rounds=args.rounds,
                    log=log,
                )
    print(json.dumps(results, indent=2) if args.json else render(results))


if __name__ == "__main__":
    main()

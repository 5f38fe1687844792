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
of the thread; warm: the saver that wrote the thread; for reynd also cold: a
new saver, whose first read fetches the thread's records), and bytes per
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

import sqlite3
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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

from bench import sides
from bench.daemon import Proc, start_reynd
from reynctl.langgraph import ReyndSaver

THREAD: RunnableConfig = {"configurable": {"thread_id": "bench"}}
QUICK_TURNS = (50, 200)
DEFAULT_TURNS = (100, 1000)
# Beyond this, SqliteSaver without DeltaChannel (whole state per checkpoint) is left out.
PLAIN_SQLITE_MAX = 2000
PAST_READS = 5


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


@dataclass
class Contender:
    name: str
    graph: Any
    disk_bytes: Callable[[], int]
    close: Callable[[], None]
    cold_read: Callable[[RunnableConfig], int] | None = None
    audit_bytes: Callable[[], int] | None = None  # read after close (the log is then flushed)
    times: list[float] = field(default_factory=list)

    def turn(self, i: int) -> None:
        t = time.perf_counter()
        self.graph.invoke({"messages": [HumanMessage(content=_question(i))]}, THREAD)
        self.times.append(time.perf_counter() - t)


def reynd_contender(base: Path) -> Contender:
    state_dir = base / "reynd-state"
    proc: Proc = start_reynd("lg", state_dir, base)
    saver = ReyndSaver(str(proc.socket))

    def cold(config: RunnableConfig) -> int:
        with ReyndSaver(str(proc.socket)) as fresh:
            return len(build(fresh).get_state(config).values["messages"])

    def close() -> None:
        saver.close()
        proc.stop()

    return Contender(
        "reynd",
        build(saver),
        # state/: the WAL, snapshots, segment indexes, config store: what time travel
        # reads. The audit log (events/) is apart: a second copy of every record for
        # people, never read by recovery, rotated within [audit] max_total_bytes.
        lambda: sides.files_bytes((state_dir / "state").rglob("*")),
        close,
        cold,
        lambda: sides.files_bytes((state_dir / "events").rglob("*")),
    )


def sqlite_contender(base: Path, delta: bool) -> Contender:
    name = "sqlite+delta" if delta else "sqlite"
    path = base / f"{name}.db"
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # WAL journal mode
    conn.execute("PRAGMA synchronous=FULL")

    def disk() -> int:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # in SQLite's favour: LangGraph never does
        return sides.files_bytes(p for p in base.glob(f"{name}.db*"))

    return Contender(name, build(saver, delta), disk, conn.close)


def run_one(turns: int, base: Path, log: Callable[[str], None]) -> dict[str, Any]:
    contenders = [reynd_contender(base), sqlite_contender(base, delta=True)]
    if turns <= PLAIN_SQLITE_MAX:
        contenders.append(sqlite_contender(base, delta=False))
    past: dict[str, RunnableConfig] = {}
    try:
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
        for c in contenders:
            final = len(c.graph.get_state(THREAD).values["messages"])
            assert final == 4 * turns, (c.name, final)
            reads = []
            for _ in range(PAST_READS):
                t = time.perf_counter()
                n = len(c.graph.get_state(past[c.name]).values["messages"])
                reads.append(time.perf_counter() - t)
            assert n == 4 * (turns // 2 + 1), (c.name, n)
            row: dict[str, Any] = {
                "turn_ms_mean": round(statistics.fmean(c.times) * 1e3, 3),
                "turn_ms_at_T": round(statistics.median(c.times[-tail:]) * 1e3, 3),
                "get_state_past_ms": round(statistics.median(reads) * 1e3, 3),
                "bytes_per_turn": round(c.disk_bytes() / turns),
            }
            if c.cold_read is not None:
                t = time.perf_counter()
                c.cold_read(past[c.name])
                row["get_state_past_cold_ms"] = round((time.perf_counter() - t) * 1e3, 3)
            out["contenders"][c.name] = row
        for c in contenders:
            c.close()
        for c in contenders:
            if c.audit_bytes is not None:
                out["contenders"][c.name]["audit_bytes_per_turn"] = round(c.audit_bytes() / turns)
        out["ratios"] = sides.ratios(
            out["contenders"],
            ("turn_ms_mean", "turn_ms_at_T", "get_state_past_ms", "bytes_per_turn"),
        )
        return out
    except BaseException:
        for c in contenders:
            c.close()
        raise


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "LangGraph workload: tool-calling agent, 4 messages and 5 checkpoints per turn",
        f"{'T':>6} {'saver':<13} {'turn ms':>8} {'at T':>8} {'past get':>9} "
        f"{'cold get':>9} {'bytes/turn':>11}",
    ]
    for res in results:
        for name, row in res["contenders"].items():
            cold = row.get("get_state_past_cold_ms")
            audit = row.get("audit_bytes_per_turn")
            lines.append(
                f"{res['turns']:>6} {name:<13} {row['turn_ms_mean']:>8.2f} "
                f"{row['turn_ms_at_T']:>8.2f} {row['get_state_past_ms']:>9.2f} "
                f"{'' if cold is None else f'{cold:.2f}':>9} {row['bytes_per_turn']:>11,}"
                + ("" if audit is None else f"   (+ audit log {audit:,})")
            )
        for other, ratios in res["ratios"].items():
            lines.append(
                f"{'':>6} reynd/{other}: turn {ratios['turn_ms_mean']}, at T "
                f"{ratios['turn_ms_at_T']}, past get {ratios['get_state_past_ms']}, "
                f"bytes {ratios['bytes_per_turn']}"
            )
    return "\n".join(lines)


def main() -> None:
    sides.main(
        __doc__,
        name="turns",
        quick=QUICK_TURNS,
        default=DEFAULT_TURNS,
        run_one=run_one,
        render=render,
    )


if __name__ == "__main__":
    main()

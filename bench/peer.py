"""The peer: LangGraph with its SQLite checkpointer (`SqliteSaver`), driven in-process.

One graph, START -> agent -> END, whose state is a message list with LangGraph's
`add_messages` reducer (as in every LangGraph chat agent). A turn is
`graph.invoke({"messages": [user]}, thread)`: the `agent` node answers with one
assistant message (no model: a fixed reply, the same text reynd's side writes),
and the checkpointer saves the thread's state at each superstep, as LangGraph
does. Going back is LangGraph's time travel: `get_state_history` lists the
checkpoints, and `invoke` with a past `checkpoint_id` forks from it.

Needs the `bench` extra (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from bench.texts import assistant_text, user_text

__all__ = ["PeerThread", "sqlite_default_synchronous"]

_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _agent(state: _State) -> dict[str, Any]:
    last = state["messages"][-1]
    i = int(str(last.content).rsplit(" ", 1)[1])
    return {"messages": [AIMessage(content=assistant_text(i))]}


def sqlite_default_synchronous() -> str:
    """What a fresh SQLite connection runs with on this machine (no PRAGMA)."""
    conn = sqlite3.connect(":memory:")
    try:
        return _SYNC_NAMES[conn.execute("PRAGMA synchronous").fetchone()[0]]
    finally:
        conn.close()


class PeerThread:
    """One LangGraph thread in its own SQLite file.

    `synchronous` is the SQLite mode ("FULL": every commit fsyncs the WAL, as
    durable as reynd's fsync per append; None: the connection's default).
    LangGraph's `setup()` puts the database in WAL journal mode.
    """

    def __init__(self, path: Path, synchronous: str | None = "FULL") -> None:
        self.path = path
        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        if synchronous is not None:
            self.conn.execute(f"PRAGMA synchronous={synchronous}")
        code = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        self.synchronous = _SYNC_NAMES[code]
        self.journal_mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        graph = StateGraph(_State)
        graph.add_node("agent", _agent)
        graph.add_edge(START, "agent")
        graph.add_edge("agent", END)
        self.graph = graph.compile(checkpointer=self.saver)
        self.thread: RunnableConfig = {"configurable": {"thread_id": "bench"}}

    def close(self) -> None:
        self.conn.close()

    # -- the workload ---------------------------------------------------------------

    def turn(self, i: int, config: RunnableConfig | None = None) -> float:
        """One durable turn (user + assistant); returns its duration in seconds."""
        t = time.perf_counter()
        self.graph.invoke({"messages": [HumanMessage(content=user_text(i))]}, config or self.thread)
        return time.perf_counter() - t

    def checkpoint(self) -> RunnableConfig:
        """The config naming the thread's latest checkpoint (not timed by callers)."""
        return self.graph.get_state(self.thread).config

    def seed(self, turns: int) -> None:
        """Write `turns` turns of history as ONE checkpoint (the sampled mode's start)."""
        messages: list[AnyMessage] = []
        for i in range(turns):
            messages += [HumanMessage(content=user_text(i)), AIMessage(content=assistant_text(i))]
        self.graph.update_state(self.thread, {"messages": messages}, as_node="agent")

    def list_history(self, limit: int | None = None) -> int:
        """`get_state_history`, newest first; returns how many checkpoints it listed."""
        return len(list(self.graph.get_state_history(self.thread, limit=limit)))

    def state_at(self, config: RunnableConfig) -> int:
        """The state as of a past checkpoint; returns its number of messages."""
        return len(self.graph.get_state(config).values["messages"])

    def messages(self) -> list[tuple[str, str]]:
        values = self.graph.get_state(self.thread).values
        roles = {"human": "user", "ai": "assistant"}
        return [(roles[m.type], str(m.content)) for m in values["messages"]]

    def disk_bytes(self) -> int:
        """The database's files, after folding SQLite's WAL back into the database.

        LangGraph never asks for that (its -wal file grows to the autocheckpoint
        size, ~4 MB, and is reused); folding it first is in the peer's favour.
        """
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(
            os.path.getsize(p)
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )

    def checkpoints(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])

"""ReyndSaver.list streams: a long thread's history is built one tuple at a time.

LangGraph UIs walk `get_state_history`; each tuple carries the thread's whole
state as of its checkpoint, so building every tuple before yielding the first
held the square of the thread's length in memory (a 1,000-turn thread took
13.6 GB). The memory a walk needs is measured with tracemalloc, in this
process, against a real daemon.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from reynctl.langgraph import ReyndSaver
from tests.harness import Daemon

BIG = 20_000  # bytes per message: the values, not the bookkeeping, dominate
TURNS = 30
CONFIG: RunnableConfig = {"configurable": {"thread_id": "long"}}


def _echo(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="a" * BIG + str(len(state["messages"])))]}


def _echo_app(saver: ReyndSaver) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("echo", _echo)
    graph.add_edge(START, "echo")
    return graph.compile(checkpointer=saver)


def _peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_list_holds_one_tuple_at_a_time(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        app = _echo_app(saver)
        for i in range(TURNS):
            app.invoke({"messages": [HumanMessage(content="q" * BIG + str(i))]}, CONFIG)
        app.get_state(CONFIG)  # the thread is read: the walks below fetch nothing new

        held: list[Any] = []
        all_held = _peak(lambda: held.extend(saver.list(CONFIG)))
        count = len(held)
        held.clear()

        seen = 0

        def walk() -> None:
            nonlocal seen
            for tup in saver.list(CONFIG):
                seen += 1
                assert tup.checkpoint["channel_values"] is not None

        walking = _peak(walk)
        assert seen == count >= 2 * TURNS
        # Holding them all costs the sum of the states; a walk, about one state.
        assert walking < all_held / 8, (walking, all_held)


def test_list_goes_on_from_its_read_when_the_thread_moves(daemon: Daemon) -> None:
    """A rewind between two tuples: the walk finishes the history as it read it."""
    with ReyndSaver(str(daemon.socket)) as saver:
        app = _echo_app(saver)
        app.invoke({"messages": [HumanMessage(content="one")]}, CONFIG)
        seq = daemon.call("daemon.status")["head"]
        for q in ("two", "three"):
            app.invoke({"messages": [HumanMessage(content=q)]}, CONFIG)
        before = [t.config for t in saver.list(CONFIG)]

        it = saver.list(CONFIG)
        walked = [next(it).config]
        daemon.call("rewind", {"seq": seq})
        assert len(app.get_state(CONFIG).values["messages"]) == 2  # the saver read the rewind
        walked += [t.config for t in it]
        assert walked == before
        assert len(list(saver.list(CONFIG))) < len(before)

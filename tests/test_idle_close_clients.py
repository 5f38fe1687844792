"""The repo's own clients outlive the daemon's idle close (issue 22 item 5, `idle_timeout_s`).

The daemon closes a connection with no call in flight and no subscription
once it sat idle for `idle_timeout_s` (300 s by default). A LangGraph app
waiting on a human for longer than that, with a ReyndSaver, must not fail
its next checkpoint: a request whose line never reached the daemon (the
send itself failed, or the daemon had hung up before it) was not applied,
so it is sent again on a new connection, whatever the method.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from reynctl.client import connect
from reynctl.langgraph import ReyndSaver
from reynd.protocol import methods as m
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import wait_until

IDLE = "idle_timeout_s = 0.5\n"


def _idle_closed(d: Daemon) -> None:
    """Poll until the daemon serves only the connection asking (the other one was closed)."""
    wait_until(lambda: d.call("daemon.status")["connections"] == 1, "the idle close")


def test_a_saver_idle_past_the_timeout_checkpoints_again(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=IDLE)
    try:
        graph = StateGraph(MessagesState)
        graph.add_node("echo", lambda s: {"messages": [AIMessage(content="ok")]})
        graph.add_edge(START, "echo")
        with ReyndSaver(str(d.socket)) as saver:
            app = graph.compile(checkpointer=saver)
            cfg: RunnableConfig = {"configurable": {"thread_id": "t1"}}
            app.invoke({"messages": [HumanMessage(content="hi")]}, cfg)
            _idle_closed(d)
            # The next turn writes first (a mutating call on the closed connection).
            app.invoke({"messages": [HumanMessage(content="again")]}, cfg)
            assert len(app.get_state(cfg).values["messages"]) == 4
    finally:
        d.stop()


def test_a_reconnecting_client_sends_a_write_again_after_an_idle_close(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=IDLE)
    try:
        with connect(str(d.socket), reconnect=True) as c:
            c.call("daemon.status", m.StatusParams(), m.StatusResult)
            _idle_closed(d)
            params = m.WalAppendParams(agent="a", kind="agent.created")
            seq = c.call("wal.append", params, m.WalAppendResult).value.seq
            assert c.reconnects == 1
        assert d.call("daemon.status")["head"] == seq == 1
    finally:
        d.stop()

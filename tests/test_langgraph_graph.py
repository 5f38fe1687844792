"""A real LangGraph graph (model node + ToolNode) checkpointed by ReyndSaver on a real daemon.

LangGraph's own time travel (get_state_history, update_state, invoke from a
past checkpoint) works through the saver, and reynd's does too: a `reynctl
rewind` moves the thread back (the next get_state sees the rewound state),
and retention GC keeps a live thread but frees a deleted one.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from reynctl.langgraph import ReyndSaver, agent_name
from reynctl.langgraph import stored as stored_module
from reynd.protocol.errors import StaleBranch
from tests.harness import Daemon, reynctl_json, start_daemon


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """A deterministic stand-in for a chat model: asks the tool, then answers with its result."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content=f"the sum is {last.content}")]}
    a, b = (int(x) for x in str(last.content).split("+"))
    call = {"name": "add", "args": {"a": a, "b": b}, "id": f"call-{len(state['messages'])}"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def build(saver: ReyndSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([add]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


def ask(graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, q: str) -> str:
    out = graph.invoke({"messages": [HumanMessage(content=q)]}, config)
    return str(out["messages"][-1].content)


def texts(graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig) -> list[str]:
    return [str(m.content) for m in graph.get_state(config).values["messages"] if m.content]


def test_turns_history_update_and_fork(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = build(saver)
        config: RunnableConfig = {"configurable": {"thread_id": "chat-1"}}
        assert ask(graph, config, "1+2") == "the sum is 3"
        assert ask(graph, config, "10+20") == "the sum is 30"
        assert ask(graph, config, "5+5") == "the sum is 10"
        # Four messages a turn: the question, the tool call, the tool's answer, the reply.
        assert len(graph.get_state(config).values["messages"]) == 12

        history = list(graph.get_state_history(config))
        # Per turn: the input, then one per superstep: __start__, model, tools, model.
        assert len(history) == 15
        ids = [h.config["configurable"]["checkpoint_id"] for h in history]
        assert ids == sorted(ids, reverse=True)
        for newer, older in itertools.pairwise(history):
            assert newer.parent_config is not None
            assert (
                newer.parent_config["configurable"]["checkpoint_id"]
                == (older.config["configurable"]["checkpoint_id"])
            )
        after_first = next(h for h in history if len(h.values["messages"]) == 4 and not h.next)

        # Invoke from a past checkpoint: a fork, now the thread's latest state.
        assert ask(graph, after_first.config, "7+8") == "the sum is 15"
        assert texts(graph, config) == [
            "1+2",
            "3",
            "the sum is 3",
            "7+8",
            "15",
            "the sum is 15",
        ]

        # update_state writes a checkpoint of its own (source "update").
        graph.update_state(config, {"messages": [AIMessage(content="noted")]})
        state = graph.get_state(config)
        assert texts(graph, config)[-1] == "noted"
        assert state.metadata is not None and state.metadata["source"] == "update"

    # A fresh saver (another process, say) reads the same thread back from reynd.
    with ReyndSaver(str(daemon.socket)) as other:
        assert texts(build(other), config)[-1] == "noted"


def test_reynctl_rewind_moves_the_thread_back(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = build(saver)
        config: RunnableConfig = {"configurable": {"thread_id": "chat-2"}}
        ask(graph, config, "1+1")
        ask(graph, config, "2+2")
        seq = reynctl_json(daemon.socket, "status")["head"]
        ask(graph, config, "3+3")
        assert texts(graph, config)[-1] == "the sum is 6"

        reynctl_json(daemon.socket, "rewind", str(seq), "--yes")
        assert texts(graph, config) == ["1+1", "2", "the sum is 2", "2+2", "4", "the sum is 4"]
        assert len(list(graph.get_state_history(config))) == 10

        # The thread goes on from there, on the new branch.
        assert ask(graph, config, "4+4") == "the sum is 8"
        assert len(graph.get_state(config).values["messages"]) == 12

        # And back again: checkout of the abandoned branch brings "3+3" back.
        abandoned = max(
            b for b in reynctl_json(daemon.socket, "branches")["branches"] if not b["active"]
        )
        reynctl_json(daemon.socket, "checkout", str(abandoned["tip"]), "--yes")
        assert texts(graph, config)[-1] == "the sum is 6"


def test_checkpoints_are_generations_to_rewind_to(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = build(saver)
        config: RunnableConfig = {"configurable": {"thread_id": "chat-4"}}
        ask(graph, config, "1+1")
        ask(graph, config, "2+2")
        listed = reynctl_json(daemon.socket, "generations", "--agent", agent_name("chat-4"))
        gens = listed["generations"]
        assert [g["label"] for g in gens] == [
            *(f"loop step {i}" for i in range(8, 4, -1)),
            "input step 4",
            *(f"loop step {i}" for i in range(3, -1, -1)),
            "input step -1",
        ]
        assert {g["kind"] for g in gens} == {"phase"}

        # `reynctl rewind` to the checkpoint that ended the first turn.
        end_of_first = next(g["seq"] for g in gens if g["label"] == "loop step 3")
        reynctl_json(daemon.socket, "rewind", str(end_of_first), "--yes")
        assert texts(graph, config) == ["1+1", "2", "the sum is 2"]
        assert not graph.get_state(config).next


def test_a_writer_the_rewind_left_behind_is_fenced(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = build(saver)
        config: RunnableConfig = {"configurable": {"thread_id": "chat-3"}}
        ask(graph, config, "1+1")
        seq = daemon.call("daemon.status")["head"]
        ask(graph, config, "2+2")
        latest = saver.get_tuple(config)  # the saver has read the tip
        assert latest is not None

        daemon.call("rewind", {"seq": seq})  # another client moves the thread back
        # A write based on the abandoned tip, without reading first: refused.
        with pytest.raises(StaleBranch):
            saver.put_writes(latest.config, [("messages", [])], "task-1")
        # Reading again puts the saver on the new branch, where the thread goes on.
        assert len(graph.get_state(config).values["messages"]) == 4
        assert ask(graph, config, "3+3") == "the sum is 6"
        assert len(graph.get_state(config).values["messages"]) == 8


def test_async_graph_runs_under_asyncio(daemon: Daemon) -> None:
    async def main() -> list[str]:
        saver = ReyndSaver(str(daemon.socket))
        try:
            graph = build(saver)
            config: RunnableConfig = {"configurable": {"thread_id": "chat-async"}}
            for q in ("1+2", "3+4"):
                await graph.ainvoke({"messages": [HumanMessage(content=q)]}, config)
            history = [h async for h in graph.aget_state_history(config)]
            assert len(history) == 10
            state = await graph.aget_state(config)
            return [str(m.content) for m in state.values["messages"] if m.content]
        finally:
            saver.close()

    assert asyncio.run(main())[-1] == "the sum is 7"


# Small segments and frequent snapshots: a few dozen checkpoints move the WAL floor.
GC_CONFIG = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 4096

[retention]
gc_interval_s = 0
# Keep only what recovery needs: the default horizon off, explicitly.
horizon_checkpoints = 0
horizon_age_s = 0
"""


def test_retention_keeps_a_live_thread_and_frees_a_deleted_one(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=GC_CONFIG)
    try:
        with ReyndSaver(str(d.socket)) as saver:
            graph = build(saver)
            live: RunnableConfig = {"configurable": {"thread_id": "live"}}
            gone: RunnableConfig = {"configurable": {"thread_id": "gone"}}
            for i in range(6):
                ask(graph, gone, f"{i}+1")
            for i in range(6):
                ask(graph, live, f"{i}+2")
            before = list(graph.get_state_history(live))
            live_from = d.call("wal.read", {"agent": agent_name("live")})["events"][0]["seq"]

            saver.delete_thread("gone")
            assert graph.get_state(gone).values == {}
            first = d.call("retention.gc")
            # The deleted thread's records went; the live thread's open turn held
            # the floor (snapshots up to the tip would have let it rise past).
            assert first["bytes_dropped"] > 0
            assert 1 < first["floor"] <= live_from
            assert list(graph.get_state_history(live)) == before
            records = d.call("wal.read", {"agent": agent_name("gone")})["events"]
            assert all(e["seq"] >= first["floor"] for e in records)

            saver.delete_thread("live")
            assert d.call("retention.gc")["floor"] > live_from
    finally:
        d.stop()


def test_a_value_larger_than_a_request_is_split_and_read_back(daemon: Daemon) -> None:
    # 3 MB, past 1 MiB requests even compressed (random: zlib cannot shrink it below that).
    rng = random.Random(3)
    big = "".join(chr(rng.randrange(32, 232)) for _ in range(3_000_000))
    config: RunnableConfig = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"doc": big}
    checkpoint["channel_versions"] = {"doc": "000000000001.00000000"}
    with ReyndSaver(str(daemon.socket)) as saver:
        saved = saver.put(
            config, checkpoint, {"source": "input", "step": -1}, {"doc": "000000000001.00000000"}
        )
    with ReyndSaver(str(daemon.socket)) as fresh:
        got = fresh.get_tuple(saved)
    assert got is not None and got.checkpoint["channel_values"]["doc"] == big


def test_large_values_are_compressed_and_an_older_savers_packed_ones_still_read(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [f"line {i}: the build of module {i % 37} failed at step {i % 11}" for i in range(3000)]
    old_cfg: RunnableConfig = {"configurable": {"thread_id": "packed"}}
    new_cfg: RunnableConfig = {"configurable": {"thread_id": "zipped"}}
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = build(saver)
        with monkeypatch.context() as m:
            m.setattr(stored_module, "ZIP_MIN", 1 << 62)  # as a saver before compression wrote
            ask(graph, old_cfg, "1+2")
            graph.update_state(old_cfg, {"messages": [HumanMessage(content="\n".join(lines))]})
        for cfg in (new_cfg, old_cfg):  # the packed thread goes on compressed
            ask(graph, cfg, "3+4")
            graph.update_state(cfg, {"messages": [HumanMessage(content="\n".join(lines[::-1]))]})
            ask(graph, cfg, "5+6")
    stored = {
        tid: {
            (blob["t"], len(blob["b"]) > 1024)
            for e in daemon.call("wal.read", {"agent": agent_name(tid), "limit": 500})["events"]
            if e["kind"] == "step.started"
            for blob in e["input"].get("blobs", {}).values()
        }
        for tid in ("packed", "zipped")
    }
    # Large values: packed by the "older" saver, compressed since (in either thread).
    assert stored["packed"] >= {("msgpack", True), ("z1:msgpack", True)}
    assert ("z1:msgpack", True) in stored["zipped"] and ("msgpack", True) not in stored["zipped"]
    with ReyndSaver(str(daemon.socket)) as fresh:
        graph = build(fresh)
        for cfg in (old_cfg, new_cfg):
            history = list(graph.get_state_history(cfg))
            contents = [str(m.content) for m in history[0].values["messages"]]
            assert contents[-1] == "the sum is 11" and "\n".join(lines[::-1]) in contents
            # Every checkpoint reads back, each from its own chain of whole values and deltas.
            assert all(
                h.values["messages"] == history[0].values["messages"][: len(h.values["messages"])]
                for h in history
                if h.values
            )


def test_a_graph_with_a_delta_channel_reads_back(daemon: Daemon) -> None:
    """LangGraph's DeltaChannel keeps only a marker per checkpoint and replays writes."""
    delta = pytest.importorskip("langgraph.channels.delta")
    from langgraph.graph.message import _messages_delta_reducer

    # The functional form: the annotation is evaluated here, where `delta` is bound.
    channel = delta.DeltaChannel(_messages_delta_reducer)
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

    def graph_of(saver: ReyndSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        g = StateGraph(State)
        # Untyped: `model`'s MessagesState hint would declare an add_messages channel.
        g.add_node("model", lambda state: model(state))  # noqa: PLW0108
        g.add_node("tools", ToolNode([add]))
        g.add_edge(START, "model")
        g.add_conditional_edges("model", tools_condition)
        g.add_edge("tools", "model")
        return g.compile(checkpointer=saver)

    config: RunnableConfig = {"configurable": {"thread_id": "delta"}}
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = graph_of(saver)
        for q in ("1+2", "3+4", "5+6"):
            graph.invoke({"messages": [HumanMessage(content=q)]}, config)
        first = [h for h in graph.get_state_history(config) if len(h.values["messages"]) == 4]
        assert first
    with ReyndSaver(str(daemon.socket)) as fresh:
        state = graph_of(fresh).get_state(config)
        assert [m.content for m in state.values["messages"]][-1] == "the sum is 11"
        assert len(state.values["messages"]) == 12


def test_concurrent_writes_share_batches_and_all_land(daemon: Daemon) -> None:
    """LangGraph writes from background threads: writes submitted meanwhile share a batch."""
    config: RunnableConfig = {"configurable": {"thread_id": "many", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    with ReyndSaver(str(daemon.socket)) as saver:
        saved = saver.put(config, checkpoint, {"source": "input", "step": -1}, {})
        errors: list[BaseException] = []

        def writer(k: int) -> None:
            for i in range(10):
                try:
                    value: Any = object() if (k, i) == (3, 5) else f"{k}-{i}"  # one unserializable
                    saver.put_writes(saved, [("ch", value)], f"task-{k}-{i}")
                except Exception as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(errors) == 1  # only the writer of the unserializable value failed
    with ReyndSaver(str(daemon.socket)) as fresh:
        got = fresh.get_tuple(saved)
    assert got is not None and got.pending_writes is not None
    assert sorted(v for _, _, v in got.pending_writes) == sorted(
        f"{k}-{i}" for k in range(6) for i in range(10) if (k, i) != (3, 5)
    )

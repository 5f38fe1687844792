"""ReyndSaver's one write path and its state, on a real daemon.

Every write goes through one function with one retry rule (a refusal that
says the saver's view was out of date is retried once against a fresh read);
reads never change what the saver's writes keep (the bases of the next put),
they only hand out bases a run's puts may extend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from reynctl.langgraph import ReyndSaver, agent_name
from tests.harness import Daemon
from tests.test_langgraph_graph import ask, build


def config(tid: str) -> RunnableConfig:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}


def records(daemon: Daemon, tid: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = daemon.call("wal.read", {"agent": agent_name(tid)})["events"]
    return events


def written(saver: ReyndSaver) -> dict[Any, Any]:
    """What the saver's writes keep, by identity: a read may not replace any of it."""
    return {
        key: (id(b.checkpoint), {ch: id(p) for ch, p in b.values.items()})
        for key, b in saver._written.items()
    }


def test_reads_never_change_what_writes_keep(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        graph = build(saver)
        ask(graph, config("t"), "1+1")
        seq = daemon.call("daemon.status")["head"]
        ask(graph, config("t"), "2+2")
        kept = written(saver)
        assert kept  # the turns' puts left their bases

        history = list(graph.get_state_history(config("t")))
        graph.get_state(config("t"))
        graph.get_state(history[-3].config)  # an older checkpoint
        list(saver.list(None))  # every thread
        daemon.call("rewind", {"seq": seq})  # another client moves the thread back
        assert len(graph.get_state(config("t")).values["messages"]) == 4  # read: it is seen
        assert written(saver) == kept

        # The writes go on from what the reads handed out, on the new branch.
        assert ask(graph, config("t"), "3+3") == "the sum is 6"
        assert len(graph.get_state(config("t")).values["messages"]) == 8


def test_a_saver_that_reads_first_stores_the_next_value_as_a_delta(daemon: Daemon) -> None:
    with ReyndSaver(str(daemon.socket)) as saver:
        ask(build(saver), config("d"), "1+1")
    before = len(records(daemon, "d"))
    with ReyndSaver(str(daemon.socket)) as fresh:  # nothing written by this one yet
        assert ask(build(fresh), config("d"), "2+2") == "the sum is 4"
    puts = [
        e["input"]
        for e in records(daemon, "d")[before:]
        if e["kind"] == "step.started" and e["input"]["lg"] == "put"
    ]
    first = next(p for p in puts if "messages" in p["blobs"])
    assert "base" in first["blobs"]["messages"]  # extends the value the run read


Write = Callable[[ReyndSaver, RunnableConfig], None]


def _put_writes(saver: ReyndSaver, latest: RunnableConfig) -> None:
    saver.put_writes(latest, [("ch", "late")], "task-late")


def _put(saver: ReyndSaver, latest: RunnableConfig) -> None:
    saver.put(latest, empty_checkpoint(), {"source": "input", "step": -1}, {})


def _copy_into(saver: ReyndSaver, latest: RunnableConfig) -> None:
    saver.copy_thread("source", latest["configurable"]["thread_id"])


@pytest.mark.parametrize("write", [_put, _put_writes, _copy_into])
def test_every_write_is_retried_once_when_its_view_was_out_of_date(
    daemon: Daemon, write: Write
) -> None:
    with ReyndSaver(str(daemon.socket)) as saver, ReyndSaver(str(daemon.socket)) as other:
        ask(build(saver), config("source"), "1+1")
        ask(build(saver), config("t"), "1+2")
        latest = saver.get_tuple(config("t"))  # the saver's view of t: open, exact
        assert latest is not None
        other.delete_thread("t")  # closed behind its back: its view is out of date
        before = len(records(daemon, "t"))
        write(saver, latest.config)  # refused (no open turn), read again, sent again
    kinds = [e["kind"] for e in records(daemon, "t")[before:]]
    assert kinds[:2] == ["message.received", "turn.started"]  # the thread opened again
    assert "step.started" in kinds

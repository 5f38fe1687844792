"""A new ReyndSaver's first read of a checkpoint (cold) against a full replay, on random threads.

A cold read searches the thread for the records naming the checkpoint and
fetches by seq what its put says it needs; it must return exactly what a
saver that replayed the whole thread returns, whatever happened to the
thread: forks from old checkpoints (their writes land later in the thread),
writes after an interrupt or an error, delete_thread and the thread used
again, delete_for_runs, prune, rewinds, namespaces, values split in parts,
copies, and records written by an older saver (no `need`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.base.id import uuid6

from reynctl.external.records import PART
from reynctl.langgraph import ReyndSaver, agent_name
from reynctl.langgraph.saver import _Unsure
from reynctl.langgraph.values import MERGE
from reynd.protocol.errors import InvalidParams
from tests.harness import Daemon
from tests.runtime_helpers import head
from tests.test_langgraph_graph import ask, build

THREADS = ("a", "b")
# Run ids of the inner puts and tombstones: a cold read searches a run's records by its id,
# or by "drop_runs" when the id is too short for `having` (both kinds of thread are tested).
LONG_RUNS = ["run-one", "run-two", "run-three"]
SHORT_RUNS = ["r1", "r2", "r3"]


class Counting(ReyndSaver):
    """A saver that counts its cold reads that were sure of their answer."""

    sure = 0
    unsure = 0

    def _cold(self, tid: str, ns: str, cid: str) -> Any:
        got = super()._cold(tid, ns, cid)
        if isinstance(got, _Unsure):
            Counting.unsure += 1
        else:
            Counting.sure += 1
        return got


def conf(tid: str, ns: str = "", cid: str | None = None) -> RunnableConfig:
    c: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ns}
    if cid is not None:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def as_compared(t: CheckpointTuple | None) -> Any:
    if t is None:
        return None
    return (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)


@contextmanager
def opened(daemon: Daemon, cls: type[ReyndSaver] = ReyndSaver) -> Iterator[ReyndSaver]:
    with cls(str(daemon.socket)) as saver:
        yield saver


def every_checkpoint(daemon: Daemon) -> list[RunnableConfig]:
    with opened(daemon) as saver:
        return [t.config for t in saver.list(None)]


def check_cold_reads(daemon: Daemon, extra: list[RunnableConfig]) -> None:
    """Every checkpoint (and a few that are not there), cold and after a full read."""
    configs = every_checkpoint(daemon) + extra
    for config in configs:
        c = config["configurable"]
        with opened(daemon, Counting) as cold:
            got = cold.get_tuple(config)
        with opened(daemon) as full:
            full._store.read(str(c["thread_id"]))  # held: the full replay answers
            want = full.get_tuple(config)
        assert as_compared(got) == as_compared(want), config


def put_inner(
    saver: ReyndSaver,
    tid: str,
    rng: random.Random,
    parent: str | None,
    *,
    big: bool = False,
    runs: list[str] = SHORT_RUNS,
) -> str:
    """A checkpoint of namespace `inner`, its list value grown from its parent's (`big`: by an
    item larger than a request, so that the value goes in `part` records)."""
    prev = saver.get_tuple(conf(tid, "inner", parent)) if parent else None
    items = list(prev.checkpoint["channel_values"].get("log", [])) if prev else []
    items += [f"item {rng.random()}" for _ in range(rng.randint(1, 3))]
    if big:
        items.append("x" * (PART + 100))
    current = prev.checkpoint["channel_versions"].get("log") if prev else None
    version = saver.get_next_version(None if current is None else str(current), None)
    cp: Any = {
        "v": 1,
        "id": str(uuid6()),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"log": items},
        "channel_versions": {"log": version},
        "versions_seen": {"n": {"log": version}},
    }
    out = saver.put(
        conf(tid, "inner", parent),
        cp,
        {"source": "loop", "step": len(items), "run_id": rng.choice(runs)},
        {"log": version},
    )
    return str(out["configurable"]["checkpoint_id"])


def program(
    daemon: Daemon, rng: random.Random, steps: int, runs: list[str]
) -> list[RunnableConfig]:
    """Random operations on the threads through savers that come and go; every checkpoint
    seen on the way (dropped, deleted, rewound away since: a read must not find it)."""
    seen: list[RunnableConfig] = []
    inner: dict[str, str | None] = dict.fromkeys(THREADS)
    saver = ReyndSaver(str(daemon.socket))
    try:
        for i in range(steps):
            tid = rng.choice(THREADS)
            graph = build(saver)
            op = rng.choice(
                ["ask"] * 6
                + ["inner"] * 3
                + ["big", "fork", "late", "interrupt", "delete", "drop", "prune", "rewind", "new"]
            )
            history = [t.config for t in saver.list(conf(tid))]
            seen += history
            if op == "ask" or not history:
                ask(graph, conf(tid), f"{i}+{rng.randint(0, 9)}")
            elif op in ("inner", "big"):
                inner[tid] = put_inner(saver, tid, rng, inner[tid], big=op == "big", runs=runs)
                seen.append(conf(tid, "inner", inner[tid]))
            elif op == "fork":  # run again from an old checkpoint: its writes land later
                old = rng.choice(history)
                graph.invoke({"messages": [HumanMessage(content=f"{i}+1")]}, old)
            elif op == "late":  # a task's writes for an old checkpoint, one of them special
                old = rng.choice(history)
                saver.put_writes(old, [("messages", []), ("__error__", f"e{i}")], f"task{i}")
            elif op == "interrupt":
                saver.put_writes(rng.choice(history), [("__interrupt__", [f"i{i}"])], f"t{i}")
            elif op == "delete":
                saver.delete_thread(tid)
                inner[tid] = None
            elif op == "drop":
                saver.delete_for_runs([rng.choice(runs)])
                inner = dict.fromkeys(THREADS)  # its parent may be gone: start a new chain
            elif op == "prune":
                saver.prune([tid])
                inner = dict.fromkeys(THREADS)
            elif op == "rewind":
                head = daemon.call("daemon.status")["head"]
                # checkout: the seq may be on a branch an earlier rewind abandoned (not
                # the tip itself: that is refused, nothing_to_do; seed 17 drew it)
                daemon.call("checkout", {"seq": rng.randint(max(1, head - 40), head - 1)})
                saver.close()
                saver = ReyndSaver(str(daemon.socket))  # the old one is fenced off
                inner = dict.fromkeys(THREADS)
            elif op == "new":  # another worker from now on
                saver.close()
                saver = ReyndSaver(str(daemon.socket))
    finally:
        saver.close()
    return seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cold_read_is_the_full_replay(daemon: Daemon, seed: int) -> None:
    rng = random.Random(seed)
    Counting.sure = Counting.unsure = 0
    seen = program(daemon, rng, 40, SHORT_RUNS if seed == 3 else LONG_RUNS)
    missing = [conf("a", "", str(uuid6())), conf("nobody", "", str(uuid6()))]
    missing += [conf("a", "", "xyz"), conf("a", "", "y" * 300)]  # ids `having` refuses
    check_cold_reads(daemon, seen + missing)
    assert Counting.sure > 3 * Counting.unsure  # the cold path answered, not the fallback


def test_a_long_list_reads_cold_from_a_few_records(daemon: Daemon) -> None:
    rng = random.Random(7)
    with opened(daemon) as saver:
        last = None
        for _ in range(4 * MERGE):
            last = put_inner(saver, "long", rng, last)
    Counting.sure = Counting.unsure = 0
    check_cold_reads(daemon, [])
    assert Counting.unsure == 0
    with opened(daemon) as saver:
        puts = [
            e["input"]
            for e in daemon.call("wal.read", {"agent": agent_name("long")})["events"]
            if e["kind"] == "step.started" and e["input"]["lg"] == "put"
        ]
    needs = [len(p["need"]) for p in puts if "need_of" not in p]
    assert max(needs) < 3 * MERGE  # merges: not one record per version since the whole


class Older(ReyndSaver):
    """A saver as they were before cold reads: its puts say nothing of what they need."""

    def _put_events(self, *args: Any, **kw: Any) -> Any:
        events = super()._put_events(*args, **kw)
        for _, data in events:
            if data.get("input", {}).get("lg") == "put":
                data["input"] = _without_need(data["input"])
        return events


def _without_need(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("need", "need_of")}


def test_copies_and_older_records_fall_back_to_the_full_replay(daemon: Daemon) -> None:
    with opened(daemon, Older) as older:
        graph = build(older)
        ask(graph, conf("mixed"), "1+2")
        ask(graph, conf("mixed"), "3+4")
    with opened(daemon) as saver:  # the thread goes on with a saver of today
        graph = build(saver)
        ask(graph, conf("mixed"), "5+6")
        saver.copy_thread("mixed", "copy")  # the copy's puts name the source's seqs: dropped
        ask(graph, conf("copy"), "7+8")
    Counting.sure = Counting.unsure = 0
    check_cold_reads(daemon, [])
    turn = len(every_checkpoint(daemon)) // 7  # 7 turns: 3 on `mixed`, 3 copied, 1 on the copy
    # Sure: the checkpoints of the turns written since (`mixed`'s third, the copy's own).
    assert (Counting.sure, Counting.unsure) == (2 * turn, 5 * turn)


def _inner(cid: str, run: str) -> tuple[RunnableConfig, Any]:
    """A checkpoint `cid` of namespace `inner` made by `run`, and its put's other arguments."""
    cp: Any = {
        "v": 1,
        "id": cid,
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"log": ["one"]},
        "channel_versions": {"log": "1"},
        "versions_seen": {},
    }
    return conf("again", "inner"), (cp, {"source": "loop", "step": 1, "run_id": run}, {"log": "1"})


def test_an_id_put_again_after_a_tombstone_does_not_bring_back_the_writes_it_hid(
    daemon: Daemon,
) -> None:
    """The tombstone of a run lies between two puts of one id: the writes before it stay
    hidden (the run search once started at the last put, and missed it)."""
    cid = str(uuid6())
    with opened(daemon) as saver:
        config, args = _inner(cid, "run-one")
        saver.put(config, *args)
        saver.put_writes(conf("again", "inner", cid), [("log", "w1")], "task-1")
        saver.delete_for_runs(["run-one"])
        config, args = _inner(cid, "run-two")
        saver.put(config, *args)
    Counting.sure = Counting.unsure = 0
    check_cold_reads(daemon, [conf("again", "inner", cid)])
    assert Counting.sure > 0


class Searching(ReyndSaver):
    """A saver whose searches of a thread (`ThreadStore.find`) go through `before` first."""

    def __init__(self, socket: str) -> None:
        super().__init__(socket)
        find, searches = self._store.find, 0

        def hooked(*args: Any, **kw: Any) -> Any:
            nonlocal searches
            searches += 1
            self.before(searches, kw)
            return find(*args, **kw)

        self._store.find = hooked  # type: ignore[method-assign]

    def before(self, search: int, kw: dict[str, Any]) -> None:
        """Called before search number `search` (from 1), with its keyword arguments."""


class RewindingBetween(Searching):
    """A saver whose cold read runs `meanwhile` between its two searches."""

    meanwhile: Callable[[], object] = staticmethod(lambda: None)

    def before(self, search: int, kw: dict[str, Any]) -> None:
        if search == 2:
            RewindingBetween.meanwhile()


def test_a_rewind_between_the_two_searches_is_not_half_seen(daemon: Daemon) -> None:
    """A rewind between the search for the checkpoint and the one for its run's tombstone
    cut the tombstone out of the second: the first one's writes, of a branch the thread
    had left, came back. The answer is the checkpoint as it is after the rewind."""
    cid = str(uuid6())
    with opened(daemon) as saver:
        config, args = _inner(cid, "run-one")
        saver.put(config, *args)
        saver.put_writes(conf("again", "inner", cid), [("log", "w1")], "task-1")
        to = head(daemon)  # w1 stands, w2 and the tombstone are cut off
        RewindingBetween.meanwhile = staticmethod(lambda: daemon.call("rewind", {"seq": to}))
        saver.put_writes(conf("again", "inner", cid), [("log", "w2")], "task-2")
        saver.delete_for_runs(["run-one"])
    with opened(daemon, RewindingBetween) as cold:
        got = cold.get_tuple(conf("again", "inner", cid))
    with opened(daemon) as full:
        full._store.read("again")
        want = full.get_tuple(conf("again", "inner", cid))
    assert want is not None and [w[2] for w in want.pending_writes or []] == ["w1"]
    assert as_compared(got) == as_compared(want)


class BeforeNeed(Searching):
    """A saver talking to a daemon older than wal.read's `turn` and `need`: its search refuses
    them as unknown fields (as such a daemon answered, -32602)."""

    def before(self, search: int, kw: dict[str, Any]) -> None:
        if kw.get("need") or kw.get("opened"):
            raise InvalidParams("unknown field need (wal.read takes agent, since, limit)")


def test_a_daemon_older_than_the_cold_read_gets_the_full_read(daemon: Daemon) -> None:
    with opened(daemon) as saver:
        ask(build(saver), conf("old"), "1+2")
    config = every_checkpoint(daemon)[-1]
    with opened(daemon, BeforeNeed) as cold:
        got = cold.get_tuple(config)
    with opened(daemon) as full:
        full._store.read("old")
        assert as_compared(got) == as_compared(full.get_tuple(config)) and got is not None

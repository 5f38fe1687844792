"""Subscriptions: one client subscribed, another causing events (real daemon), and the hub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from reynd.daemon.hub import Hub
from tests.harness import Client, Daemon, start_daemon


# Only inert events (agent.created / agent.configured): a message would make
# the daemon's agent runtime start a turn and append records of its own.
def append(c: Client, kind: str, agent: str = "a", **data: Any) -> int:
    return int(c.call("wal.append", {"agent": agent, "kind": kind, "data": data})["seq"])


def next_notify(c: Client) -> dict[str, Any]:
    msg = c.recv_json()
    assert msg.get("method") == "notify" and "id" not in msg, msg
    params: dict[str, Any] = msg["params"]
    return params


def test_subscriber_sees_records_and_agents(daemon: Daemon) -> None:
    with daemon.connect() as sub, daemon.connect() as writer:
        result = sub.call("subscribe", {"topics": ["records", "agents"]})
        assert result["head"] == writer.call("daemon.status")["head"]
        seq = append(writer, "agent.created")
        got = [next_notify(sub), next_notify(sub)]
        assert {n["topic"] for n in got} == {"records", "agents"}
        assert all(n["seq"] == seq and n["subscription"] == result["subscription"] for n in got)
        record = next(n for n in got if n["topic"] == "records")
        assert record["data"]["kind"] == "agent.created" and record["data"]["agent"] == "a"


def test_subscriber_sees_the_rewind_of_another_client(daemon: Daemon) -> None:
    with daemon.connect() as sub, daemon.connect() as writer:
        append(writer, "agent.created")
        first = append(writer, "agent.configured", options={"n": 1})
        append(writer, "agent.configured", options={"n": 2})
        sid = sub.call("subscribe", {"topics": ["rewinds"]})["subscription"]
        rewound = writer.call("rewind", {"seq": first})
        note = next_notify(sub)
        assert note["topic"] == "rewinds" and note["subscription"] == sid
        assert note["seq"] == rewound["reset_seq"]
        assert note["data"]["target"] == first and note["data"]["mode"] == "undo"


def test_topics_filter_and_unsubscribe(daemon: Daemon) -> None:
    with daemon.connect() as sub, daemon.connect() as writer:
        sid = sub.call("subscribe", {"topics": ["agents"]})["subscription"]
        append(writer, "agent.created", agent="x")
        append(writer, "agent.configured", agent="x", options={"n": 1})
        note = next_notify(sub)
        assert note["topic"] == "agents" and note["data"]["agent"] == "x"
        assert sub.call("unsubscribe", {"subscription": sid}) == {"ok": True}
        append(writer, "agent.created", agent="y")
        # Nothing queued for us any more: the next line is the reply to this request.
        assert "head" in sub.call("daemon.status")
        reply = sub.request("unsubscribe", {"subscription": sid})
        assert reply["error"]["code"] == -32602


def test_other_connection_cannot_unsubscribe_mine(daemon: Daemon) -> None:
    with daemon.connect() as sub, daemon.connect() as other:
        sid = sub.call("subscribe")["subscription"]
        assert other.request("unsubscribe", {"subscription": sid})["error"]["code"] == -32602


def test_stuck_subscriber_is_dropped_with_lagged_and_blocks_no_one(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config="subscriber_queue = 4\n")
    try:
        with d.connect() as stuck, d.connect() as writer:
            sid = stuck.call("subscribe", {"topics": ["records"]})["subscription"]
            append(writer, "agent.created")
            # Pipelined appends in rounds (the writer must read its replies to
            # keep its own pipe moving); the subscriber reads nothing meanwhile.
            seqs: list[int] = []
            for batch in range(60):
                writer.send(b"".join(_append_line(batch * 50 + i) for i in range(50)))
                seqs += [writer.recv_json()["result"]["seq"] for _ in range(50)]
            # Now read what the stuck subscriber was sent: a prefix, then `lagged`.
            last = None
            while True:
                msg = stuck.recv_json()
                if msg["method"] == "lagged":
                    break
                assert msg["method"] == "notify"
                assert last is None or msg["params"]["seq"] > last
                last = msg["params"]["seq"]
            assert msg["params"] == {"subscription": sid, "dropped_after_seq": last}
            assert last is not None and last < max(seqs)
            # The connection itself survives; the subscription is gone.
            assert "head" in stuck.call("daemon.status")
    finally:
        d.stop()


def _append_line(i: int) -> bytes:
    params = {
        "agent": "a",
        "kind": "agent.configured",
        "data": {"options": {"i": i, "pad": "x" * 100}},
    }
    msg = {"jsonrpc": "2.0", "id": i, "method": "wal.append", "params": params}
    return json.dumps(msg).encode() + b"\n"


# -- the hub alone ------------------------------------------------------------------------


async def test_hub_publish_never_blocks_and_drops_the_laggard() -> None:
    hub = Hub(queue_size=3)
    slow = hub.subscribe(1, ["records"])
    fast = hub.subscribe(2, ["records", "agents"])
    lines: list[bytes] = []

    async def write(line: bytes) -> None:
        lines.append(line)

    for seq in range(1, 4):
        hub.publish("records", seq, {"n": seq})
    hub.publish("generations", 4, {})  # no subscriber: nothing happens
    assert len(hub) == 2
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fast.pump, write)  # fast keeps up
        await trio.testing.wait_all_tasks_blocked()
        hub.publish("records", 5, {"n": 5})  # slow's queue is full: dropped
        assert len(hub) == 1 and slow.lagged and not fast.lagged
        hub.publish("agents", 6, {"agent": "z"})
        await trio.testing.wait_all_tasks_blocked()
        hub.unsubscribe(fast.id)
    fast_msgs = [json.loads(line) for line in lines]
    assert [m["params"]["seq"] for m in fast_msgs] == [1, 2, 3, 5, 6]
    assert fast_msgs[-1] == {
        "jsonrpc": "2.0",
        "method": "notify",
        "params": {"subscription": fast.id, "topic": "agents", "seq": 6, "data": {"agent": "z"}},
    }
    lines.clear()
    await slow.pump(write)  # what the slow one gets: its queue, then lagged
    slow_msgs = [json.loads(line) for line in lines]
    assert [m["method"] for m in slow_msgs] == ["notify"] * 3 + ["lagged"]
    assert slow_msgs[-1]["params"] == {"subscription": slow.id, "dropped_after_seq": 3}

"""wal.read: one agent's records on the active lineage, incremental across rewinds (real daemon)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.lineage import Lineage
from tests.harness import Daemon
from tests.runtime_helpers import error_of, head


def append(d: Daemon, agent: str, kind: str, **data: Any) -> int:
    seq: int = d.call("wal.append", {"agent": agent, "kind": kind, "data": data})["seq"]
    return seq


def read(d: Daemon, agent: str, since: int = 0, limit: int = 1000) -> dict[str, Any]:
    result: dict[str, Any] = d.call("wal.read", {"agent": agent, "since": since, "limit": limit})
    return result


def seqs(result: dict[str, Any]) -> list[int]:
    return [e["seq"] for e in result["events"]]


def test_reads_one_agents_records_and_follows_a_rewind(daemon: Daemon) -> None:
    a0 = append(daemon, "a", "agent.created")
    b0 = append(daemon, "b", "agent.created")
    a1 = append(daemon, "a", "message.received", message_id="m1", text="one")
    append(daemon, "b", "message.received", message_id="x", text="other agent")
    a2 = append(daemon, "a", "message.received", message_id="m2", text="two")

    full = read(daemon, "a")
    assert seqs(full) == [a0, a1, a2]
    assert full["common"] == 0 and full["upto"] == head(daemon) and not full["more"]
    assert full["events"][1] == {
        "kind": "message.received",
        "seq": a1,
        "ts": full["events"][1]["ts"],
        "agent": "a",
        "message_id": "m1",
        "text": "one",
    }
    synced = full["upto"]
    assert seqs(read(daemon, "a", since=synced)) == []  # nothing new

    # A rewind below what the reader holds: `common` says what to drop.
    daemon.call("rewind", {"seq": a1})
    a3 = append(daemon, "a", "message.received", message_id="m3", text="three")
    again = read(daemon, "a", since=synced)
    assert again["common"] == a1
    assert seqs(again) == [a3]
    assert again["branch"] != 0

    # Back to the abandoned branch: what the reader holds after a3 is abandoned in turn.
    daemon.call("checkout", {"seq": a2})
    back = read(daemon, "a", since=again["upto"])
    assert back["common"] == a1 and seqs(back) == [a2]
    assert b0 < a1  # b's records never show up in a's reads


def test_pages_with_limit(daemon: Daemon) -> None:
    created = append(daemon, "a", "agent.created")
    sent = [append(daemon, "a", "message.received", message_id=f"m{i}", text="t") for i in range(5)]
    first = read(daemon, "a", limit=2)
    assert seqs(first) == [created, sent[0]] and first["more"]
    second = read(daemon, "a", since=first["upto"], limit=2)
    assert second["common"] == first["upto"] and seqs(second) == sent[1:3]
    third = read(daemon, "a", since=second["upto"], limit=10)
    assert seqs(third) == sent[3:] and not third["more"]


def test_an_agent_rewound_out_of_existence_has_no_records(daemon: Daemon) -> None:
    before = append(daemon, "b", "agent.created")
    append(daemon, "a", "agent.created")
    daemon.call("rewind", {"seq": before})
    result = read(daemon, "a")
    assert result["events"] == [] and result["upto"] == head(daemon)
    assert read(daemon, "nobody")["events"] == []


def test_since_above_the_tip_is_refused(daemon: Daemon) -> None:
    append(daemon, "a", "agent.created")
    err = error_of(daemon, "wal.read", {"agent": "a", "since": 99})
    assert err["code"] == -32002 and "above the tip" in err["message"]


def test_having_keeps_the_records_that_hold_a_string(daemon: Daemon) -> None:
    key = append(daemon, "a", "agent.created", options={"id-1234": 1})
    hit = append(daemon, "a", "message.received", message_id="m1", text="the id-1234 here")
    append(daemon, "a", "message.received", message_id="m3", text="not id-12345")
    append(daemon, "b", "agent.created", options={"x": "id-1234"})  # another agent's
    word = append(daemon, "a", "message.received", message_id="id-1234", text="two")
    found = daemon.call("wal.read", {"agent": "a", "having": ["id-1234"]})
    # A whole JSON string, key or value: "the id-1234 here" and "id-12345" hold it as text only.
    assert seqs(found) == [key, word] and not found["more"]
    both = daemon.call("wal.read", {"agent": "a", "having": ["id-1234", "the id-1234 here"]})
    assert seqs(both) == [key, hit, word]
    # Paged as any read: `upto` says where the next page starts.
    page = daemon.call("wal.read", {"agent": "a", "having": ["id-1234"], "limit": 1})
    assert seqs(page) == [key] and page["more"]
    rest = daemon.call(
        "wal.read", {"agent": "a", "having": ["id-1234"], "since": page["upto"], "limit": 1}
    )
    assert seqs(rest) == [word]
    # A rewind: only the active lineage is searched.
    daemon.call("rewind", {"seq": hit})
    assert seqs(daemon.call("wal.read", {"agent": "a", "having": ["id-1234"]})) == [key]
    err = error_of(daemon, "wal.read", {"agent": "a", "having": ["id"]})
    assert err["code"] == -32602 and "having" in err["message"]


def test_turn_keeps_the_records_since_that_turn_in_flight_started(daemon: Daemon) -> None:
    def turn_read(agent: str = "a") -> list[int]:
        return seqs(daemon.call("wal.read", {"agent": agent, "turn": "t", "having": ["keep"]}))

    append(daemon, "a", "agent.created", options={"id": "keep"})
    append(daemon, "a", "message.received", message_id="m", text="hi")
    assert turn_read() == []  # turn t not in flight: nothing
    first = append(daemon, "a", "turn.started", turn_id="t", message_id="m")
    step = append(daemon, "a", "step.started", turn_id="t", step=0, input={"k": "keep"})
    assert turn_read() == [step]  # the created record is before the turn: left out
    append(daemon, "a", "turn.ended", turn_id="t", outcome="aborted")
    assert turn_read() == []  # ended: what it held is gone
    append(daemon, "a", "message.received", message_id="m2", text="again")
    again = append(daemon, "a", "turn.started", turn_id="t", message_id="m2")
    later = append(daemon, "a", "step.started", turn_id="t", step=0, input={"k": "keep"})
    assert turn_read() == [later]  # the earlier turn's records are not searched
    plain = daemon.call("wal.read", {"agent": "a", "turn": "t"})
    assert seqs(plain) == [again, later]
    daemon.call("rewind", {"seq": step})  # back inside the first turn
    assert turn_read() == [step] and first < step
    assert turn_read("nobody") == []


def test_turn_paging_across_a_close_tells_the_reader_to_drop_what_it_holds(
    daemon: Daemon,
) -> None:
    """A second page with `turn` after that turn closed, or closed and opened again, says
    `common` 0: the first page was of a life that has ended (a reader that took it with an
    empty second page had half an answer)."""

    def page(since: int) -> dict[str, Any]:
        params = {"agent": "a", "turn": "t", "having": ["keep"], "since": since, "limit": 1}
        result: dict[str, Any] = daemon.call("wal.read", params)
        return result

    append(daemon, "a", "agent.created")
    append(daemon, "a", "message.received", message_id="m", text="hi")
    started = append(daemon, "a", "turn.started", turn_id="t", message_id="m")
    for _ in range(3):
        append(daemon, "a", "step.started", turn_id="t", step=0, input={"k": "keep"})
    first = page(0)
    assert first["more"] and first["common"] == 0
    assert page(first["upto"])["common"] == first["upto"]  # still in flight: pages go on
    append(daemon, "a", "turn.ended", turn_id="t", outcome="aborted")
    assert page(first["upto"])["common"] == 0  # closed since the first page
    append(daemon, "a", "message.received", message_id="m2", text="again")
    assert append(daemon, "a", "turn.started", turn_id="t", message_id="m2") > started
    append(daemon, "a", "step.started", turn_id="t", step=0, input={"k": "keep"})
    later = page(first["upto"])
    assert later["common"] == 0 and later["events"]  # opened again: another life


def test_need_on_the_event_loop_leaves_large_records_to_wal_get(daemon: Daemon) -> None:
    """A search cheap enough for the event loop does not decode there the records its hits
    list as needed when they are large: `needed` leaves them out, wal.get brings them (on
    a worker thread). Decoding 60 records of 900 KB on the loop stalled every client."""
    append(daemon, "a", "agent.created")
    append(daemon, "a", "message.received", message_id="m", text="hi")
    append(daemon, "a", "turn.started", turn_id="t", message_id="m")
    big = [
        append(daemon, "a", "step.started", turn_id="t", step=0, input={"v": "x" * 400_000})
        for _ in range(4)
    ]
    small = append(daemon, "a", "step.started", turn_id="t", step=0, input={"v": "y"})
    gaps = [big[0]] + [b - a for a, b in itertools.pairwise(big)]
    hit = append(
        daemon, "a", "step.started", turn_id="t", step=0, input={"id": "cp-big", "need": gaps}
    )
    params = {"agent": "a", "having": ["cp-big"], "need": True, "since": hit - 1}
    found = daemon.call("wal.read", params)
    assert seqs(found) == [hit] and found["needed"] == []
    got = daemon.call("wal.get", {"agent": "a", "seqs": big})
    assert [e["seq"] for e in got["events"]] == big
    hit = append(
        daemon, "a", "step.started", turn_id="t", step=0, input={"id": "cp-small", "need": [small]}
    )
    params = {"agent": "a", "having": ["cp-small"], "need": True, "since": hit - 1}
    assert [e["seq"] for e in daemon.call("wal.read", params)["needed"]] == [small]


def test_need_brings_the_records_the_found_ones_list(daemon: Daemon) -> None:
    def step(**inp: Any) -> int:
        return append(daemon, "a", "step.started", turn_id="t", step=0, input=inp)

    append(daemon, "a", "agent.created")
    append(daemon, "a", "message.received", message_id="m", text="hi")
    append(daemon, "a", "turn.started", turn_id="t", message_id="m")
    s1, s2 = step(v=1), step(v=2)
    other = append(daemon, "b", "agent.created")  # another agent's: never brought
    s3 = step(v=3)
    full = step(v=4, need=[s1, s2 - s1])  # lists all it needs
    s5 = step(v=5)
    hit = step(id="cp-1", need=[other, s5 - other], need_of=full)  # the rest: full's list
    found = daemon.call("wal.read", {"agent": "a", "having": ["cp-1"], "need": True})
    assert seqs(found) == [hit]
    assert [e["seq"] for e in found["needed"]] == [s1, s2, full, s5]
    assert found["needed"][0] == read(daemon, "a")["events"][3]  # as wal.read returns it
    assert s3 not in [e["seq"] for e in found["needed"]]
    # Without `need`: none; a malformed list brings nothing.
    assert daemon.call("wal.read", {"agent": "a", "having": ["cp-1"]})["needed"] == []
    step(id="cp-2", need=["x", 1])
    assert daemon.call("wal.read", {"agent": "a", "having": ["cp-2"], "need": True})["needed"] == []
    daemon.call("rewind", {"seq": s5 - 1})  # s5 is off the active lineage: left out
    step(id="cp-3", need=[s1, s5 - s1])
    again = daemon.call("wal.read", {"agent": "a", "having": ["cp-3"], "need": True})
    assert [e["seq"] for e in again["needed"]] == [s1]


def test_get_returns_the_agents_records_on_the_active_lineage(daemon: Daemon) -> None:
    a0 = append(daemon, "a", "agent.created")
    b0 = append(daemon, "b", "agent.created")
    a1 = append(daemon, "a", "message.received", message_id="m1", text="one")
    a2 = append(daemon, "a", "message.received", message_id="m2", text="two")
    got = daemon.call("wal.get", {"agent": "a", "seqs": [a2, b0, a0, a2]})
    assert [e["seq"] for e in got["events"]] == [a0, a2] and got["head"] == head(daemon)
    assert got["events"] == [e for e in read(daemon, "a")["events"] if e["seq"] in (a0, a2)]
    daemon.call("rewind", {"seq": a1})  # a2 is off the active lineage now
    a3 = append(daemon, "a", "message.received", message_id="m3", text="three")
    assert [
        e["seq"] for e in daemon.call("wal.get", {"agent": "a", "seqs": [a1, a2, a3]})["events"]
    ] == [a1, a3]
    err = error_of(daemon, "wal.get", {"agent": "a", "seqs": [a3 + 5]})
    assert err["code"] == -32002 and "above the tip" in err["message"]


def _lineage_of(ops: list[int]) -> tuple[Lineage, list[set[int]]]:
    """A lineage built from ops (0: a plain record, k > 0: a reset to seq k-th back)."""
    lineage = Lineage()
    sets: list[set[int]] = [{0}]
    for op in ops:
        seq = lineage.head + 1
        if op and seq > 1:
            target = max(0, seq - 1 - op)
            lineage.observe(seq, target)
            sets.append(sets[target] | {seq})
        else:
            lineage.observe(seq)
            sets.append(sets[seq - 1] | {seq})
    return lineage, sets


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=30), st.data())
def test_common_is_the_highest_shared_seq(ops: list[int], data: st.DataObject) -> None:
    lineage, sets = _lineage_of(ops)
    a = data.draw(st.integers(0, lineage.head))
    b = data.draw(st.integers(0, lineage.head))
    assert lineage.common(a, b) == max(sets[a] & sets[b])

"""Reads are consistent with the tip they report at every instant of a rewind (real daemon).

A reader hammers `state.get {}` and `daemon.status` on its own connections
while rewinds and checkouts run. Afterwards every reply is checked against
the as-of read of the seq it reported: a reply that shows the reset record's
seq with the pre-rewind state (the abandoned future passed off as the tip) is
the bug these tests guard against.
"""

from __future__ import annotations

import threading
from typing import Any

from tests.harness import Client, Daemon


def _append(c: Client, agent: str, kind: str, **data: Any) -> int:
    params = {"agent": agent, "kind": kind, "data": data}
    return int(c.call("wal.append", params)["seq"])


def _history(c: Client, rounds: int, messages: int = 3) -> list[int]:
    """Agents created one after another, each with a few messages: the state
    differs at every seq, and a rewind changes the set of agents."""
    seqs = []
    for i in range(rounds):
        name = f"a{i}"
        seqs.append(_append(c, name, "agent.created"))
        for j in range(messages):
            seqs.append(_append(c, name, "message.received", message_id=f"m{j}", text="x" * 200))
    return seqs


class _Reader(threading.Thread):
    """Reads the tip in a loop until stopped; keeps every reply."""

    def __init__(self, d: Daemon) -> None:
        super().__init__(daemon=True)
        self.d = d
        self.stop = threading.Event()
        self.tips: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.d.connect() as c:
                while not self.stop.is_set():
                    self.tips.append(c.call("state.get", {}))
                    self.statuses.append(c.call("daemon.status"))
        except BaseException as exc:  # reported by the test thread
            self.error = exc


def test_tip_reads_during_rewinds_match_the_as_of_read_of_their_seq(daemon: Daemon) -> None:
    with daemon.connect() as c:
        seqs = _history(c, 12)
        reader = _Reader(daemon)
        reader.start()
        resets = []
        # Rewinds down the history, then checkouts back up the abandoned branches.
        for target in seqs[-2::-4]:
            resets.append(c.call("rewind", {"seq": target})["reset_seq"])
            _append(c, "late", "agent.created")  # a write on each new branch
        for reset in resets[:-1]:
            c.call("checkout", {"seq": reset - 1})
        reader.stop.set()
        reader.join(30)
        assert reader.error is None, reader.error
        assert reader.tips and reader.statuses

        by_seq: dict[int, Any] = {}
        for reply in reader.tips:
            seq = reply["seq"]
            if seq not in by_seq:
                by_seq[seq] = c.call("state.get", {"seq": seq})
            assert reply["agents"] == by_seq[seq]["agents"], f"tip read at seq {seq} is stale"
            assert reply["active"] and reply["branch"] == by_seq[seq]["branch"]
        for status in reader.statuses:
            head = status["head"]
            if head not in by_seq:
                by_seq[head] = c.call("state.get", {"seq": head})
            assert status["agents"] == len(by_seq[head]["agents"]), f"status at head {head}"
            assert status["branch"] == by_seq[head]["branch"]
        # Every reset record the reader saw as the tip came with its new state.
        assert set(resets) & set(by_seq), "the reader never saw a reset record as the tip"


def test_a_fenced_writer_never_appends_on_a_state_it_did_not_see(daemon: Daemon) -> None:
    """Read the tip, append based on it: each accepted append extends what was read."""
    with daemon.connect() as c:
        seqs = _history(c, 8, messages=20)
        stop = threading.Event()
        accepted: list[tuple[int, int, frozenset[str]]] = []
        failure: list[BaseException] = []

        def writer() -> None:
            try:
                with daemon.connect() as w:
                    i = 0
                    while not stop.is_set():
                        tip = w.call("state.get", {})
                        i += 1
                        reply = w.request(
                            "wal.append",
                            {
                                "agent": f"w{i}",
                                "kind": "agent.created",
                                "based_on": tip["seq"],
                            },
                        )
                        if "result" in reply:
                            accepted.append(
                                (tip["seq"], reply["result"]["seq"], frozenset(tip["agents"]))
                            )
                        else:
                            assert reply["error"]["code"] == -32005, reply
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        for target in seqs[-2::-3] * 4:
            c.call("checkout", {"seq": target})
        stop.set()
        thread.join(30)
        assert not failure, failure[0]
        assert accepted
        for based_on, seq, seen in accepted:
            # The state the append extends is exactly the one the writer read.
            lineage_state = c.call("state.get", {"seq": based_on})
            assert frozenset(lineage_state["agents"]) == seen
            after = c.call("state.get", {"seq": seq})
            assert set(after["agents"]) >= seen, f"append at {seq} lost what it was based on"


def test_the_tip_read_is_the_state_as_of_its_seq_after_every_append_and_reset(
    daemon: Daemon,
) -> None:
    """state.get at the tip (encoded once per head, then served again) never outlives its head."""
    with daemon.connect() as c:
        seqs = [_append(c, "ada", "agent.created")]
        tips = {}
        for j in range(4):
            seqs.append(_append(c, "ada", "message.received", message_id=f"m{j}", text="hi"))
            tips[seqs[-1]] = [c.call("state.get", {}) for _ in range(2)]
        _append(c, "bob", "agent.created")  # the head moves on: below it, as-of reads rebuild
        for seq, (first, again) in tips.items():
            assert first == again
            assert first["seq"] == seq
            past = c.call("state.get", {"seq": seq})
            assert first == past, f"the tip read at seq {seq} is not the state as of it"
        reset = c.call("rewind", {"seq": seqs[1]})["reset_seq"]
        tip = c.call("state.get", {})
        assert tip["seq"] == reset
        assert tip["agents"] == c.call("state.get", {"seq": seqs[1]})["agents"]
        assert tip == c.call("state.get", {"seq": reset})

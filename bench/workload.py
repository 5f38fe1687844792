"""The agent-thread workload, reynd and the peer side by side.

An agent thread of T turns, each adding a user and an assistant message (the
history grows); list the history; go back to the checkpoint in the middle and
continue with new turns; read the state at a past point; bytes on disk.

reynd runs as the real daemon (`reynd serve`, started on READY=1), driven over
its socket by an **external runtime**: per turn four `wal.append` calls
(`message.received`, `turn.started`, `step.committed` carrying the assistant
message, `turn.ended`), each fenced on the seq it saw last (`based_on`), each
acknowledged only after its fsync. The peer runs in this process (see
bench/peer.py). The two are driven turn by turn, alternating, so the machine's
drift hits both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.daemon import Client, Proc, start_reynd
from bench.texts import assistant_text, user_text

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

AGENT = "ada"
DRIVER = "external runtime: 4 x wal.append per turn over the socket (fsync each)"


class ReyndThread:
    """One agent of a fresh daemon, driven as an external runtime would."""

    def __init__(self, base: Path, name: str) -> None:
        self.state_dir = base / f"{name}-state"
        self.proc: Proc = start_reynd(name, self.state_dir, base)
        self.client = Client(self.proc.socket)
        self.tip = int(
            self.client.call(
                "wal.append",
                {
                    "agent": AGENT,
                    "kind": "agent.created",
                    "data": {"executor": "external"},
                },
            )["seq"]
        )

    def close(self) -> None:
        self.client.close()
        self.proc.stop()

    def _append(self, kind: str, data: dict[str, Any]) -> int:
        res = self.client.call(
            "wal.append", {"agent": AGENT, "kind": kind, "data": data, "based_on": self.tip}
        )
        self.tip = int(res["seq"])
        return self.tip

    def turn(self, i: int, tag: str = "") -> tuple[float, int]:
        """One durable turn; returns (seconds, the turn.ended seq: its checkpoint)."""
        msg, turn = f"m{i}{tag}", f"t{i}{tag}"
        t = time.perf_counter()
        self._append("message.received", {"message_id": msg, "text": user_text(i)})
        self._append("turn.started", {"message_id": msg, "turn_id": turn})
        self._append(
            "step.committed",
            {
                "turn_id": turn,
                "step": 0,
                "messages": [{"role": "assistant", "content": assistant_text(i)}],
            },
        )
        seq = self._append("turn.ended", {"turn_id": turn, "reply": assistant_text(i)})
        return time.perf_counter() - t, seq

    def list_history(self, limit: int | None = None) -> int:
        """`generations.list` for the agent, newest first, every page (or the first)."""
        count, cursor = 0, None
        while True:
            params: dict[str, Any] = {"agent": AGENT, "limit": limit or 1000}
            if cursor is not None:
                params["cursor"] = cursor
            res = self.client.call("generations.list", params)
            count += len(res["generations"])
            cursor = res["next_cursor"]
            if limit is not None or cursor is None:
                return count

    def rewind(self, seq: int) -> float:
        """Rewind to `seq`; returns the daemon's own duration in seconds."""
        res = self.client.call("rewind", {"seq": seq})
        self.tip = int(res["reset_seq"])
        return float(res["duration_ms"]) / 1e3

    def state_at(self, seq: int) -> int:
        res = self.client.call("state.get", {"seq": seq, "agent": AGENT})
        return len(res["agents"][AGENT]["history"])

    def messages(self) -> list[tuple[str, str]]:
        res = self.client.call("state.get", {"agent": AGENT})
        return [(m["role"], m.get("content", "")) for m in res["agents"][AGENT]["history"]]

    def disk_bytes(self) -> int:
        root = self.state_dir / "state"
        return sum(
            p.stat().st_size
            for sub in ("wal", "snapshots")
            for p in (root / sub).rglob("*")
            if p.is_file()
        )


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


@dataclass
class Side:
    """Figures of one system at one T."""

    name: str
    mode: str  # "full" or "sampled"
    write_s: list[float] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def _expected(turns: list[int]) -> list[tuple[str, str]]:
    out = []
    for i in turns:
        out += [("user", user_text(i)), ("assistant", assistant_text(i))]
    return out


def run(
    base: Path,
    turns: int,
    *,
    peer_sync: str | None,
    peer_full_max: int,
    sample: int = 10,
    forks: int = 5,
    reads: int = 5,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One T: reynd and the peer, alternating turn by turn. Returns both sides' figures.

    The peer is run in full up to `peer_full_max` turns. Above it (its cost per
    turn grows with T and its total with T^2: 10,000 turns would take hours and
    tens of GB), it runs in **sampled** mode: T - `sample` turns of history are
    written as one checkpoint (untimed), then `sample` turns are timed; the
    figures that need the whole thread are projected (marked so), always in the
    peer's favour.
    """
    from bench.peer import PeerThread  # needs the bench extra (LangGraph)

    work = base / f"T{turns}"
    work.mkdir()
    reynd = ReyndThread(work, "reynd")
    peer = PeerThread(work / "peer.sqlite", peer_sync)
    sampled = turns > peer_full_max
    r, p = Side("reynd", "full"), Side("peer", "sampled" if sampled else "full")
    mid = turns // 2
    past = turns // 4
    try:
        # -- write T turns ------------------------------------------------------------
        reynd_seq: dict[int, int] = {}
        peer_cfg: dict[int, RunnableConfig] = {}
        first_peer = 0
        if sampled:
            peer.seed(turns - sample)
            first_peer = turns - sample
            peer_cfg[turns - sample - 1] = peer.checkpoint()
            p.figures["seed_bytes"] = peer.disk_bytes()
        t_log = time.perf_counter()
        for i in range(turns):
            dt, seq = reynd.turn(i)
            r.write_s.append(dt)
            reynd_seq[i] = seq
            if i >= first_peer:
                p.write_s.append(peer.turn(i))
                if i in (mid - 1, past - 1):
                    peer_cfg[i] = peer.checkpoint()
            if time.perf_counter() - t_log > 30:
                log(f"    T={turns}: {i + 1} turns")
                t_log = time.perf_counter()
        r.figures["bytes"] = reynd.disk_bytes()
        p.figures["bytes"] = peer.disk_bytes()
        p.figures["checkpoints"] = peer.checkpoints()
        assert reynd.messages() == _expected(list(range(turns)))
        if not sampled:
            assert peer.messages() == _expected(list(range(turns)))

        # -- list the history (all of it, then the first page) ---------------------------
        dt, n = _timed(reynd.list_history)
        r.figures.update(list_s=dt, listed=n)
        dt, n = _timed(peer.list_history)
        p.figures.update(list_s=dt, listed=n)
        r.figures["page_s"] = statistics.median(
            _timed(lambda: reynd.list_history(50))[0] for _ in range(reads)
        )
        p.figures["page_s"] = statistics.median(
            _timed(lambda: peer.list_history(50))[0] for _ in range(reads)
        )

        # -- the state at a past point -------------------------------------------------
        if sampled:  # only the seed and the sampled turns exist: the oldest one
            past = turns - sample
        rs, ps = [], []
        for _ in range(reads):
            dt, n = _timed(lambda: reynd.state_at(reynd_seq[past - 1] if past else 0))
            rs.append(dt)
            assert n == 2 * past, (n, past)
            dt, n = _timed(lambda: peer.state_at(peer_cfg[past - 1]))
            ps.append(dt)
            assert n == 2 * past, (n, past)
        r.figures.update(state_at_s=statistics.median(rs), state_at_turn=past)
        p.figures.update(state_at_s=statistics.median(ps), state_at_turn=past)

        # -- go back to the middle and continue -----------------------------------------
        back = mid if not sampled else turns - sample
        rb, pb, rewind_server = [], [], []
        for k in range(forks):
            tag = f"f{k}"

            def reynd_back(k: int = k, tag: str = tag) -> None:
                t = time.perf_counter()
                rewind_server.append(reynd.rewind(reynd_seq[back - 1]))
                reynd.turn(turns + k, tag)
                rb.append(time.perf_counter() - t)

            def peer_back(k: int = k) -> None:
                pb.append(peer.turn(turns + k, peer_cfg[back - 1]))

            # Alternate which side goes first: whatever the one before leaves
            # behind (dirty pages, a busy disk) hits both alike.
            for step in (reynd_back, peer_back) if k % 2 == 0 else (peer_back, reynd_back):
                step()
        # ... and a few more turns on the last fork: both states must agree.
        for j in range(1, 4):
            reynd.turn(turns + forks + j)
            peer.turn(turns + forks + j)
        want = _expected(
            [*range(back), turns + forks - 1, *range(turns + forks + 1, turns + forks + 4)]
        )
        if reynd.messages() != want:
            raise AssertionError("reynd: unexpected history after the fork")
        if peer.messages() != want:
            raise AssertionError("peer: unexpected history after the fork")
        r.figures.update(
            back_s=statistics.median(rb),
            back_to_turn=back,
            back_s_all=rb,
            rewind_server_s=statistics.median(rewind_server),
        )
        p.figures.update(back_s=statistics.median(pb), back_to_turn=back, back_s_all=pb)
    finally:
        reynd.close()
        peer.close()
    for side in (r, p):
        side.figures["write_s"] = statistics.fmean(side.write_s)
        side.figures["write_s_median"] = statistics.median(side.write_s)
        side.figures["write_s_last"] = statistics.fmean(side.write_s[-sample:])
    r.figures["bytes_per_turn"] = r.figures["bytes"] / turns
    if sampled:
        # Measured: the cost of one turn at history length T (the sampled turns),
        # and its bytes. A full thread's mean over turns 1..T is a + b*T/2 for a
        # cost a + b*t per turn; half the cost at T is below that (the peer's favour).
        marginal_bytes = (p.figures["bytes"] - p.figures["seed_bytes"]) / sample
        p.figures.update(
            write_s_measured_at_T=p.figures["write_s"],
            write_s=p.figures["write_s"] / 2,
            bytes_per_turn_at_T=marginal_bytes,
            bytes_per_turn=marginal_bytes / 2,
            list_s_measured=p.figures["list_s"],
            # the sampled thread holds 3*sample+1 checkpoints of ~T turns each; the
            # full thread 3*T of T/2 turns on average
            list_s=p.figures["list_s"] / p.figures["listed"] * 3 * turns / 2,
            projected=["write_s", "bytes_per_turn", "list_s"],
        )
    else:
        p.figures["bytes_per_turn"] = p.figures["bytes"] / turns
        p.figures["projected"] = []
    return {
        "T": turns,
        "reynd": {"mode": r.mode, **r.figures},
        "peer": {
            "mode": p.mode,
            "synchronous": peer.synchronous,
            "journal_mode": peer.journal_mode,
            **p.figures,
        },
    }

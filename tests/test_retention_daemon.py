"""Retention in the real daemon: retention.get / set / gc, GC under live load, below-floor errors.

Independent expectation for GC under load: each client appends its own
`external` agent's messages and records the seq each got; the state as of any
seq at or above the floor must then hold exactly that agent's messages with
seqs up to it (the agents are never rewound in that phase).
"""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Client, Daemon, run_daemon_to_exit, start_daemon
from tests.runtime_helpers import agents_at, create_builtin, error_of, head, send, wait_until

# Small segments and frequent snapshots, so that a few hundred records make a floor move.
CONFIG = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 4096

[retention]
gc_interval_s = 0
# Keep only what recovery needs: the default horizon off, explicitly.
horizon_checkpoints = 0
horizon_age_s = 0
"""

CLIENTS = 3
PER_CLIENT = 120


@pytest.fixture
def rdaemon(short_tmp: Path) -> Any:
    d = start_daemon(short_tmp, config=CONFIG)
    yield d
    d.stop()


def append(c: Client | Daemon, agent: str, kind: str, **data: Any) -> int:
    result = c.call("wal.append", {"agent": agent, "kind": kind, "data": data})
    return int(result["seq"])


def fill(d: Daemon, agent: str, n: int) -> dict[int, str]:
    """Create `agent` (external) and append n messages; returns seq -> message id."""
    out: dict[int, str] = {}
    with d.connect() as c:
        append(c, agent, "agent.created")
        for i in range(n):
            mid = f"{agent}-{i}"
            out[append(c, agent, "message.received", message_id=mid, text="x" * 40)] = mid
    return out


def inbox_ids(d: Daemon, agent: str, seq: int) -> list[str]:
    state = d.call("state.get", {"seq": seq, "agent": agent})
    return [item["message_id"] for item in state["agents"][agent]["inbox"]]


def below_floor(d: Daemon, method: str, seq: int, floor: int) -> None:
    err = error_of(d, method, {"seq": seq})
    assert err["code"] == -32003, err
    assert f"the floor is {floor}" in err["message"], err
    assert err["data"]["floor"] == floor and err["data"]["seq"] == seq


def test_get_set_gc_and_below_floor(rdaemon: Daemon) -> None:
    d = rdaemon
    info = d.call("retention.get")
    assert info["floor"] == 1 and info["coarse"] == [] and info["segments"] == 0
    assert info["policy"] == {
        "wal_keep_records": 0,
        "wal_keep_age_s": 0.0,
        "wal_keep_bytes": 0,
        "snapshot_keep": 4,
        "snapshot_keep_age_s": 0.0,
        "gc_interval_s": 0.0,
        "horizon_checkpoints": 0,
        "horizon_age_s": 0.0,
        "budget_bytes": 10 << 30,
        "budget_free_pct": 50.0,
    }
    seqs = fill(d, "ext", 300)
    before = {s: inbox_ids(d, "ext", s) for s in random.Random(0).sample(sorted(seqs), 40)}
    tip = head(d)
    info = d.call("retention.set", {"snapshot_keep": 1, "wal_keep_records": 100})
    assert info["policy"]["snapshot_keep"] == 1 and info["policy"]["wal_keep_records"] == 100
    assert info["policy"]["wal_keep_bytes"] == 0  # fields left out keep their value
    result = d.call("retention.gc")
    floor = result["floor"]
    assert result["floor_before"] == 1 and 1 < floor <= tip - 100 + 1
    assert result["segments_dropped"] > 0 and result["bytes_dropped"] > 0
    info = d.call("retention.get")
    assert info["floor"] == floor and info["head"] == tip
    # The coarse window: the newest snapshot below floor - 1, and the entry point floor - 1.
    assert floor - 1 in info["coarse"] and len(info["coarse"]) <= 2
    assert all(s < floor for s in info["coarse"])
    assert info["wal_bytes"] == sum(p.stat().st_size for p in d.state_dir.rglob("wal/*.jsonl"))
    # Inside the window: as before. Below: refused, naming the floor; the tip never moved.
    for s, ids in before.items():
        if s >= floor or s in info["coarse"]:
            assert inbox_ids(d, "ext", s) == ids, s
        else:
            below_floor(d, "state.get", s, floor)
    victim = next(s for s in range(floor - 1, 0, -1) if s not in info["coarse"])
    for method in ("state.get", "rewind", "checkout"):
        below_floor(d, method, victim, floor)
    assert head(d) == tip
    # A second collection with the same policy has nothing left to drop.
    assert d.call("retention.gc")["segments_dropped"] == 0


def test_act_turn_rewind_below_the_floor_says_so_not_use_checkout(rdaemon: Daemon) -> None:
    d = rdaemon
    seqs = sorted(fill(d, "ext", 40))
    d.call("rewind", {"seq": seqs[5]})  # seqs[6:] are abandoned
    fill(d, "more", 300)
    d.call("retention.set", {"snapshot_keep": 1, "wal_keep_records": 100})
    floor = d.call("retention.gc")["floor"]
    coarse = d.call("retention.get")["coarse"]
    victim = next(s for s in seqs[6:] if s not in coarse)
    assert victim < floor
    # Neither an act-turn rewind nor the checkout an abandoned seq would call for can work.
    err = error_of(d, "act_turn.rewind", {"agent": "ext", "seq": victim})
    assert err["code"] == -32003 and f"the floor is {floor}" in err["message"], err
    assert "checkout" not in err["message"]
    below_floor(d, "checkout", victim, floor)


@pytest.mark.parametrize(
    "params",
    [
        {"snapshot_keep": -1},
        {"wal_keep_records": "many"},
        {"wal_keep_age_s": -0.5},
        {"gc_interval_s": [1]},
        {"wal_keep_forever": True},
        {"budget_free_pct": 150},
        {"horizon_checkpoints": -1},
    ],
)
def test_bad_retention_set_is_invalid_params(shared_daemon: Daemon, params: dict[str, Any]) -> None:
    before = shared_daemon.call("retention.get")["policy"]
    err = error_of(shared_daemon, "retention.set", params)
    assert err["code"] == -32602, err
    assert shared_daemon.call("retention.get")["policy"] == before


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[retention]\nwal_keep_recs = 5\n", "wal_keep_recs"),
        ("[retention]\nsnapshot_keep = -2\n", "snapshot_keep"),
        ('[retention]\nwal_keep_age_s = "1d"\n', "wal_keep_age_s"),
    ],
)
def test_retention_config_is_validated_at_start(short_tmp: Path, body: str, needle: str) -> None:
    config = short_tmp / "reynd.toml"
    config.write_text(body)
    proc = run_daemon_to_exit(
        short_tmp,
        state_dir=short_tmp / "state",
        socket_path=short_tmp / "reynd.sock",
        config_path=config,
    )
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and str(config) in proc.stderr


def test_config_policy_is_in_force(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=CONFIG + "wal_keep_bytes = 12345\nsnapshot_keep = 0\n")
    try:
        policy = d.call("retention.get")["policy"]
        assert policy["wal_keep_bytes"] == 12345 and policy["snapshot_keep"] == 0
    finally:
        d.stop()


@dataclass
class Appender:
    """One client pipelining its external agent's messages; records every seq it got."""

    socket: Path
    agent: str
    acked: dict[int, str] = field(default_factory=dict)
    errors: list[Any] = field(default_factory=list)

    def run(self) -> None:
        try:
            with Client(self.socket) as c:
                append(c, self.agent, "agent.created")
                for start in range(0, PER_CLIENT, 20):  # pipelined in chunks of 20
                    ids = {1000 + i: f"{self.agent}-{i}" for i in range(start, start + 20)}
                    for rid, mid in ids.items():
                        params = {
                            "agent": self.agent,
                            "kind": "message.received",
                            "data": {"message_id": mid, "text": "y" * 40},
                        }
                        msg = {"jsonrpc": "2.0", "id": rid, "method": "wal.append"}
                        c.send(json.dumps({**msg, "params": params}).encode() + b"\n")
                    while ids:
                        reply = c.recv_json()
                        if reply.get("id") in ids:
                            mid = ids.pop(reply["id"])
                            if "result" in reply:
                                self.acked[reply["result"]["seq"]] = mid
                            else:
                                self.errors.append(reply["error"])
        except BaseException as exc:
            self.errors.append(repr(exc))


def test_gc_during_live_appends_and_turns_loses_nothing_in_the_window(rdaemon: Daemon) -> None:
    d = rdaemon
    d.call("retention.set", {"wal_keep_records": 60, "snapshot_keep": 0})
    create_builtin(d, "bot", delay=0)
    apps = [Appender(d.socket, f"ext{k}") for k in range(CLIENTS)]
    threads = [threading.Thread(target=a.run) for a in apps]
    for t in threads:
        t.start()
    floors = [1]
    turns = 0
    while any(t.is_alive() for t in threads):
        send(d, "bot", f"hello {turns}", wait=False)  # an agent running turns meanwhile
        turns += 1
        result = d.call("retention.gc")
        assert result["floor_before"] == floors[-1] and result["floor"] >= floors[-1]
        floors.append(result["floor"])
    for t in threads:
        t.join()
    assert all(not a.errors for a in apps), [a.errors for a in apps]
    assert all(len(a.acked) == PER_CLIENT for a in apps)
    wait_until(lambda: d.call("agents.get", {"agent": "bot"})["status"] == "idle", "bot idle")
    floor = d.call("retention.gc")["floor"]
    assert floor > 1, floors
    tip = head(d)
    # Every seq inside the window (a sample), every client's agent: exactly its appends so far.
    for s in [*sorted(random.Random(1).sample(range(floor, tip + 1), 15)), tip]:
        agents = agents_at(d, s)
        for a in apps:
            want = [mid for q, mid in sorted(a.acked.items()) if q <= s]
            got = [i["message_id"] for i in agents.get(a.agent, {"inbox": []})["inbox"]]
            assert got == want, (a.agent, s)
    bot = agents_at(d)["bot"]
    assert bot["turns_completed"] == turns and not bot["pending_chains"]


def test_gc_after_rewinds_keeps_abandoned_branches_inside_the_window(rdaemon: Daemon) -> None:
    d = rdaemon
    seqs = sorted(fill(d, "ext", 150))
    mark = seqs[100]
    abandoned = {s: inbox_ids(d, "ext", s) for s in seqs[101::7]}
    d.call("rewind", {"seq": mark})
    more = fill(d, "ext2", 40)
    d.call("retention.set", {"wal_keep_records": head(d) - mark + 5, "snapshot_keep": 0})
    result = d.call("retention.gc")
    floor = result["floor"]
    assert 1 < floor <= mark
    # The abandoned branch is inside the window: readable as before, reachable by checkout.
    for s, ids in abandoned.items():
        state = d.call("state.get", {"seq": s, "agent": "ext"})
        assert not state["active"]
        assert [i["message_id"] for i in state["agents"]["ext"]["inbox"]] == ids
    target = max(abandoned)
    out = d.call("checkout", {"seq": target})
    assert out["mode"] == "fork_switch"
    assert inbox_ids(d, "ext", head(d)) == abandoned[target]
    assert "ext2" not in agents_at(d)
    # Back to the other branch; then a collection that keeps less drops it all below.
    d.call("checkout", {"seq": max(more)})
    d.call("retention.set", {"wal_keep_records": 0})
    fill(d, "ext3", 80)  # the snapshotter cuts a snapshot on the active branch meanwhile
    # Past the reset record that forked at `target` too: while it is above the
    # floor, GC keeps an entry snapshot at `target` (its branch must rebuild).
    floor = wait_until(
        lambda: (f := d.call("retention.gc")["floor"]) > out["reset_seq"] and f,
        "a collection past the abandoned branch (once a newer snapshot is written)",
    )
    below_floor(d, "checkout", target, floor)
    below_floor(d, "state.get", target, floor)


def rows(out: str) -> dict[str, str]:
    """`key  value` lines (render._pairs) as a dict."""
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines())


def test_reynctl_retention(rdaemon: Daemon) -> None:
    """`reynctl retention` (show), `retention set KEY=VALUE ...`, `retention gc`: the real CLI."""
    from tests.test_reynctl_cli import ok, reynctl

    d = rdaemon
    sock = d.socket
    shown = rows(ok(reynctl("retention", sock=sock)))
    assert shown["floor"] == "seq 1 (nothing collected)" and shown["coarse points"] == "none"
    fill(d, "ext", 200)
    shown = rows(
        ok(reynctl("retention", "set", "snapshot_keep=0", "wal_keep_records=50", sock=sock))
    )
    assert shown["keep records"] == "50" and shown["keep snapshots"] == "0 below the floor"
    shown = json.loads(ok(reynctl("retention", "show", "--json", sock=sock)))
    assert shown["policy"]["wal_keep_records"] == 50 and shown["floor"] == 1
    out = ok(reynctl("retention", "gc", sock=sock))
    floor = d.call("retention.get")["floor"]
    assert floor > 1 and f"floor seq 1 -> {floor}" in out and "segment" in out
    again = json.loads(ok(reynctl("--json", "retention", "gc", sock=sock)))
    assert again["floor_before"] == again["floor"] == floor and again["segments_dropped"] == 0
    assert "nothing to collect" in ok(reynctl("retention", "gc", sock=sock))
    shown = rows(ok(reynctl("retention", sock=sock)))
    assert shown["floor"] == f"seq {floor}"
    assert str(floor - 1) in shown["coarse points"].split(", ")  # the entry point
    # Usage errors (2) are caught before the daemon; its refusals exit 1; no daemon exits 3.
    for bad in (["wal_keep_recs=5"], ["snapshot_keep=-1"], ["wal_keep_age_s=soon"], ["oops"]):
        proc = reynctl("retention", "set", *bad, sock=sock)
        assert proc.returncode == 2, (bad, proc.stderr)
    assert "unknown key 'wal_keep_recs'" in reynctl("retention", "set", "wal_keep_recs=5").stderr
    proc = reynctl("show", "3", sock=sock)
    assert (
        proc.returncode == 1
        and "below_floor" in proc.stderr
        and f"floor is {floor}" in (proc.stderr)
    )
    proc = reynctl("retention", sock=sock.with_name("absent.sock"))
    assert proc.returncode == 3

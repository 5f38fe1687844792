"""The audit EventStore and the replay debugger, against the real daemon.

What is checked: every committed event is listed with the WAL's seq and the
branch it was appended on (turns, steps, rewinds, checkouts, interventions,
agent creation and configuration); rotation by size and the log's own
retention; the history of an abandoned branch outlives WAL GC; recovery
never reads the log; replay.walk / seek / compare, read-only; pagination;
bad params. Reads flush the log first, so nothing here waits for a timer.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import (
    create_builtin,
    error_of,
    head,
    kill_daemon,
    restart,
    send,
    wal_records,
)


def _events(d: Daemon, **params: Any) -> list[dict[str, Any]]:
    """Every listed event (all pages)."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = d.call("events.list", {**params, "limit": 1000, "cursor": cursor})
        out += page["events"]
        cursor = page["next_cursor"]
        if cursor is None:
            return out


def _scenario(d: Daemon) -> dict[str, int]:
    """Turns, a rewind, a fork switch back, an intervention, a config change."""
    create_builtin(d, "ada")
    first = send(d, "ada", "hello")["boundary_seq"]
    second = send(d, "ada", "second")["boundary_seq"]
    rewind = d.call("rewind", {"seq": first})
    third = send(d, "ada", "third")["boundary_seq"]
    checkout = d.call("checkout", {"seq": second})  # back to the abandoned branch
    d.call("agents.configure", {"agent": "ada", "options": {"delay": 0}})
    d.call("wal.append", {"agent": "ext", "kind": "agent.created"})
    d.call(
        "wal.append",
        {
            "agent": "ext",
            "kind": "intervention.asked",
            "data": {"intervention_id": "q1", "question": "go?"},
        },
    )
    d.call("interventions.answer", {"agent": "ext", "intervention_id": "q1", "answer": "yes"})
    return {
        "first": first,
        "second": second,
        "third": third,
        "rewind": rewind["reset_seq"],
        "checkout": checkout["reset_seq"],
        "head": head(d),
    }


def test_every_committed_event_is_listed_with_its_seq_and_branch(daemon: Daemon) -> None:
    s = _scenario(daemon)
    listed = _events(daemon)
    wal = wal_records(daemon)
    by_seq = {e["seq"]: e for e in listed if e["event"] is not None}
    assert sorted(by_seq) == [r["seq"] for r in wal] == list(range(1, s["head"] + 1))
    for rec in wal:
        e = by_seq[rec["seq"]]
        assert e["event"] == rec  # the WAL event exactly as committed
        assert e["agent"] == rec.get("agent")
    assert listed[0]["kind"] == "run.started" and listed[0]["index"] == 0
    assert [e["index"] for e in listed] == list(range(len(listed)))

    # Branches: root until the rewind, the rewind's branch for the third turn,
    # and the checkout's branch after the fork switch.
    for seq, e in by_seq.items():
        expected = 0 if seq < s["rewind"] else s["rewind"] if seq < s["checkout"] else s["checkout"]
        assert e["branch"] == expected, e

    rewind, checkout = by_seq[s["rewind"]], by_seq[s["checkout"]]
    assert rewind["kind"] == "rewind"
    assert rewind["reset"]["target"] == s["first"] and rewind["reset"]["mode"] == "undo"
    assert rewind["reset"]["supersedes"] == s["rewind"] - 1
    assert checkout["kind"] == "checkout"
    assert checkout["reset"]["target"] == s["second"]
    assert checkout["reset"]["mode"] == "fork_switch"
    assert checkout["reset"]["cancelled"] == []
    assert "fork switch" in checkout["summary"]

    kinds = {e["kind"] for e in listed}
    assert {
        "agent.created",
        "agent.configured",
        "message.received",
        "turn.started",
        "step.started",
        "step.committed",
        "turn.ended",
        "intervention.asked",
        "intervention.answered",
    } <= kinds
    step = next(e for e in listed if e["kind"] == "step.committed")
    assert "tokens" in step["summary"] and "messages" in step["summary"]  # memo summary

    # Filters.
    asked = daemon.call("events.list", {"kind": ["intervention.asked", "intervention.answered"]})
    assert [e["kind"] for e in asked["events"]] == ["intervention.asked", "intervention.answered"]
    assert all(e["agent"] == "ext" for e in _events(daemon, agent="ext"))
    on_branch = _events(daemon, branch=s["rewind"])
    assert [e["seq"] for e in on_branch] == list(range(s["rewind"], s["checkout"]))
    ranged = _events(daemon, from_seq=3, to_seq=5)
    assert [e["seq"] for e in ranged] == [3, 4, 5]

    # events.get by seq and by run + index agree with the listing.
    got = daemon.call("events.get", {"seq": s["checkout"]})
    assert got == checkout
    assert daemon.call("events.get", {"run": got["run"], "index": got["index"]}) == got


def test_pagination_and_bad_params(daemon: Daemon) -> None:
    create_builtin(daemon, "ada")
    send(daemon, "ada", "one")
    everything = daemon.call("events.list", {"limit": 1000})["events"]
    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = daemon.call("events.list", {"limit": 3, "cursor": cursor})
        assert len(page["events"]) <= 3
        pages += page["events"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == everything and len(everything) > 6
    run = everything[0]["run"]
    assert (
        daemon.call("events.list", {"run": run, "limit": 2, "cursor": f"{run}:4"})["events"][0][
            "index"
        ]
        == 4
    )

    bad: list[tuple[str, dict[str, Any]]] = [
        ("events.list", {"cursor": "nonsense"}),
        ("events.list", {"limit": 0}),
        ("events.list", {"from_seq": -1}),
        ("events.list", {"bogus": 1}),
        ("events.get", {}),
        ("events.get", {"seq": 1, "run": run, "index": 0}),
        ("events.get", {"index": 3}),
        ("replay.seek", {}),
        ("replay.walk", {"limit": 0}),
        ("replay.compare", {"a": {"seq": 1}}),
        ("replay.compare", {"a": {"seq": 1, "branch": 0}, "b": {"seq": 2}}),
        ("replay.compare", {"a": {}, "b": {"seq": 2}}),
    ]
    for method, params in bad:
        assert error_of(daemon, method, params)["code"] == -32602, (method, params)
    assert error_of(daemon, "events.list", {"run": "run-nope"})["code"] == -32016
    assert error_of(daemon, "replay.walk", {"run": "run-nope"})["code"] == -32016
    missing = error_of(daemon, "events.get", {"run": run, "index": 10_000})
    assert missing["code"] == -32017 and missing["data"]["error"] == "event_not_found"
    assert error_of(daemon, "events.get", {"seq": 10_000})["code"] == -32002
    assert error_of(daemon, "replay.seek", {"seq": 1, "agent": "nobody"})["code"] == -32006


def test_replay_walk_seek_compare_across_a_rewind_are_read_only(daemon: Daemon) -> None:
    create_builtin(daemon, "ada")
    first = send(daemon, "ada", "hello")["boundary_seq"]
    send(daemon, "ada", "second")
    old_tip = head(daemon)
    reset = daemon.call("rewind", {"seq": first})["reset_seq"]
    send(daemon, "ada", "third")
    tip = head(daemon)
    branches = daemon.call("branches.list")
    wal_before = wal_records(daemon)

    # seek rebuilds, from the audit log alone, exactly what the WAL says (every seq).
    for seq in range(0, tip + 1):
        seek = daemon.call("replay.seek", {"seq": seq})
        assert seek["complete"] and seek["seq"] == seq
        assert seek["agents"] == daemon.call("state.get", {"seq": seq})["agents"], seq
    at = daemon.call("events.get", {"seq": reset})
    by_index = daemon.call("replay.seek", {"run": at["run"], "index": at["index"], "agent": "ada"})
    assert by_index["agents"] == daemon.call("state.get", {"seq": first, "agent": "ada"})["agents"]

    # walk: every event once, in order, each agent event with what it changed.
    steps: list[dict[str, Any]] = []
    index = 0
    while True:
        page = daemon.call("replay.walk", {"index": index, "limit": 7})
        steps += page["steps"]
        if page["next_index"] is None:
            break
        index = page["next_index"]
    assert [s["event"]["seq"] for s in steps[1:]] == list(range(1, tip + 1))
    message = next(s for s in steps if s["event"]["kind"] == "message.received")
    assert any(c["path"] == "/inbox/0" and c["op"] == "add" for c in message["changes"]["ada"])
    undo = next(s for s in steps if s["event"]["seq"] == reset)
    assert undo["event"]["kind"] == "rewind"
    # The rewind dropped the second turn: its history entries are removed.
    assert any(
        c["op"] == "remove" and c["path"].startswith("/history/") for c in undo["changes"]["ada"]
    )
    only_ada = daemon.call("replay.walk", {"agent": "ada", "limit": 500})["steps"]
    assert {s["event"]["agent"] for s in only_ada} == {"ada"}

    # compare: the old tip and the new one share everything up to the rewind target.
    cmp = daemon.call("replay.compare", {"a": {"seq": old_tip}, "b": {"seq": tip}})
    assert cmp["diverged"] and cmp["fork_seq"] == first
    assert cmp["first_divergence"] == first  # seqs 1..first are the common steps 0..first-1
    diverging = cmp["steps"][0]
    assert diverging["step"] == first and diverging["op"] == "changed"
    assert diverging["a"]["seq"] == first + 1 and diverging["b"]["seq"] == reset + 1
    assert {"path": "/text", "a": "second", "b": "third"} in diverging["fields"]
    assert cmp["state"]["ada"]  # the end states differ (history)
    branch = daemon.call("replay.compare", {"a": {"branch": 0}, "b": {"branch": reset}})
    assert branch["fork_seq"] == first and branch["first_divergence"] == first
    run = steps[0]["event"]["run"]
    same = daemon.call("replay.compare", {"a": {"run": run}, "b": {"run": run}})
    assert not same["diverged"] and same["steps"] == [] and same["same"] == same["steps_total"]

    # Nothing moved: same tip, same branches, not one record appended.
    assert head(daemon) == tip
    assert daemon.call("branches.list") == branches
    assert wal_records(daemon) == wal_before


AUDIT_SMALL = """
[audit]
file_bytes = 4096
max_total_bytes = 10000
"""


def test_rotation_by_size_and_audit_retention(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=AUDIT_SMALL)
    try:
        create_builtin(d, "ada")
        for k in range(20):  # random text: the files are compressed, and must still fill up
            send(d, "ada", f"message {k} " + os.urandom(300).hex())
        runs = d.call("events.runs")["runs"]
        listed = _events(d)
    finally:
        d.stop()
    files = sorted((d.state_dir / "events").iterdir())
    names = [f.name for f in files]
    run = runs[0]["run"]
    assert len(runs) == 1 and runs[0]["files"] == len(files) >= 4
    assert all(n.startswith(run) for n in names)
    assert any(n == f"{run}.{k}.jsonl.gz" for n in names for k in range(2, 20))
    sizes = [f.stat().st_size for f in files]
    assert max(sizes) <= 4096
    # Retention ran at each rotation: at most one file beyond the limit.
    assert sum(sizes) <= 10000 + 4096
    # The oldest files went first: the listing starts past index 0, contiguous.
    assert runs[0]["first_index"] > 0
    assert listed[0]["index"] == runs[0]["first_index"]
    assert [e["index"] for e in listed] == list(range(listed[0]["index"], listed[-1]["index"] + 1))
    for f in files:  # whole gzip members of whole JSON lines in every file
        for line in gzip.decompress(f.read_bytes()).splitlines():
            json.loads(line)


def test_runs_and_file_limit_across_restarts(short_tmp: Path) -> None:
    config = "[audit]\nmax_files = 2\n"
    d = start_daemon(short_tmp, config=config)
    create_builtin(d, "ada")
    first_run = d.call("events.runs")["current"]
    kill_daemon(d)  # a crash: the run never writes run.stopped
    d = restart(d, short_tmp)
    second_run = d.call("events.runs")["current"]
    d.stop()
    d = restart(d, short_tmp)
    try:
        runs = d.call("events.runs")["runs"]
    finally:
        d.stop()
    assert first_run < second_run < runs[-1]["run"]  # sortable ids
    # max_files = 2: the oldest run's file went when the third run started.
    assert [r["run"] for r in runs] == [second_run, runs[-1]["run"]]
    assert runs[0]["stopped"] and runs[-1]["current"]


RETENTION = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 0
snapshot_ratio = 0.05

[retention]
snapshot_keep = 0
gc_interval_s = 0
"""


def test_abandoned_branch_history_is_listed_after_wal_gc(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=RETENTION)
    try:
        create_builtin(d, "ada")
        first = send(d, "ada", "kept")["boundary_seq"]
        send(d, "ada", "to be abandoned")
        abandoned_tip = head(d)
        reset = d.call("rewind", {"seq": first})["reset_seq"]
        for k in range(12):
            send(d, "ada", f"after the rewind {k}")
        d.call("retention.set", {"snapshot_keep": 0, "wal_keep_records": 0})
        gc = d.call("retention.gc")
        floor = d.call("retention.get")["floor"]
        assert gc["segments_dropped"] > 0 and floor > reset, (gc, floor)
        # The WAL no longer has the abandoned branch ...
        assert error_of(d, "state.get", {"seq": abandoned_tip})["code"] == -32003
        assert min(r["seq"] for r in wal_records(d)) > abandoned_tip
        # ... the audit log still lists it, and replays it.
        abandoned = [e for e in _events(d, branch=0) if e["seq"] > first]
        assert [e["seq"] for e in abandoned] == list(range(first + 1, abandoned_tip + 1))
        assert any(e["kind"] == "turn.ended" for e in abandoned)
        seek = d.call("replay.seek", {"seq": abandoned_tip, "agent": "ada"})
        assert seek["complete"] and seek["branch"] == 0
        assert seek["agents"]["ada"]["history"][-1]["content"].find("to be abandoned") >= 0
        cmp = d.call("replay.compare", {"a": {"seq": abandoned_tip}, "b": {"seq": head(d)}})
        assert cmp["fork_seq"] == first and cmp["diverged"]
    finally:
        d.stop()


def test_recovery_never_reads_the_audit_log(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    create_builtin(d, "ada")
    first = send(d, "ada", "hello")["boundary_seq"]
    send(d, "ada", "again")
    d.call("rewind", {"seq": first})
    before = (d.call("state.get"), d.call("branches.list"), head(d))
    d.stop()
    events = d.state_dir / "events"
    assert any(events.iterdir())
    shutil.rmtree(events)
    d = restart(d, short_tmp)
    try:
        assert (d.call("state.get"), d.call("branches.list"), head(d)) == before
        # A fresh run starts; the history before it is simply not in the audit log.
        runs = d.call("events.runs")["runs"]
        assert len(runs) == 1 and runs[0]["current"] and runs[0]["events"] == 1
        seek = d.call("replay.seek", {"seq": first})
        assert not seek["complete"] and seek["missing"] == [[1, first]]
    finally:
        d.stop()


def _reynctl(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REYN_SOCKET", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "reynctl", "--socket", str(sock), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=60,
        check=False,
    )


def test_reynctl_events_and_replay(daemon: Daemon) -> None:
    create_builtin(daemon, "ada")
    first = send(daemon, "ada", "hello")["boundary_seq"]
    send(daemon, "ada", "second")
    old_tip = head(daemon)
    daemon.call("rewind", {"seq": first})
    sock = daemon.socket

    out = _reynctl(sock, "events", "--kind", "rewind")
    assert out.returncode == 0, out.stderr
    assert "rewind to" in out.stdout and "RUN:INDEX" in out.stdout
    page = _reynctl(sock, "events", "--limit", "2")
    assert page.returncode == 0 and "events --limit 2 --cursor run-" in page.stderr
    runs = _reynctl(sock, "--json", "events", "runs")
    run = json.loads(runs.stdout)["current"]
    assert "current" in _reynctl(sock, "events", "runs").stdout
    shown = _reynctl(sock, "events", "show", str(first))
    assert shown.returncode == 0 and "turn.ended" in shown.stdout
    assert json.loads(_reynctl(sock, "events", "show", f"{run}:0", "--json").stdout)["index"] == 0

    walk = _reynctl(sock, "replay", "walk", "--limit", "5")
    assert walk.returncode == 0 and "agent.created" in walk.stdout and "--index 5" in walk.stderr
    seek = _reynctl(sock, "replay", "seek", str(old_tip), "--json")
    assert json.loads(seek.stdout)["agents"] == daemon.call("state.get", {"seq": old_tip})["agents"]
    assert "replayed as of seq" in _reynctl(sock, "replay", "seek", str(old_tip)).stdout
    cmp = _reynctl(sock, "replay", "compare", str(old_tip), str(first))
    assert cmp.returncode == 0 and f"diverge at step {first}" in cmp.stdout, cmp.stdout

    assert _reynctl(sock, "events", "--run", "run-nope").returncode == 1
    assert _reynctl(sock, "replay", "seek", "not-a-point").returncode == 2
    assert _reynctl(sock.with_name("absent.sock"), "events").returncode == 3

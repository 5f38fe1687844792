"""The command executor's processes across daemon stops (real daemon, tests/harness.py).

- SIGKILL of the daemon orphans the executor's process group: the next start
  kills the whole group before READY=1, so a retry never runs beside it.
- A clean stop (SIGTERM) cancels the step in flight itself: the next start
  re-runs it without an operator. A crash (SIGKILL) leaves it ambiguous, also
  when the crash hits that re-run.

The program below sleeps on its first runs (a leader and a child in its
process group, both pids published to files the test waits for) and answers
on a later one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Daemon, daemon_command, start_daemon
from tests.runtime_helpers import (
    agent,
    kill_daemon,
    read_pid,
    records,
    restart,
    wait_open_step,
    wait_turn_end,
    wait_until,
)

FAMILY = """
import json, os, subprocess, sys, time
out = os.environ["PROG_DIR"]
json.load(sys.stdin)
run = len([f for f in os.listdir(out) if f.startswith("leader-")])

def publish(name, pid):
    path = os.path.join(out, name)
    with open(path + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(path + ".tmp", path)

if run < int(os.environ["SLEEPY_RUNS"]):
    child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(600)"])
    publish(f"child-{run}", child.pid)
    publish(f"leader-{run}", os.getpid())
    time.sleep(600)
print(json.dumps({"done": True, "reply": f"run {run}"}))
"""


def dead(pid: int) -> bool:
    """Exited: no such process, or a zombie (an orphan's new parent may be slow to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


@pytest.fixture
def family(short_tmp: Path) -> Iterator[Path]:
    """The program's output directory; any process it published is killed at teardown."""
    out = short_tmp / "family"
    out.mkdir()
    yield out
    for path in out.iterdir():
        if path.name.startswith(("leader-", "child-")) and not path.name.endswith(".tmp"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(path.read_text()), signal.SIGKILL)


def create_family(d: Daemon, family: Path, sleepy_runs: int) -> None:
    program = family.parent / "family.py"
    program.write_text(FAMILY)
    options = {
        "argv": [sys.executable, "-S", str(program)],
        "env": {"PROG_DIR": str(family), "SLEEPY_RUNS": str(sleepy_runs)},
        "timeout": 60,
    }
    d.call("agents.create", {"name": "f", "executor": "command", "options": options})


def start_run(d: Daemon, family: Path, run: int) -> tuple[int, int]:
    """Until run `run` of the program sleeps with its child; returns (leader, child)."""
    leader = read_pid(family / f"leader-{run}")
    child = read_pid(family / f"child-{run}")
    wait_open_step(d, "f", 0)
    assert not dead(leader) and not dead(child)
    return leader, child


def ambiguous(d: Daemon) -> list[dict[str, Any]]:
    return list(wait_until(lambda: d.call("daemon.status")["ambiguous"], "an ambiguous step"))


def procs_dir(d: Daemon) -> Path:
    return d.state_dir / "state" / "procs"


def test_sigkill_orphans_are_killed_at_the_next_start(short_tmp: Path, family: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        create_family(d, family, sleepy_runs=1)
        turn = d.call("agents.send", {"agent": "f", "text": "go"})["turn_id"]
        leader, child = start_run(d, family, 0)
        (record,) = procs_dir(d).iterdir()
        assert record.stat().st_mode & 0o777 == 0o600
        assert procs_dir(d).stat().st_mode & 0o777 == 0o700
    finally:
        kill_daemon(d)
    # The daemon is gone and its executor's group lives on (the orphan).
    assert not dead(leader) and not dead(child)

    d2 = restart(d, short_tmp)  # returns once READY=1 arrived
    try:
        assert dead(leader) and dead(child)
        assert list(procs_dir(d2).iterdir()) == []
        # A crash: the step stays ambiguous, nothing re-ran it.
        (step,) = ambiguous(d2)
        assert (step["turn_id"], step["step"]) == (turn, 0)
        assert not (family / "leader-1").exists()
    finally:
        d2.stop()

    # A clean restart does not settle a step that a crash left ambiguous.
    d3 = restart(d, short_tmp)
    try:
        (again,) = ambiguous(d3)
        assert again == step
        assert agent(d3, "f")["executor_calls"] == 0
        d3.call("agents.resolve", {"agent": "f", "action": "retry"})
        ended = wait_turn_end(d3, turn, after=step["started_seq"])
        assert (ended["outcome"], ended["reply"]) == ("completed", "run 1")
    finally:
        d3.stop()


def test_clean_stop_mid_step_resumes_without_an_operator(short_tmp: Path, family: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        create_family(d, family, sleepy_runs=1)
        turn = d.call("agents.send", {"agent": "f", "text": "go"})["turn_id"]
        leader, child = start_run(d, family, 0)
    finally:
        d.stop()  # SIGTERM, exit 0 asserted
    assert dead(leader) and dead(child)  # the daemon cancelled the step: group killed
    assert list(procs_dir(d).iterdir()) == []  # ... and reaped: its record removed
    (started,) = records(d, kind="step.started", turn_id=turn)
    stop = json.loads((d.state_dir / "state" / "clean-stop").read_bytes())["rec"]
    assert stop["head"] == started["seq"]
    assert stop["steps"] == [
        {"agent": "f", "turn_id": turn, "step": 0, "started_seq": started["seq"]}
    ]

    d2 = restart(d, short_tmp)
    try:

        def ended() -> dict[str, Any] | None:
            assert d2.call("daemon.status")["ambiguous"] == []
            found = records(d2, after=started["seq"], kind="turn.ended", turn_id=turn)
            return found[0] if found else None

        end = wait_until(ended, "the re-run turn's end")
        assert (end.get("outcome", "completed"), end["reply"]) == ("completed", "run 1")
        assert agent(d2, "f")["executor_calls"] == 1
        # The re-run reused the open step's start: no second step.started.
        assert records(d2, kind="step.started", turn_id=turn) == [started]
        assert not (d2.state_dir / "state" / "clean-stop").exists()
    finally:
        d2.stop()


def test_crash_during_the_rerun_leaves_the_step_ambiguous(short_tmp: Path, family: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        create_family(d, family, sleepy_runs=2)
        turn = d.call("agents.send", {"agent": "f", "text": "go"})["turn_id"]
        start_run(d, family, 0)
    finally:
        d.stop()
    d2 = restart(d, short_tmp)
    try:
        leader, child = start_run(d2, family, 1)  # the re-run, by itself
        assert not (d2.state_dir / "state" / "clean-stop").exists()  # consumed before it
    finally:
        kill_daemon(d2)
    d3 = restart(d, short_tmp)
    try:
        assert dead(leader) and dead(child)
        (step,) = ambiguous(d3)
        assert (step["turn_id"], step["step"]) == (turn, 0)
        assert not (family / "leader-2").exists()
    finally:
        d3.stop()


# -- the process records, without a daemon ------------------------------------------------------


@pytest.fixture
def group(short_tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process group of our own: a leader (the test's child) with a child of its own."""
    ready = short_tmp / "ready"
    source = (
        "import os, subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(ready) + '.tmp'!r}, 'w').write(str(c.pid))\n"
        f"os.rename({str(ready) + '.tmp'!r}, {str(ready)!r})\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "REYND_PROC_TOKEN": "t0ken"}
    proc = subprocess.Popen([sys.executable, "-S", "-c", source], start_new_session=True, env=env)
    try:
        read_pid(ready)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_record_whose_start_time_differs_is_not_killed(
    short_tmp: Path, group: subprocess.Popen[bytes]
) -> None:
    import msgspec

    from reynd.runtime import procs

    child = int((short_tmp / "ready").read_text())
    table = procs.ProcessGroups(short_tmp / "procs")
    path = table.add(group.pid, "t0ken")
    assert path is not None
    record = procs.load(path)
    assert record is not None and record.pid == group.pid
    # The pid now names another process (started at another time): leave it alone.
    path.write_bytes(procs.encode(msgspec.structs.replace(record, start=record.start - 1)))
    assert table.reap_orphans() == []
    assert group.poll() is None and not dead(child)
    assert list((short_tmp / "procs").iterdir()) == []  # the record is consumed all the same
    # With its true start time, the whole group goes.
    path.write_bytes(procs.encode(record))
    assert table.reap_orphans() == sorted([group.pid, child])
    assert group.wait(10) == -signal.SIGKILL and dead(child)


def test_members_of_a_dead_leader_are_killed_only_with_their_token(
    short_tmp: Path, group: subprocess.Popen[bytes]
) -> None:
    import msgspec

    from reynd.runtime import procs

    child = int((short_tmp / "ready").read_text())
    table = procs.ProcessGroups(short_tmp / "procs")
    path = table.add(group.pid, "another")
    assert path is not None
    record = procs.load(path)
    assert record is not None
    group.kill()  # the leader dies and is reaped; its child lives on in its group
    group.wait()
    assert table.reap_orphans() == []  # not carrying the record's token: not ours to kill
    assert not dead(child)
    path.write_bytes(procs.encode(msgspec.structs.replace(record, token="t0ken")))
    assert table.reap_orphans() == [child]
    assert dead(child)


def test_victims_pure() -> None:
    from reynd.runtime.procs import GroupRecord, ProcStat, victims

    rec = GroupRecord(pid=100, start=5000, boot_id="b1", token="t")

    def p(pid: int, pgid: int, sid: int, start: int, state: str = "S") -> ProcStat:
        return ProcStat(pid=pid, state=state, pgid=pgid, sid=sid, start=start)

    others = [p(1, 1, 1, 1), p(7, 7, 7, 4000), p(300, 300, 300, 9000)]
    members = [p(101, 100, 100, 5001), p(102, 102, 100, 5002), p(103, 103, 100, 5003, "Z")]
    alive = {x.pid: x for x in [*others, p(100, 100, 100, 5000), *members]}
    # Leader alive with its start time: its group and session, not zombies, not others.
    assert victims(rec, alive, "b1") == ([100, 101, 102], False)
    # Another boot: nothing of ours can be alive.
    assert victims(rec, alive, "b2") == ([], False)
    # The pid was reused (another start time): nothing, however its group looks.
    reused = {**alive, 100: p(100, 100, 100, 7000)}
    assert victims(rec, reused, "b1") == ([], False)
    # Leader gone: the members that started after it, each to be checked for the token.
    gone = {k: v for k, v in alive.items() if k != 100}
    assert victims(rec, gone, "b1") == ([101, 102], True)
    early = {**gone, 104: p(104, 100, 100, 4999)}
    assert victims(rec, early, "b1") == ([101, 102], True)
    # A zombie leader with the recorded start time still pins the pid: members are ours.
    zombie = {**gone, 100: p(100, 100, 100, 5000, "Z")}
    assert victims(rec, zombie, "b1") == ([101, 102], False)


def test_parse_stat_with_a_hostile_command_name() -> None:
    from reynd.runtime.procs import ProcStat, parse_stat

    fields = ["S", "1", "4242", "4240", *["0"] * 15, "777", "0"]
    text = b"4243 (a) b (c)) " + " ".join(fields).encode() + b"\n"
    assert parse_stat(text) == ProcStat(pid=4243, state="S", pgid=4242, sid=4240, start=777)
    assert parse_stat(b"garbage") is None
    assert parse_stat(b"12 (x) S 1\n") is None


def test_clean_stop_is_honoured_only_on_an_exact_match() -> None:
    from reynd.protocol.state import AgentState, Chain, RuntimeState
    from reynd.runtime.clean_stop import CleanStop, CutStep, honoured

    chain = Chain(turn_id="t3", message_id="m", started_seq=3, open_step=1, open_step_seq=9)
    agent_state = AgentState(
        name="a", session="s", executor="command", options={}, created_seq=1, applied_seq=9
    )
    agent_state.pending_chains = [chain]
    state = RuntimeState(seq=9, agents={"a": agent_state})
    cut = CutStep(agent="a", turn_id="t3", step=1, started_seq=9)
    assert honoured(CleanStop(head=9, steps=[cut]), 9, state) == frozenset([cut])
    assert honoured(CleanStop(head=9, steps=[cut]), 10, state) == frozenset()  # head moved
    for other in (
        CutStep(agent="a", turn_id="t3", step=1, started_seq=8),
        CutStep(agent="a", turn_id="t3", step=2, started_seq=9),
        CutStep(agent="a", turn_id="t4", step=1, started_seq=9),
        CutStep(agent="b", turn_id="t3", step=1, started_seq=9),
    ):
        assert honoured(CleanStop(head=9, steps=[other, cut]), 9, state) == frozenset([cut])


def test_a_damaged_or_newer_clean_stop_file_is_ignored_and_removed(short_tmp: Path) -> None:
    import msgspec

    from reynd.protocol.state import RuntimeState
    from reynd.runtime import clean_stop
    from reynd.storage.framing import encode_frame

    path = short_tmp / clean_stop.NAME
    newer = encode_frame(msgspec.json.encode({"version": 2, "head": 0, "steps": []}))
    for data in (b"", b"{not a frame", newer[:-5], newer):
        path.write_bytes(data)
        assert clean_stop.take(short_tmp, 0, RuntimeState()) == frozenset()
        assert not path.exists()
    assert clean_stop.take(short_tmp, 0, RuntimeState()) == frozenset()  # no file: nothing


NOBODY = 65534


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root (a process the daemon's uid may not signal) and setpriv",
)
def test_a_member_the_daemon_may_not_kill_is_logged_and_start_up_goes_on(
    short_tmp: Path,
) -> None:
    """A recorded group holds a process of another user (a setuid program, say): no restart loop.

    The daemon runs as nobody; the group's leader is root's, its child nobody's.
    The child is killed, the leader logged and left alive with its record kept
    (the next start tries again), and the daemon serves.
    """
    from reynd.runtime import procs

    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    ready = short_tmp / "child"
    source = (
        "import os, subprocess, sys, time\n"
        f"c = subprocess.Popen({[*as_nobody, 'sleep', '600']!r})\n"
        f"open({str(ready) + '.tmp'!r}, 'w').write(str(c.pid))\n"
        f"os.rename({str(ready) + '.tmp'!r}, {str(ready)!r})\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, procs.TOKEN_ENV: "t0ken"}
    leader = subprocess.Popen([sys.executable, "-S", "-c", source], start_new_session=True, env=env)
    daemon: Daemon | None = None
    try:
        child = read_pid(ready)
        state_dir = short_tmp / "state"
        table = procs.ProcessGroups(state_dir / "state" / "procs")
        record = table.add(leader.pid, "t0ken")
        assert record is not None
        run = short_tmp / "run"
        run.mkdir(mode=0o700)
        for path in [state_dir, *state_dir.rglob("*"), run]:
            os.chown(path, NOBODY, NOBODY)
        short_tmp.chmod(0o755)
        daemon = start_daemon(
            short_tmp,
            command=[*as_nobody, *daemon_command(state_dir, run / "reynd.sock")],
            wait_ready=False,  # the notify socket is root's: the log says when it is ready
            stderr_marker='"event":"ready"',
        )
        log = daemon.stderr()
        assert '"event":"ready"' in log, log
        (refused,) = [
            json.loads(line) for line in log.splitlines() if "procs.orphan_not_killed" in line
        ]
        assert (refused["pid"], refused["group"]) == (leader.pid, leader.pid)
        assert refused["record"] == str(record)
        wait_until(lambda: dead(child), "the child, nobody's, killed")
        assert leader.poll() is None
        assert list(table.directory.iterdir()) == [record]  # kept: the group lives on
    finally:
        try:
            if daemon is not None:
                daemon.stop()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()
    # Once the group is gone, the record goes at the next start.
    assert table.reap_orphans() == []
    assert list(table.directory.iterdir()) == []

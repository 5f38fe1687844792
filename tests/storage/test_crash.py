"""Process crashes: a real worker process is SIGKILLed, then the parent reopens its Store.

Two ways to die: at a named crash point (REYN_CRASH_AT: the worker kills
itself at that exact line), or by the parent's SIGKILL after it has read the
k-th acknowledged line (the worker is then somewhere in its next append).
Synchronisation is on the worker's stdout lines only, never on sleeps.

A process kill keeps the page cache, so these prove process-crash safety (no
acknowledged append lost, no abandoned future resurrected), not power loss.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from helpers import LogModel, opts, read_all, same_event, scripted_op, snap_dir, summarize, to_event

from reynd.protocol import events as ev
from reynd.storage.crashpoints import CRASH_ENV
from reynd.storage.store import Store

WORKER = Path(__file__).with_name("crash_worker.py")
DEADLINE = 60  # seconds: a hung worker fails the test instead of hanging the suite


@dataclass
class Run:
    """What a worker acknowledged before it died, and how it died."""

    lines: list[str] = field(default_factory=list)
    returncode: int | None = None

    @property
    def acks(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for k, a, b in (ln.split() for ln in self.lines) if k == "ack"]

    def model(self) -> LogModel:
        """The model of everything acknowledged, in order."""
        m = LogModel()
        for line in self.lines:
            kind, *rest = line.split()
            if kind == "ack":
                assert m.add(scripted_op(int(rest[1]))) == int(rest[0])
            elif kind == "reset":
                assert m.add_reset(int(rest[1])) == int(rest[0])
        return m


def _spawn(root: Path, script: list[list[object]], crash_at: str | None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop(CRASH_ENV, None)
    if crash_at:
        env[CRASH_ENV] = crash_at
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(root), json.dumps(script)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        cwd=WORKER.parent,
    )


def run_worker(root: Path, script: list[list[object]], crash_at: str | None = None) -> Run:
    """Run to the end (or to its crash point); collect every acknowledged line."""
    proc = _spawn(root, script, crash_at)
    out, _ = proc.communicate(timeout=DEADLINE)
    return Run(out.splitlines(), proc.returncode)


def kill_after(root: Path, script: list[list[object]], acks: int) -> Run:
    """SIGKILL the worker right after reading its `acks`-th acknowledged line."""
    proc = _spawn(root, script, None)
    assert proc.stdout is not None
    run = Run()
    seen = 0
    while seen < acks:
        line = proc.stdout.readline()
        assert line, f"worker ended early: {run.lines[-3:]}"
        run.lines.append(line.strip())
        seen += line.startswith("ack ")
    proc.send_signal(signal.SIGKILL)
    # Lines already in the pipe (or in our read buffer) were acknowledged too;
    # read through the same buffered file object up to EOF, which the kill causes.
    run.lines.extend(proc.stdout.read().splitlines())
    run.returncode = proc.wait(timeout=DEADLINE)
    return run


def _killed(run: Run) -> None:
    assert run.returncode == -signal.SIGKILL, (run.returncode, run.lines[-3:])
    assert "done" not in run.lines


# -- (a) crash mid-rewind: the reset record is durable, reconstruction never ran ---------------


def _check_reset_recovery(root: Path, model: LogModel) -> None:
    with Store.open(root, opts()) as store:
        head = model.head
        assert store.head == head
        last = read_all(store)[-1]
        assert isinstance(last, ev.Rewind)
        assert (last.seq, last.target_n) == (head, model.parent(head))
        # The as-of-N state, and no record of the abandoned future in it.
        assert summarize(store.state) == model.state(model.parent(head))
        assert summarize(store.state) == model.tip_state()
        active = model.active_set()
        for s in range(head + 1):
            assert store.lineage.is_active(s) == (s in active), s
            assert store.lineage.branch_of(s) == model.branch_of(s), s
        # Continuing after recovery extends the recovered branch.
        op = ("msg", "a", "after", "after") if "a" in model.tip_state() else ("create", "a")
        (e,) = store.append([to_event(op)])
        model.add(op)
        assert e.seq == head + 1
        assert summarize(store.state) == model.tip_state()
    with Store.open(root, opts()) as store:
        assert summarize(store.state) == model.tip_state()


def test_crash_after_reset_record_is_durable_first_rewind(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    run = run_worker(root, [["append", 10], ["rewind", 5]], crash_at="reset.durable")
    _killed(run)
    assert len(run.acks) == 10
    model = run.model()
    model.add_reset(5)  # durable, never acknowledged: recovery must honour it
    _check_reset_recovery(root, model)
    with Store.open(root, opts()) as store:
        assert [s for s in range(1, 13) if not store.lineage.is_active(s)] == [6, 7, 8, 9, 10]
        assert [m.message_id for m in store.state.agents["a"].inbox] == [
            "m1",
            "m2",
            "m3",
            "m4",
            "after",
        ]


@pytest.mark.parametrize(
    ("second", "target"),
    [
        pytest.param("checkout", 8, id="nested-checkout-fork-switch"),
        pytest.param("rewind", 13, id="nested-rewind-on-the-new-branch"),
        pytest.param("checkout", 3, id="nested-checkout-undo"),
        pytest.param("rewind", 0, id="nested-rewind-to-genesis"),
    ],
)
def test_crash_mid_nested_reset(tmp_path: Path, second: str, target: int) -> None:
    """docs/design.md's example, killed after the second reset record is durable."""
    root = tmp_path / "reyn"
    script: list[list[object]] = [["append", 10], ["rewind", 5], ["append", 4], [second, target]]
    run = run_worker(root, script, crash_at="reset.durable:2")
    _killed(run)
    assert run.lines[10] == "reset 11 5"
    model = run.model()
    assert model.head == 15
    model.add_reset(target)
    _check_reset_recovery(root, model)


def test_crash_mid_rewind_twice_in_a_row(tmp_path: Path) -> None:
    """Recovery itself is interrupted by nothing, but a second crashed rewind follows it."""
    root = tmp_path / "reyn"
    run = run_worker(root, [["append", 10], ["rewind", 5]], crash_at="reset.durable")
    _killed(run)
    model = run.model()
    model.add_reset(5)
    # The second worker starts on the recovered log: its stream index continues at head.
    run2 = run_worker(root, [["rewind", 3]], crash_at="reset.durable")
    _killed(run2)
    model.add_reset(3)
    _check_reset_recovery(root, model)


# -- (b) crash while writing a snapshot -----------------------------------------------------


@pytest.mark.parametrize("point", ["snapshot.mid_write", "snapshot.before_rename"])
@pytest.mark.parametrize("earlier_snapshot", [False, True])
def test_crash_during_snapshot_write(tmp_path: Path, point: str, earlier_snapshot: bool) -> None:
    root = tmp_path / "reyn"
    script: list[list[object]] = [["append", 12], ["rewind", 4], ["append", 6]]
    if earlier_snapshot:
        script = [["append", 8], ["snapshot"], *script]
    run = run_worker(root, [*script, ["snapshot"]], crash_at=f"{point}:{1 + earlier_snapshot}")
    _killed(run)
    model = run.model()
    assert snap_dir(root).exists()
    leftovers = [p.name for p in snap_dir(root).iterdir() if p.name.startswith(".tmp-")]
    assert leftovers  # the interrupted write left its tmp file behind
    with Store.open(root, opts()) as store:
        assert not [p for p in snap_dir(root).iterdir() if p.name.startswith(".tmp-")]
        assert store.snapshots.seqs == ([8] if earlier_snapshot else [])
        assert not list(snap_dir(root).glob("*.damaged"))
        assert store.head == model.head
        assert summarize(store.state) == model.tip_state()
        for s in range(model.head + 1):
            assert summarize(store.state_as_of(s)) == model.state(s), s
        # The next snapshot at the same seq publishes cleanly.
        assert store.snapshot_now() == model.head
    with Store.open(root, opts()) as store:
        assert store.plan(model.head).snapshot == model.head
        assert summarize(store.state) == model.tip_state()


# -- (c) crash during appends: nothing acknowledged is lost -----------------------------------


def _check_appends(root: Path, run: Run, *, may_have_extra: int) -> None:
    """Every acknowledged append is there, identical; beyond them only the stream's next ones."""
    acks = run.acks
    assert [seq for seq, _ in acks] == list(range(1, len(acks) + 1))
    with Store.open(root, opts()) as store:
        records = read_all(store)
        assert [e.seq for e in records] == list(range(1, store.head + 1))
        assert len(acks) <= store.head <= len(acks) + may_have_extra
        for e in records:
            want = msgspec.structs.replace(to_event(scripted_op(e.seq - 1)), seq=e.seq)
            assert same_event(e, want), e
        model = LogModel()
        for i in range(store.head):
            model.add(scripted_op(i))
        assert summarize(store.state) == model.tip_state()
        (e,) = store.append([to_event(("msg", "a", "next", "next"))])
        assert e.seq == store.head == len(records) + 1


@pytest.mark.parametrize("acks", [1, 2, 9, 40, 150])
@pytest.mark.parametrize("batch", [1, 7])
def test_kill_at_an_arbitrary_moment_of_appending(tmp_path: Path, acks: int, batch: int) -> None:
    root = tmp_path / "reyn"
    run = kill_after(root, [["forever", batch]], acks)
    _killed(run)
    assert len(run.acks) >= acks
    # The worker may have written (not yet acknowledged) at most one more batch.
    _check_appends(root, run, may_have_extra=batch)


@pytest.mark.parametrize("nth", [1, 2, 30, 70])
def test_crash_after_write_before_sync(tmp_path: Path, nth: int) -> None:
    """Killed with the batch written but not synced (the page cache keeps it)."""
    root = tmp_path / "reyn"
    run = run_worker(root, [["forever", 3]], crash_at=f"wal.after_write:{nth}")
    _killed(run)
    assert len(run.acks) == 3 * (nth - 1)
    _check_appends(root, run, may_have_extra=3)


def test_crash_after_sync_before_acknowledgement(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    run = run_worker(root, [["forever", 2]], crash_at="wal.after_sync:5")
    _killed(run)
    assert len(run.acks) == 8
    with Store.open(root, opts()) as store:
        assert store.head == 10  # durable, merely never acknowledged
    _check_appends(root, run, may_have_extra=2)


def test_clean_run_reports_done(tmp_path: Path) -> None:
    """The worker itself: a run without a crash point finishes and closes cleanly."""
    root = tmp_path / "reyn"
    run = run_worker(root, [["append", 3], ["batch", 4], ["rewind", 2], ["snapshot"]])
    assert run.returncode == 0
    assert run.lines[-1] == "done"
    assert run.lines[-3:] == ["reset 8 2", "snap 8", "done"]
    with Store.open(root, opts()) as store:
        assert summarize(store.state) == run.model().tip_state()

"""Power loss and I/O errors under the real Store, through a simulated disk (simdisk.py).

A SIGKILL keeps the page cache (test_crash.py); a power cut does not. Here the
storage core runs for real on a live directory while `SimDisk`, installed
under `reynd.storage.fsops`, records what a disk would have made durable. At
a chosen step the power goes out; `SimDisk.image` produces a state a real
disk could then hold (unsynced writes: none / a prefix / a torn last one /
zero-filled or stale blocks; unsynced directory entries: a prefix of them),
which is written out as a fresh directory and opened with `Store.open`, for
real, without the simulator.

What must hold (docs/durability.md rules 1-5, 7, 8):

- reopen succeeds: whatever a power cut can leave is a torn tail that is cut,
  never a CorruptionError;
- every acknowledged append (the call returned) is there, byte for byte;
- nothing else appears except a prefix of the records of the one call the
  power cut interrupted, in order; seqs are contiguous;
- the tip state, the lineage (active flags, branches) and as-of states equal
  a replay of that surviving log in an independent model (helpers.LogModel);
- every snapshot file that exists under its final name is intact.

The simulator itself is checked on every example: applying every pending
operation must reproduce the live tree byte for byte, so no write escaped it.
"""

from __future__ import annotations

import copy
import errno
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from helpers import AGENTS, CLOCK, LogModel, Op, opts, read_all, summarize, to_event
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from simdisk import Fault, PowerCut, SimDisk, live_image, materialise

from reynd.protocol import events as ev
from reynd.storage import fsops
from reynd.storage import store as store_module
from reynd.storage.errors import StorageError
from reynd.storage.fsutil import fsync_dir, write_all
from reynd.storage.options import StorageOptions
from reynd.storage.snapshots import decode_snapshot, encode_snapshot
from reynd.storage.store import Store

OPTIONS = opts(segment_bytes=4096, snapshot_min_bytes=1 << 30)  # snapshots only when asked

# -- the workload ----------------------------------------------------------------------------

# ("append", agent, steps, batch[, atomic]) | ("rewind", pick) | ("checkout", pick) | ("snapshot",)
# | ("reopen",)
Action = tuple[object, ...]

actions_st = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.sampled_from(AGENTS),
            st.integers(1, 8),
            st.booleans(),
            st.booleans(),  # a batch written atomic: all or nothing after the cut
        ),
        st.tuples(st.just("rewind"), st.integers(0, 1 << 16)),
        st.tuples(st.just("checkout"), st.integers(0, 1 << 16)),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("reopen")),
    ),
    min_size=1,
    max_size=10,
)


@dataclass
class Outcome:
    """What one run acknowledged, and what the interrupted call was writing."""

    model: LogModel  # acknowledged records only
    acked: list[ev.Event] = field(default_factory=list)  # as returned by the Store
    inflight: list[Op | int] = field(default_factory=list)  # records of the cut/failed call
    atomic: bool = False  # the in-flight call was an atomic batch: all of it or none
    cut: bool = False
    wal_failed: bool = False  # a WAL write or sync raised: nothing may be acknowledged after


def _record(e: ev.Event) -> Op | int | None:
    return e.target_n if isinstance(e, ev.Rewind) else None


class _Clock:
    """A deterministic wall clock for append timestamps (the dry run and the real one must
    write the same bytes, so that hypothesis can replay an example)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def time(self) -> float:
        self.now += 0.25
        return self.now


@contextmanager
def steady_clock() -> Iterator[None]:
    scope = vars(store_module)  # the store's `time` module, as the store sees it
    saved = scope["time"]
    scope["time"] = _Clock()
    try:
        yield
    finally:
        scope["time"] = saved


class Runner:
    """Runs a workload on a Store under a SimDisk, keeping what was acknowledged."""

    def __init__(self, top: Path, model: LogModel, acked: list[ev.Event], seed: int) -> None:
        self.root = top / "reyn"
        self.out = Outcome(copy.deepcopy(model), list(acked))
        self.rng = random.Random(seed)
        self.store: Store | None = None

    def run(self, disk: SimDisk, actions: list[Action]) -> Outcome:
        with fsops.installed(disk), steady_clock():
            try:
                if self._open():
                    for action in actions:
                        if not self._step(action):
                            break
                    if self.store is not None:
                        self._close()
            except PowerCut:
                self.out.cut = True
            finally:
                if self.store is not None:  # after a cut: release the lock
                    with suppress(BaseException):
                        self.store.close()
                disk.release()
        return self.out

    def _open(self) -> bool:
        try:
            self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        except OSError:
            return False  # an injected error while opening: the daemon would exit
        return True

    def _close(self) -> bool:
        """Close the store; False when its final sync failed (the daemon would then exit)."""
        store, self.store = self.store, None
        assert store is not None
        try:
            store.close()
        except OSError:
            return False  # everything acknowledged was synced before: nothing is at stake
        return True

    def _wal_call(
        self, records: list[Op | int], fn: Callable[[], list[ev.Event]], atomic: bool = False
    ) -> bool:
        """One WAL-writing call; True when it was acknowledged."""
        out = self.out
        failed, out.inflight = out.inflight, records
        failed_atomic, out.atomic = out.atomic, atomic
        try:
            written = fn()
        except OSError:
            assert not out.wal_failed
            out.wal_failed = True
            return False  # inflight stays: its bytes may or may not be on disk
        except StorageError as exc:
            # Refused because an earlier write or sync failed: nothing was written.
            assert out.wal_failed, f"StorageError without an earlier failure: {exc}"
            out.inflight = failed  # only the failed call's records may have been written
            out.atomic = failed_atomic
            return False
        assert not out.wal_failed, "a WAL call succeeded after a failed write or sync"
        out.inflight = []
        m = out.model
        for rec, e in zip(records, written, strict=True):
            seq = m.add_reset(rec) if isinstance(rec, int) else m.add(rec)
            assert seq == e.seq
        out.acked.extend(written)
        return True

    def _step(self, action: Action) -> bool:
        store, m, kind = self.store, self.out.model, action[0]
        assert store is not None
        if kind == "append":
            agent, steps, batch = str(action[1]), int(str(action[2])), bool(action[3])
            atomic = batch and len(action) > 4 and bool(action[4])
            for _ in range(1 if batch else steps):
                trial = copy.deepcopy(m)
                ops: list[Op] = []
                for _ in range(steps if batch else 1):
                    for op in trial.next_ops(self.rng, agent):
                        trial.add(op)
                        ops.append(op)
                events = [to_event(op) for op in ops]

                def append(events: list[ev.Event] = events) -> list[ev.Event]:
                    return store.append(events, atomic=atomic)

                if self._wal_call(list(ops), append, atomic):
                    m._counter = trial._counter
        elif kind in ("rewind", "checkout"):
            if m.head == 0:
                return True
            pick = int(str(action[1]))
            if kind == "rewind":
                choices = sorted(s for s in m.active_set() if s < m.head)
            else:
                choices = list(range(m.head))
            target = choices[pick % len(choices)]
            if kind == "rewind":
                self._wal_call([target], lambda: [store.rewind(target)])
            else:
                self._wal_call([target], lambda: [store.checkout(target)[1]])
        elif kind == "snapshot":
            with suppress(OSError):  # a failed snapshot is not fatal: it was never published
                store.snapshot_now()
        elif kind == "reopen":
            if self.out.wal_failed:
                return False  # the daemon exits here; recovery is what the image shows
            return self._close() and self._open()
        return True


def _same(got: ev.Event, rec: Op | int) -> bool:
    if isinstance(rec, int):
        return isinstance(got, ev.Rewind) and got.target_n == rec
    want = to_event(rec)
    return bool(
        msgspec.structs.replace(got, seq=0, ts=0.0, more=0)
        == msgspec.structs.replace(want, seq=0, ts=0.0)
    )


def check_recovered(root: Path, out: Outcome) -> tuple[LogModel, list[ev.Event]]:
    """Open the power-cut image for real and check it; returns the surviving log and its model."""
    for snap in (root / "state" / "snapshots").glob("[!.]*.snap"):  # not the .tmp- files
        decode_snapshot(snap.read_bytes(), snap)  # a published snapshot is always intact
    with Store.open(root, OPTIONS, clock=CLOCK) as store:
        got = read_all(store)
        acked, head = out.acked, store.head
        assert head >= len(acked), f"acknowledged up to {len(acked)}, recovered only {head}"
        assert [e.seq for e in got] == list(range(1, head + 1))
        assert got[: len(acked)] == acked  # byte-identical, timestamps included
        extra = got[len(acked) :]
        assert len(extra) <= len(out.inflight), "records nobody wrote"
        if out.atomic:
            assert len(extra) in (0, len(out.inflight)), "part of an atomic batch survived"
        for e, rec in zip(extra, out.inflight, strict=False):
            assert _same(e, rec), (e, rec)
        model = copy.deepcopy(out.model)
        for rec in out.inflight[: len(extra)]:
            if isinstance(rec, int):
                model.add_reset(rec)
            else:
                model.add(rec)
        assert summarize(store.state) == model.tip_state()
        active = model.active_set()
        for s in range(head + 1):
            assert store.lineage.is_active(s) == (s in active), s
            assert store.lineage.branch_of(s) == model.branch_of(s), s
        for s in random.Random(head).sample(range(head + 1), min(head + 1, 6)):
            assert summarize(store.state_as_of(s)) == model.state(s), s
        assert not list((root / "state" / "snapshots").glob("*.damaged"))
        event(f"torn tail cut: {store.recovery.torn_bytes > 0}")
        event(f"segments: {min(store.recovery.segments, 3)}")
        event(f"unacknowledged records kept: {min(len(extra), 2)}")
        event(f"snapshots: {min(len(store.snapshots.seqs), 2)}")
        return model, got


def cut_and_check(
    work: Path,
    start: Path | None,
    model: LogModel,
    acked: list[ev.Event],
    actions: list[Action],
    *,
    cut_frac: float | None,
    choose: Callable[[int], int],
    faults: list[Fault] | None = None,
    seed: int = 0,
) -> tuple[Path, LogModel, list[ev.Event], Outcome]:
    """One round: run (from the tree `start`, or empty), cut, materialise, check.

    Returns the raw image (before any recovery ran on it) for the next round.
    """

    def fresh(name: str) -> Path:
        top = work / name
        if start is None:
            top.mkdir()
        else:
            shutil.copytree(start, top)
        return top

    # A dry run counts the steps, so that the cut lands anywhere in the workload.
    dry = SimDisk(fresh("dry"), faults=copy.deepcopy(faults))
    Runner(work / "dry", model, acked, seed).run(dry, actions)
    shutil.rmtree(work / "dry")
    cut_at = None if cut_frac is None else round(cut_frac * dry.steps)

    top = fresh("live")
    disk = SimDisk(top, cut_at=cut_at, faults=copy.deepcopy(faults))
    out = Runner(top, model, acked, seed).run(disk, actions)
    if not disk.failed:  # (a failed fsync drops pages from the disk, not from the cache)
        assert disk.image() == live_image(top), "a write escaped the simulated disk"
    image = work / "image"
    materialise(disk.image(choose), image)
    shutil.rmtree(top)
    checked = work / "checked"
    shutil.copytree(image, checked)
    new_model, got = check_recovered(checked / "reyn", out)
    shutil.rmtree(checked)
    return image, new_model, got, out


@contextmanager
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="reynd-pl-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def drawn(data: st.DataObject) -> Callable[[int], int]:
    """Loss decisions drawn by hypothesis (so they shrink), either end of a range as likely."""
    return lambda n: data.draw(st.one_of(st.integers(0, n), st.just(n)))


seed_st = st.tuples(st.just("append"), st.sampled_from(AGENTS), st.integers(0, 40), st.booleans())
# Where the power goes out, as a fraction of the run's steps; biased late, past the
# directory set-up of the first open, where the appends are.
cut_st = st.integers(0, 100).map(lambda pct: (pct / 100) ** 0.5)


# -- the properties ---------------------------------------------------------------------------


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rounds=st.lists(
        st.tuples(st.tuples(seed_st).map(list), actions_st, cut_st), min_size=1, max_size=2
    ),
    data=st.data(),
)
def test_power_cut_keeps_every_acknowledged_append(
    rounds: list[tuple[list[Action], list[Action], float]], data: st.DataObject
) -> None:
    """Any workload, a power cut at any step, any loss a disk allows: reopen is exact.

    A second round starts from the raw image of the first (recovery itself then
    runs under the simulated disk and may be cut too).
    """
    with workdir() as work:
        start: Path | None = None
        model, acked = LogModel(), list[ev.Event]()
        for i, (seed, actions, frac) in enumerate(rounds):
            step = work / f"round{i}"
            step.mkdir()
            start, model, acked, _ = cut_and_check(
                step, start, model, acked, seed + actions, cut_frac=frac, choose=drawn(data), seed=i
            )


faults_st = st.builds(
    Fault,
    op=st.sampled_from(["write", "fdatasync", "fsync"]),
    nth=st.integers(1, 40),
    errno=st.sampled_from([errno.EIO, errno.ENOSPC]),
    persistent=st.booleans(),
    short=st.booleans(),
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    seed=seed_st,
    actions=actions_st,
    fault=faults_st,
    frac=st.one_of(st.none(), cut_st),
    data=st.data(),
)
def test_io_error_then_power_cut(
    seed: Action, actions: list[Action], fault: Fault, frac: float | None, data: st.DataObject
) -> None:
    """A write or sync fails at the Nth call (transient or persistent, EIO or ENOSPC).

    The call that hit it raises; every later WAL call is refused (rule 5: no
    retry, no carrying on); nothing after the failure is acknowledged. Then,
    with or without a power cut, reopen finds every acknowledged append and at
    most a prefix of the failed call's records (its bytes were written, the
    sync failed: the disk may have kept them or not).
    """
    with workdir() as work:
        cut_and_check(
            work,
            None,
            LogModel(),
            [],
            [seed, *actions],
            cut_frac=frac,
            choose=drawn(data),
            faults=[fault],
        )


def test_transient_sync_failure_poisons_the_wal(tmp_path: Path) -> None:
    """Regression: one failed fdatasync, then the error goes away.

    Before the fix the Store carried on: the next append was written after the
    unsynced (and, on Linux, possibly dropped) record, got a seq past it, and
    its fsync "succeeded"; a power cut then left a hole before an acknowledged
    record, and reopen refused the log as corrupt.
    """
    top = tmp_path / "live"
    top.mkdir()
    disk = SimDisk(top, faults=[Fault("fdatasync", 3, errno.EIO)])
    with fsops.installed(disk):
        store = Store.open(top / "reyn", OPTIONS, clock=CLOCK)
        store.append([to_event(("create", "a"))])
        store.append([to_event(("msg", "a", "m1", "one"))])
        with pytest.raises(OSError, match="simulated"):
            store.append([to_event(("msg", "a", "m2", "two"))])
        assert store.head == 2
        with pytest.raises(StorageError, match="failed"):
            store.append([to_event(("msg", "a", "m3", "three"))])
        with pytest.raises(StorageError):
            store.rewind(1)
        assert store.head == 2
        store.close()  # no retry of the failed fsync, no error either
    # The power goes out now, and the unsynced record is lost.
    image = tmp_path / "image"
    materialise(disk.image(lambda n: 0), image)
    with Store.open(image / "reyn", OPTIONS, clock=CLOCK) as again:
        assert again.head == 2
        assert [e.seq for e in read_all(again)] == [1, 2]


def test_transient_write_failure_poisons_the_wal(tmp_path: Path) -> None:
    """Regression: a write that fails with ENOSPC after a short write, then space comes back.

    Before the fix the next append landed after the half-written record
    (O_APPEND) with the next seq and was acknowledged; reopen then found a bad
    record followed by valid ones and refused the log, even without a power cut.
    """
    top = tmp_path / "live"
    top.mkdir()
    # Write 1 is state/wal/extent (segment 1 created), write 2 the first record: fail the second.
    disk = SimDisk(top, faults=[Fault("write", 3, errno.ENOSPC, short=True)])
    with fsops.installed(disk):
        store = Store.open(top / "reyn", OPTIONS, clock=CLOCK)
        store.append([to_event(("create", "a"))])
        with pytest.raises(OSError, match="No space"):
            store.append([to_event(("msg", "a", "m1", "one"))])
        with pytest.raises(StorageError):
            store.append([to_event(("msg", "a", "m2", "two"))])
        store.close()
    # The live tree: no power cut at all.
    with Store.open(top / "reyn", OPTIONS, clock=CLOCK) as again:
        assert again.head == 1
        assert again.recovery.torn_bytes > 0  # the half record was cut as a torn tail


# -- rule 4: a published snapshot is never a zero-length (or partial) file --------------------


def _all_choices(image_of: Callable[[Callable[[int], int]], object], limit: int = 4000) -> int:
    """Call image_of with every sequence of loss decisions (large ranges sampled); returns count.

    An odometer over the decision tree: each run follows `prefix`, takes 0 beyond
    it, and the next run advances the deepest decision that has values left.
    """
    prefix: list[int] = []
    count = 0
    while True:
        seen: list[list[int]] = []

        def choose(n: int, seen: list[list[int]] = seen, prefix: list[int] = prefix) -> int:
            values = sorted({0, 1, n // 2, n - 1, n} & set(range(n + 1)))
            i = len(seen)
            seen.append(values)
            return prefix[i] if i < len(prefix) else values[0]

        image_of(choose)
        count += 1
        assert count <= limit, "too many images to enumerate"
        taken = [prefix[i] if i < len(prefix) else seen[i][0] for i in range(len(seen))]
        while taken:
            values = seen[len(taken) - 1]
            k = values.index(taken[-1])
            if k + 1 < len(values):
                taken[-1] = values[k + 1]
                break
            taken.pop()
        if not taken:
            return count
        prefix = taken


def run_cut(
    base: Path,
    top: Path,
    cut: int | None,
    write: Callable[[Store], object],
    options: StorageOptions = OPTIONS,
) -> SimDisk:
    """Copy the tree `base` to `top`, open its store and run `write` on a SimDisk that cuts the
    power before step `cut` (None: no cut); the disk, for its images."""
    shutil.copytree(base, top)
    disk = SimDisk(top, cut_at=cut)
    with fsops.installed(disk):
        store = Store.open(top / "reyn", options, clock=CLOCK)
        try:
            write(store)
            store.close()
        except PowerCut:
            pass
        finally:
            with suppress(BaseException):
                store.close()
            disk.release()
    return disk


def _snapshot_cuts(tmp_path: Path, write: Callable[[Store], object]) -> list[str]:
    """Cut the power before every step of `write`; return every defect found in any image."""
    base = tmp_path / "base"
    (base).mkdir()
    with Store.open(base / "reyn", OPTIONS) as store:
        store.append([to_event(("create", "a")), to_event(("msg", "a", "m1", "x" * 300))])
        store.snapshot_now()  # an older snapshot, so a newer one replaces nothing
        store.append([to_event(("msg", "a", "m2", "y" * 300))])
    defects: list[str] = []
    total = run_cut(base, tmp_path / "cutNone", None, write).steps
    assert total >= 5  # open, write, fsync, rename, fsync dir at least
    for cut in range(total + 1):
        disk = run_cut(base, tmp_path / f"cut{cut}", cut, write)

        def check(choose: Callable[[int], int], disk: SimDisk = disk, cut: int = cut) -> None:
            for rel, data in disk.image(choose).items():
                if rel.endswith(".snap") and "/.tmp-" not in rel:
                    assert data is not None
                    try:
                        decode_snapshot(data, Path(rel))
                    except StorageError as exc:
                        defects.append(f"cut {cut}: {rel}: {len(data)} bytes: {exc}")

        _all_choices(check)
    return defects


def test_snapshot_publish_order_never_leaves_a_damaged_snapshot(tmp_path: Path) -> None:
    """Rule 4 (tmp, write, fsync, rename, fsync dir): cut before any step, any loss: no bad file."""
    defects = _snapshot_cuts(tmp_path, lambda store: store.snapshot_now())
    assert defects == []


def test_rename_before_fsync_is_caught(tmp_path: Path) -> None:
    """The control: the same cuts catch a writer that renames before it fsyncs.

    This is the test's teeth: with the order wrong, some power cut leaves a
    snapshot under its final name that is empty or cut short.
    """

    def wrong(store: Store) -> int:
        seq, data = store.state.seq, encode_snapshot(store.state)
        final = store.snapshots.path(seq)
        tmp = final.with_name(f".tmp-{final.name}")
        fd = fsops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        write_all(fd, data)
        fsops.replace(tmp, final)  # renamed before its data is durable
        fsync_dir(final.parent)
        fsops.fsync(fd)
        fsops.close(fd)
        return seq

    defects = _snapshot_cuts(tmp_path, wrong)
    assert any("0 bytes" in d for d in defects), defects


# -- atomic batches: a power cut keeps all of a batch or none --------------------------------


@pytest.mark.parametrize("segment_bytes", [4096, 300])  # 300: the batch would cross a rotation
def test_power_cut_keeps_all_of_an_atomic_batch_or_none(tmp_path: Path, segment_bytes: int) -> None:
    """Cut before every step of one 4-record batch, every loss a disk allows: 0 or 4 survive."""
    options = opts(segment_bytes=segment_bytes, snapshot_min_bytes=1 << 30)
    base = tmp_path / "base"
    base.mkdir()
    with Store.open(base / "reyn", options, clock=CLOCK) as store:
        store.append([to_event(("create", "a")), to_event(("msg", "a", "m0", "x" * 100))])
        before = store.head
    batch = [to_event(("msg", "a", f"b{k}", "y" * 100)) for k in range(4)]

    def write(store: Store) -> object:
        return store.append(batch, atomic=True)

    total = run_cut(base, tmp_path / "cutNone", None, write, options).steps
    survived: set[int] = set()
    for cut in range(total + 1):
        disk = run_cut(base, tmp_path / f"cut{cut}", cut, write, options)

        def check(choose: Callable[[int], int], disk: SimDisk = disk, cut: int = cut) -> None:
            image = tmp_path / f"image{cut}"
            materialise(disk.image(choose), image)
            with Store.open(image / "reyn", options, clock=CLOCK) as store:
                extra = store.head - before
                assert extra in (0, len(batch)), f"cut {cut}: {extra} of the batch survived"
                assert len(store.state.agents["a"].inbox) == 1 + extra
                survived.add(extra)
            shutil.rmtree(image)

        _all_choices(check)
    assert survived == {0, len(batch)}  # both outcomes happen: the cuts reach the batch

"""Retention and GC of the storage core (reynd/core/retention.py, reynd/storage/gc.py).

What must hold after any collection, checked against the independent LogModel:

- the floor is what the policy says (computed here from the segment files and
  the model, not from the code under test), segment-granular, and the
  segment holding the tip always stays;
- every seq at or above the floor, active or abandoned, has the same as-of
  state, active flag and branch as before; below it, a read, rewind or
  checkout raises BelowFloor naming the floor, except at the snapshots kept in
  the coarse window, which stay readable and reachable by checkout;
- reset records below the floor keep shaping the lineage after a reopen: every
  seq's active flag and branch is unchanged (an abandoned future never
  reappears as active);
- the next seq never goes back (the retained file's watermark);
- a crash (SIGKILL at each GC crash point) or a power cut at any step of a
  collection reopens cleanly with nothing inside the window lost.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import (
    AGENTS,
    CLOCK,
    LogModel,
    append_ops,
    opts,
    segments,
    snap_dir,
    summarize,
    to_event,
    wal_dir,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from simdisk import Fault, SimDisk, materialise
from test_crash import _killed, run_worker
from test_power_loss import run_cut

from reynd.core.retention import (
    MAX_SIGHTINGS,
    AgeClock,
    Horizon,
    RetentionPolicy,
    SegmentInfo,
    Sighting,
    floor_for_recovery,
    horizon_budget,
    legacy,
    plan_wal,
    plan_wal_drop,
    snapshots_to_keep,
    without_horizon,
)
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol.state import AgentState, Chain, RuntimeState, SkillRun
from reynd.storage import fsops
from reynd.storage import snapshots as snapshots_module
from reynd.storage import store as store_module
from reynd.storage.errors import CorruptionError
from reynd.storage.framing import encode_frame
from reynd.storage.gc import collect
from reynd.storage.retained import load_retained
from reynd.storage.store import Store
from reynd.storage.wal import segment_path

OPTIONS = opts(segment_bytes=2048, snapshot_min_bytes=1 << 30)  # snapshots only when asked


def keep_only(**keys: Any) -> RetentionPolicy:
    """An explicit policy: what `keys` keep and what recovery needs, no default horizon."""
    return without_horizon(RetentionPolicy(**keys))


# == pure: reynd/core/retention.py ============================================================


def segs(*spec: tuple[int, int]) -> list[SegmentInfo]:
    """Segments from (first, last); 100 bytes per record, last_ts = last seq."""
    return [SegmentInfo(a, b, 100 * (b - a + 1), float(b)) for a, b in spec]


FOUR = segs((1, 10), (11, 20), (21, 30), (31, 40))


@pytest.mark.parametrize(
    ("policy", "required", "now", "drop"),
    [
        (keep_only(), 41, 0.0, 3),  # the tip's segment stays even when all is covered
        (keep_only(), 21, 0.0, 2),  # seq 20 is the last one not needed
        (keep_only(), 20, 0.0, 1),  # a segment goes only when all of it is below
        (keep_only(), 1, 0.0, 0),
        (keep_only(wal_keep_records=15), 41, 0.0, 2),  # keeps 26..40: segment 21.. stays
        (keep_only(wal_keep_records=10), 41, 0.0, 3),
        (keep_only(wal_keep_records=1000), 41, 0.0, 0),
        (keep_only(wal_keep_age_s=15), 41, 40.0, 2),  # cutoff 25: segment ..30 is young
        (keep_only(wal_keep_age_s=20), 41, 40.0, 1),  # exactly 20 s old: inside
        (keep_only(wal_keep_age_s=9), 41, 40.0, 3),
        (keep_only(wal_keep_bytes=2000), 41, 0.0, 2),  # keep at least 2000 of 4000
        (keep_only(wal_keep_bytes=2001), 41, 0.0, 1),
        (keep_only(wal_keep_bytes=1), 41, 0.0, 3),
        # every horizon must agree: the most conservative wins
        (keep_only(wal_keep_records=5, wal_keep_bytes=3000), 41, 0.0, 1),
        (keep_only(wal_keep_records=5, wal_keep_age_s=30), 41, 40.0, 0),
    ],
)
def test_plan_wal_drop(policy: RetentionPolicy, required: int, now: float, drop: int) -> None:
    assert plan_wal_drop(FOUR, 40, required, policy, now) == drop


def test_plan_wal_drop_never_takes_the_tip_before_an_empty_last_segment() -> None:
    # A crash right after a rotation leaves an empty last segment: the tip is in the one before.
    spec = [*FOUR, SegmentInfo(41, 40, 0, 0.0)]
    assert plan_wal_drop(spec, 40, 41, keep_only(), 0.0) == 3
    assert plan_wal_drop(FOUR[:1], 10, 11, keep_only(), 0.0) == 0


# -- ages no wall-clock step can inflate (AgeClock) ----------------------------------------

START = 1_000_000.0  # true time, and the wall clock, as the daemon starts
MONO = 50.0  # the monotonic clock then (any origin)
DAY = 86400.0

_op = st.one_of(
    st.tuples(st.just("append"), st.floats(0, 3 * DAY)),  # some time passes, then a record
    st.tuples(st.just("step"), st.floats(-3 * DAY, 3 * DAY)),  # the wall clock jumps
    st.tuples(st.just("gc"), st.floats(0, 3 * DAY)),  # time passes, then a collection
)


@settings(max_examples=400, deadline=None)
@given(
    before=st.lists(st.floats(0, 5 * DAY), max_size=5),  # ages of the records at start
    ops=st.lists(_op, max_size=40),
    keep=st.floats(1, 2 * DAY),
)
def test_no_wall_clock_step_makes_a_record_older_than_it_is(
    before: list[float], ops: list[tuple[str, float]], keep: float
) -> None:
    """Whatever the wall clock does after the start, an age is never more than the true one,
    so GC never drops a segment younger than wal_keep_age_s; without steps, ages are exact
    for what the WAL held at start."""
    # (seq, ts, true time): stamped by a right clock before the start.
    records = [(i + 1, START - a, START - a) for i, a in enumerate(sorted(before, reverse=True))]
    clock = AgeClock(Sighting(len(records), START, MONO))
    t, offset, stepped = START, 0.0, False
    for kind, value in ops:
        if kind == "step":
            offset += value
            stepped = stepped or value != 0
            continue
        t += value
        wall, mono = t + offset, MONO + (t - START)
        if kind == "append":
            records.append((len(records) + 1, wall, t))
            continue
        head = len(records)
        clock = clock.saw(head, wall, mono, floor=1)
        for seq, ts, true in records:
            age = clock.age(seq, ts, wall, mono)
            assert age <= (t - true) + 1e-6 * DAY, (seq, age, t - true)
            if not stepped and seq <= clock.start.head:
                assert age == pytest.approx(t - true, abs=1e-6 * DAY)
        # What the ages let GC do: nothing younger than `keep` goes.
        segs = [SegmentInfo(seq, seq, 1, ts) for seq, ts, _ in records]
        policy = keep_only(wal_keep_age_s=keep)
        ages = clock.segment_ages(segs, wall, mono)
        drop = plan_wal_drop(segs, head, head + 1, policy, clock.now(wall, mono), ages=ages)
        assert all(t - true > keep - 1e-6 * DAY for _, _, true in records[:drop])


def test_age_clock_examples() -> None:
    clock = AgeClock(Sighting(head=10, wall=1000.0, mono=0.0))
    # Stepped forward two days a second after the start: one second has passed.
    assert clock.now(1000.0 + 2 * DAY + 1, 1.0) == 1001.0
    assert clock.age(10, 990.0, 1000.0 + 2 * DAY + 1, 1.0) == 11.0
    # Stepped back: the wall clock is believed (it keeps more).
    assert clock.now(1000.0 - DAY, 5.0) == 1000.0 - DAY
    # A record appended after the start is new until a collection has seen it ...
    assert clock.age(11, 1001.0, 1100.0, 100.0) == 0.0
    seen = clock.saw(11, 1100.0, 100.0, floor=1)
    assert seen.age(11, 1001.0, 1160.0, 160.0) == 60.0  # ... then aged from that sighting
    # Stamped two days back, then the clock is put right: still a minute old.
    assert seen.age(11, 1001.0 - 2 * DAY, 1160.0, 160.0) == 60.0
    # Sightings below the floor are forgotten; one that adds nothing is not kept.
    assert seen.saw(11, 1200.0, 200.0, floor=1) == seen
    assert seen.saw(12, 1200.0, 200.0, floor=12).later == (Sighting(12, 1200.0, 200.0),)
    assert clock.saw(5, 1100.0, 100.0, floor=1) == clock  # the start already covers it
    # Bounded: past MAX_SIGHTINGS every other one goes, and ages only shrink.
    many = clock
    for k in range(1, 3 * MAX_SIGHTINGS):
        many = many.saw(10 + k, 1000.0 + k, float(k), floor=1)
    assert len(many.later) <= MAX_SIGHTINGS
    assert [s.head for s in many.later] == sorted(s.head for s in many.later)
    full = AgeClock(clock.start, tuple(Sighting(10 + k, 1000.0 + k, k) for k in range(1, 768)))
    for seq in range(11, 3 * MAX_SIGHTINGS):
        wall, mono = 1000.0 + 1000.0, 1000.0
        assert many.age(seq, 1000.0, wall, mono) <= full.age(seq, 1000.0, wall, mono)


def _agent(name: str, chains: Iterable[int] = (), runs: Iterable[int] = ()) -> AgentState:
    return AgentState(
        name=name,
        session="s",
        executor="builtin",
        options={},
        created_seq=1,
        applied_seq=1,
        pending_chains=[Chain(f"t{s}", f"m{s}", s) for s in chains],
        skill_runs={f"r{s}": SkillRun(f"r{s}", "k", "p", s) for s in runs},
    )


def test_floor_for_recovery() -> None:
    assert floor_for_recovery(RuntimeState(), 0) == 1
    assert floor_for_recovery(RuntimeState(), 90) == 91
    state = RuntimeState(
        seq=100, agents={"a": _agent("a", chains=[70]), "b": _agent("b", runs=[40, 80])}
    )
    assert floor_for_recovery(state, 90) == 40  # a skill run's last phase still replays from 40
    state.agents["b"].skill_runs.clear()
    assert floor_for_recovery(state, 90) == 70  # an act-turn rewind may land inside the turn
    assert floor_for_recovery(state, 50) == 51


def test_snapshots_to_keep() -> None:
    snaps = [5, 10, 15, 20, 25, 30]
    times = {s: float(s) for s in snaps}

    def keep(**kw: object) -> set[int]:
        policy = msgspec.structs.replace(keep_only(snapshot_keep=0), **kw)
        return snapshots_to_keep(snaps, floor=21, pinned={5}, times=times, policy=policy, now=30.0)

    assert keep() == {20, 25, 30, 5}  # at or above floor - 1, and the pinned entry
    assert keep(snapshot_keep=1) == {20, 25, 30, 5, 15}
    assert keep(snapshot_keep=9) == set(snaps)
    assert keep(snapshot_keep_age_s=16) == {20, 25, 30, 5, 15}  # written at 15 >= 30 - 16
    assert keep(snapshot_keep_age_s=16, snapshot_keep=2) == {20, 25, 30, 5, 15, 10}
    assert snapshots_to_keep(
        snaps, floor=21, pinned={7}, times=times, policy=keep_only(snapshot_keep=0), now=0
    ) == {20, 25, 30}  # a pin without a file keeps nothing


def test_policy_is_validated() -> None:
    assert msgspec.convert({}, RetentionPolicy) == RetentionPolicy()
    for bad in ({"wal_keep_records": -1}, {"snapshot_keep": "4"}, {"wal_keep_bytez": 1}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, RetentionPolicy)


# == the store: an independent expectation ==================================================


class Clock:
    """A wall clock the test moves: 1 s per append, so ages are exact."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        self.now += 1.0
        return self.now


_CLOCKED = (vars(store_module), vars(snapshots_module))  # each module's `time`, as it sees it


def swap_clock(new: object) -> list[object]:
    """Put `new` in place of the store's and the snapshots' `time` module; returns the old."""
    old = [scope["time"] for scope in _CLOCKED]
    for scope in _CLOCKED:
        scope["time"] = new
    return old


def restore_clock(old: list[object]) -> None:
    for scope, value in zip(_CLOCKED, old, strict=True):
        scope["time"] = value


@contextmanager
def clock() -> Iterator[Clock]:
    c = Clock()
    saved = swap_clock(c)
    try:
        yield c
    finally:
        restore_clock(saved)


@dataclass(frozen=True)
class DiskSegment:
    first: int
    last: int
    size: int
    last_ts: float


def disk_segments(root: Path) -> list[DiskSegment]:
    """The segment files as found on disk (names, lines, sizes, last record's time)."""
    out = []
    for path in segments(root):
        data = path.read_bytes()
        lines = [ln for ln in data.split(b"\n") if ln]
        first = int(path.stem)
        ts = float(json.loads(lines[-1])["rec"]["ts"]) if lines else 0.0
        out.append(DiskSegment(first, first + len(lines) - 1, len(data), ts))
    return out


def turn_start_seq(model: LogModel, agent: str, turn: str) -> int:
    for s in model.lineage(model.head):
        rec = model.records[s - 1] if s else None
        if isinstance(rec, tuple) and rec[0] == "turn_start" and rec[1:3] == (agent, turn):
            return s
    raise AssertionError((agent, turn))


def expected_floor(
    model: LogModel, root: Path, snaps: Iterable[int], policy: RetentionPolicy, now: float
) -> int:
    """The policy read literally: a segment goes when all of it is older than every horizon."""
    head = model.head
    active = model.active_set()
    horizon = max((s for s in snaps if s in active), default=0) + 1
    for agent, a in model.tip_state().items():
        for turn in a.pending:
            horizon = min(horizon, turn_start_seq(model, agent, turn))
    if policy.wal_keep_records:
        horizon = min(horizon, head - policy.wal_keep_records + 1)
    found = disk_segments(root)
    remaining = sum(s.size for s in found)
    floor = found[0].first if found else head + 1
    for seg, nxt in pairwise(found):
        if seg.last >= horizon or seg.last >= head:
            break
        if policy.wal_keep_age_s and seg.last_ts >= now - policy.wal_keep_age_s:
            break
        if policy.wal_keep_bytes and remaining - seg.size < policy.wal_keep_bytes:
            break
        remaining -= seg.size
        floor = nxt.first
    return floor


def entries(model: LogModel, floor: int) -> set[int]:
    """Seqs below the floor whose state kept seqs rebuild from."""
    out = {floor - 1} | {model.parent(r) for r in range(floor, model.head + 1) if model.is_reset(r)}
    return {s for s in out if 0 < s < floor}


def expected_snapshots(
    before: set[int],
    *,
    model: LogModel,
    floor: int,
    policy: RetentionPolicy,
    times: dict[int, float],
    now: float,
) -> set[int]:
    pins = entries(model, floor)
    have = before | pins
    below = sorted((s for s in have if s < floor - 1), reverse=True)
    keep = {s for s in have if s >= floor - 1} | pins | set(below[: policy.snapshot_keep])
    if policy.snapshot_keep_age_s:
        keep |= {s for s in below if times.get(s, now) >= now - policy.snapshot_keep_age_s}
    return keep


def check_window(
    store: Store, model: LogModel, floor: int, *, sample: int | None = None, seed: int = 0
) -> None:
    """Everything at or above `floor` and at kept snapshots is as the model says; below, refused."""
    head = model.head
    assert store.head == head and store.floor == floor
    assert summarize(store.state) == model.tip_state()
    active = model.active_set()
    branch = 0
    for s in range(head + 1):  # the lineage of every seq, below the floor too
        # model.branch_of(s), in one pass: a plain record's parent is s - 1
        branch = s if s and model.is_reset(s) else branch
        assert store.lineage.is_active(s) == (s in active), s
        assert store.lineage.branch_of(s) == branch, s
    coarse = {s for s in store.snapshots.seqs if s < floor}
    readable = [0, *range(floor, head + 1), *sorted(coarse)]
    refused = [s for s in range(1, floor) if s not in coarse]
    if sample is not None:
        rng = random.Random(seed)
        readable = rng.sample(readable, min(sample, len(readable)))
        refused = rng.sample(refused, min(sample, len(refused)))
    for s in readable:
        assert summarize(store.state_as_of(s)) == model.state(s), s
    for s in refused:
        with pytest.raises(errors.BelowFloor, match=f"the floor is {floor}") as info:
            store.state_as_of(s)
        assert info.value.data == {"seq": s, "floor": floor}
        with pytest.raises(errors.BelowFloor, match=f"the floor is {floor}"):
            store.checkout(s)
        if s in active:
            with pytest.raises(errors.BelowFloor, match=f"the floor is {floor}"):
                store.rewind(s)
    assert store.head == head  # nothing was written by the refusals
    # The tip's segment is on disk and the floor is a segment boundary (a crashed collection
    # may have left older segments below it, which the next one deletes).
    found = disk_segments(store.root)
    if head:
        assert floor in {s.first for s in found}
        assert any(s.first <= head <= s.last for s in found)


def grow(store: Store, model: LogModel, rng: random.Random, n: int, every: int = 0) -> None:
    """Append about `n` records of agent `a`, with a snapshot every `every` seqs."""
    end = model.head + n
    while model.head < end:
        append_ops(store, model, model.next_ops(rng, "a"))
        if every and model.head % every == 0:
            store.snapshot_now()


def reset(store: Store, model: LogModel, target: int, *, checkout: bool = False) -> int:
    record = store.checkout(target)[1] if checkout else store.rewind(target)
    assert record.seq == model.add_reset(target)
    return record.seq


def history(store: Store, model: LogModel) -> dict[str, int]:
    """A history with forks: both kinds of reset, kept and dropped, and abandoned snapshots."""
    rng = random.Random(7)
    grow(store, model, rng, 120, every=20)  # snapshots near every 20 seqs
    r1 = reset(store, model, 30, checkout=True)  # abandons 31..120 (snapshots on it)
    grow(store, model, rng, 60, every=20)
    r2 = reset(store, model, r1 + 10)  # abandons r1+11 .. r2-1
    grow(store, model, rng, 60, every=25)
    r3 = reset(store, model, 100, checkout=True)  # fork switch back onto the first branch
    grow(store, model, rng, 45, every=15)
    return {"r1": r1, "r2": r2, "r3": r3}


POLICIES = {
    "recovery_only": keep_only(),
    "records": keep_only(wal_keep_records=120),
    "age": keep_only(wal_keep_age_s=90),
    "bytes": keep_only(wal_keep_bytes=14_000),
    "snapshot_keep_0": keep_only(snapshot_keep=0),
    "snapshot_keep_2": keep_only(snapshot_keep=2),
    "snapshot_age": keep_only(snapshot_keep=0, snapshot_keep_age_s=150),
    "everything": keep_only(snapshot_keep=100),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_each_policy_floor_and_window(tmp_path: Path, name: str) -> None:
    policy = POLICIES[name]
    root = tmp_path / "reyn"
    model = LogModel()
    with clock() as c:
        store = Store.open(root, OPTIONS)
        history(store, model)
        store.snapshot_now()  # the tip: by default nothing above it is needed
        before = set(store.snapshots.seqs)
        times = store.snapshots.times()
        now = c.now
        floor = expected_floor(model, root, before, policy, now)
        want = expected_snapshots(
            before, model=model, floor=floor, policy=policy, times=times, now=now
        )
        report = collect(store, policy, now)
    try:
        assert report.floor == floor and report.floor_before == 1
        assert floor > 1, "the policy should let something go"
        assert report.segments_dropped == len(report.dropped) > 0
        assert not any(p.exists() for p in report.dropped)
        assert set(store.snapshots.seqs) == want
        assert {int(p.stem) for p in snap_dir(root).glob("*.snap")} == want
        check_window(store, model, floor)
        retained = load_retained(root / "state")
        assert retained.floor == floor and retained.next_seq == model.head + 1
        assert retained.resets == [
            (r, model.parent(r)) for r in range(1, floor) if model.is_reset(r)
        ]
    finally:
        store.close()
    with Store.open(root, OPTIONS) as again:  # reset records below the floor still shape it
        check_window(again, model, floor)
        # A second collection under the same policy has nothing more to do.
        assert collect(again, policy, now).segments_dropped == 0
        assert set(again.snapshots.seqs) == want


def test_policies_order_their_floors(tmp_path: Path) -> None:
    """Deeper horizons keep more: each opt-in floor is at or below the default one."""
    model = LogModel()
    with clock() as c, Store.open(tmp_path / "reyn", OPTIONS) as store:
        history(store, model)
        store.snapshot_now()
        snaps = set(store.snapshots.seqs)
        floors = {
            k: expected_floor(model, tmp_path / "reyn", snaps, p, c.now)
            for k, p in POLICIES.items()
        }
    assert floors["records"] < floors["recovery_only"]
    assert floors["age"] < floors["recovery_only"]
    assert floors["bytes"] < floors["recovery_only"]
    assert floors["snapshot_keep_0"] == floors["recovery_only"]
    assert len(set(floors.values())) >= 4


def test_turn_in_flight_holds_the_floor(tmp_path: Path) -> None:
    model = LogModel()
    rng = random.Random(3)
    with Store.open(tmp_path / "reyn", OPTIONS) as store:
        append_ops(store, model, [("create", "b"), ("msg", "b", "mb", "late work")])
        grow(store, model, rng, 40)
        append_ops(store, model, [("turn_start", "b", "tb", "mb")])
        started = model.head
        grow(store, model, rng, 120, every=30)
        store.snapshot_now()
        report = collect(store, keep_only())
        assert report.floor == expected_floor(
            model, tmp_path / "reyn", store.snapshots.seqs, keep_only(), 0.0
        )
        assert 1 < report.floor <= started  # the turn's records stay for a restart's replay
        check_window(store, model, report.floor, sample=30)
        append_ops(store, model, [("step", "b", "tb", "done"), ("turn_end", "b", "tb")])
        store.snapshot_now()
        assert collect(store, keep_only()).floor > started


def test_coarse_points_stay_reachable_and_abandoned(tmp_path: Path) -> None:
    """A kept snapshot on an abandoned branch: readable, checkout fork-switches to it, rewind
    refuses it as abandoned, even after a reopen (its reset record is below the floor)."""
    root = tmp_path / "reyn"
    model = LogModel()
    with Store.open(root, OPTIONS) as store:
        marks = history(store, model)
        store.snapshot_now()
        report = collect(store, keep_only(snapshot_keep=100))
    floor = report.floor
    assert marks["r3"] < floor  # every reset record is below the floor
    with Store.open(root, OPTIONS) as store:
        gone = sorted(s for s in store.snapshots.seqs if s < floor and s not in model.active_set())
        assert gone, "the history has snapshots on abandoned branches below the floor"
        target = gone[-1]
        assert not store.lineage.is_active(target)
        with pytest.raises(errors.NotActive):
            store.rewind(target)
        mode, record = store.checkout(target)
        assert mode == "fork_switch" and record.seq == model.add_reset(target)
        assert summarize(store.state) == model.state(target)
        grow(store, model, random.Random(1), 10)
        check_window(store, model, floor)
        # The kept history now forks from `target`, below the floor: a collection that
        # keeps the new branch pins it, whatever the coarse window.
        store.snapshot_now()
        keep = model.head - record.seq + 1
        report = collect(store, keep_only(snapshot_keep=0, wal_keep_records=keep))
        assert report.floor <= record.seq and target in store.snapshots.seqs
        check_window(store, model, store.floor)
    with Store.open(root, OPTIONS) as store:
        check_window(store, model, store.floor)


def test_entry_snapshots_stay_pinned_when_nothing_more_goes(tmp_path: Path) -> None:
    """Regression: a second collection with no segment to drop removed the entry snapshot
    that kept history forks from, once it fell outside the coarse window."""
    root = tmp_path / "reyn"
    model = LogModel()
    with Store.open(root, OPTIONS) as store:
        grow(store, model, random.Random(2), 200)
        reset(store, model, 10, checkout=True)
        grow(store, model, random.Random(3), 3)
        store.snapshot_now()
        policy = keep_only(snapshot_keep=0)
        first = collect(store, policy)
        assert first.segments_dropped and 10 in store.snapshots.seqs
        second = collect(store, policy)
        assert second.segments_dropped == 0 and second.snapshots_dropped == 0
        assert 10 in store.snapshots.seqs
        check_window(store, model, first.floor)
    with Store.open(root, OPTIONS) as store:
        check_window(store, model, first.floor)


def test_an_entry_state_no_snapshot_can_hold_keeps_the_wal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A value msgpack cannot hold, acknowledged by an older version (the door now refuses
    it), in the state at the entry point: the collection keeps every segment and says why,
    instead of raising; once a later state holds no such value, collections go on."""
    root = tmp_path / "reyn"
    with Store.open(root, OPTIONS) as store:
        store.append([ev.AgentCreated(agent="old", options={"n": 2**70})])
        for i in range(60):
            store.append([ev.MessageReceived(agent="old", message_id=f"m{i}", text="x" * 40)])
        store.append([ev.AgentConfigured(agent="old", options={})])
        store.snapshot_now()
        before = segments(root)
        assert len(before) > 2
        report = collect(store, keep_only(snapshot_keep=100))
        assert (report.floor, report.segments_dropped, store.floor) == (1, 0, 1)
        assert segments(root) == before
        assert "gc keeps the WAL below seq" in caplog.text
        assert "agent 'old' holds an integer msgpack cannot hold" in caplog.text
        state = msgspec.to_builtins(store.state)
    with Store.open(root, OPTIONS) as store:
        assert msgspec.to_builtins(store.state) == state
        assert store.state_as_of(1).agents["old"].options == {"n": 2**70}
        for i in range(60):
            store.append([ev.MessageReceived(agent="old", message_id=f"n{i}", text="x" * 40)])
        store.snapshot_now()
        assert collect(store, keep_only(snapshot_keep=100)).segments_dropped > 0


def test_empty_last_segment_never_takes_the_tip_with_it(tmp_path: Path) -> None:
    """Regression: after a crash right after a rotation (an empty last segment), a snapshot at
    the tip made GC drop the segment holding it; the log then had no record and would not open."""
    root = tmp_path / "reyn"
    model = LogModel()
    with Store.open(root, OPTIONS) as store:
        grow(store, model, random.Random(4), 60)
        store.snapshot_now()
    segment_path(wal_dir(root), model.head + 1).touch()
    with Store.open(root, OPTIONS) as store:
        report = collect(store, keep_only())
        assert report.segments_dropped >= 1
        assert store.floor <= model.head
    with Store.open(root, OPTIONS) as store:
        check_window(store, model, report.floor)
        append_ops(store, model, [("msg", "a", "after", "after")])


def test_next_seq_never_goes_back(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    model = LogModel()
    with Store.open(root, OPTIONS) as store:
        grow(store, model, random.Random(5), 150)
        store.snapshot_now()
        report = collect(store, keep_only())
        head = model.head
        (e,) = store.append([to_event(("msg", "a", "n1", "one"))])
        assert e.seq == head + 1 == model.add(("msg", "a", "n1", "one"))
    with Store.open(root, OPTIONS) as store:
        (e,) = store.append([to_event(("msg", "a", "n2", "two"))])
        assert e.seq == model.add(("msg", "a", "n2", "two")) == head + 2
        grow(store, model, random.Random(8), 40)
        store.snapshot_now()
        assert collect(store, keep_only()).segments_dropped
        assert load_retained(root / "state").next_seq == model.head + 1
        assert len(segments(root)) == 1  # everything but the tip's segment went
    # Losing the newest segment would let a used seq be issued again: refused.
    shutil.copytree(root, tmp_path / "lost")
    for p in segments(tmp_path / "lost"):
        p.unlink()
    with pytest.raises(CorruptionError, match="newer segments are missing"):
        Store.open(tmp_path / "lost", OPTIONS)
    assert report.floor > 1


def test_log_above_its_retained_floor_is_refused(tmp_path: Path) -> None:
    """Segments gone without the retained file saying so: the lineage below is unknowable."""
    root = tmp_path / "reyn"
    model = LogModel()
    with Store.open(root, OPTIONS) as store:
        grow(store, model, random.Random(6), 100)
        reset(store, model, 5)
        grow(store, model, random.Random(6), 60)
    segments(root)[0].unlink()
    with pytest.raises(CorruptionError, match="retained-history file covers only"):
        Store.open(root, OPTIONS)


def test_unlink_error_mid_collection_loses_nothing(tmp_path: Path) -> None:
    """An I/O error while segments are unlinked: the collection fails; reopen is whole."""
    root = tmp_path / "reyn"
    model = LogModel()
    with Store.open(root, OPTIONS) as store:
        history(store, model)
        store.snapshot_now()
        planned = expected_floor(model, root, store.snapshots.seqs, keep_only(), 0.0)
    disk = SimDisk(tmp_path)
    disk.faults.append(Fault("unlink", 2))
    with fsops.installed(disk):
        store = Store.open(root, OPTIONS)
        with pytest.raises(OSError, match="simulated"):
            collect(store, keep_only())
        store.close()
        disk.release()
    left = disk_segments(root)
    assert 1 < left[0].first < planned  # one segment went, then the error
    with Store.open(root, OPTIONS) as store:
        assert store.floor == planned  # the retained file's floor: the trial had passed
        check_window(store, model, planned, sample=40)
        # The next collection, even under a policy that keeps everything, finishes the job:
        # the floor never moves down.
        report = collect(store, keep_only(wal_keep_records=10**6))
        assert report.floor == planned and report.segments_dropped == len(left) - len(
            [s for s in left if s.first >= planned]
        )
        check_window(store, model, planned, sample=40)
        assert disk_segments(root)[0].first == planned


# == crashes: SIGKILL at each GC crash point ===============================================

# Keeps the 61 newest records: the reset record (seq 151) stays, so the kept branch forks
# from seq 20, below the floor, and the collection writes an entry snapshot there.
CRASH_POLICY = {
    "wal_keep_records": 61,
    "snapshot_keep": 0,
    "horizon_checkpoints": 0,
    "horizon_age_s": 0.0,
}
CRASH_SCRIPT: list[list[object]] = [
    ["append", 150],
    ["snapshot"],
    ["checkout", 20],
    ["append", 60],
    ["snapshot"],
    ["gc", CRASH_POLICY],
]


@pytest.fixture(scope="module")
def planned_floor(tmp_path_factory: pytest.TempPathFactory) -> int:
    """The floor the crash script's collection reaches when nothing goes wrong."""
    run = run_worker(tmp_path_factory.mktemp("dry") / "reyn", CRASH_SCRIPT)
    assert run.returncode == 0 and run.lines[-1] == "done", run.lines[-3:]
    return int(run.lines[-2].split()[1])


@pytest.mark.parametrize(
    "point",
    [
        "gc.after_entry_snapshots",
        "gc.after_retained",
        "gc.after_unlink",  # the first segment is gone, the others not yet
        "gc.after_unlink:3",
    ],
)
def test_sigkill_during_collection(tmp_path: Path, point: str, planned_floor: int) -> None:
    root = tmp_path / "reyn"
    run = run_worker(root, CRASH_SCRIPT, crash_at=point)
    _killed(run)
    model = run.model()
    assert model.head == 150 + 1 + 60  # every append and the reset were acknowledged
    assert 20 < planned_floor <= 151
    assert not [ln for ln in run.lines if ln.startswith("gc ")]
    with Store.open(root, opts()) as store:
        # Before the retained file, nothing changed; from it on, its floor is the floor.
        floor = 1 if point == "gc.after_entry_snapshots" else planned_floor
        assert store.floor == floor
        assert load_retained(root / "state").floor == floor
        check_window(store, model, floor)
        # Collecting again finishes the job, with nothing inside the window lost.
        policy = msgspec.convert(CRASH_POLICY, RetentionPolicy)
        assert collect(store, policy).floor == planned_floor
        check_window(store, model, planned_floor, sample=60)
    with Store.open(root, opts()) as store:
        check_window(store, model, planned_floor, sample=60)
        assert 20 in store.snapshots.seqs  # the entry point the kept branch forks from


# == power loss: a cut at every step of a collection =======================================


def test_power_cut_at_every_step_of_a_collection(tmp_path: Path) -> None:
    """Whatever a disk keeps of an interrupted collection, reopen is clean and the window whole.

    Per cut, three images: nothing unsynced kept, everything kept, and a middle choice.
    """
    base = tmp_path / "base"
    base.mkdir()
    model = LogModel()
    policy = keep_only(snapshot_keep=0)
    with Store.open(base / "reyn", OPTIONS) as store:
        history(store, model)
        store.snapshot_now()
        planned = expected_floor(model, base / "reyn", store.snapshots.seqs, policy, 0.0)

    def run(cut: int | None) -> tuple[Path, SimDisk]:
        top = tmp_path / f"cut{cut}"
        return top, run_cut(base, top, cut, lambda store: collect(store, policy, 0.0), OPTIONS)

    top, disk = run(None)
    total = disk.steps
    shutil.rmtree(top)
    assert total >= 10
    choices: list[Callable[[int], int]] = [lambda n: 0, lambda n: n, lambda n: n // 2]
    floors = set()
    for cut in range(total + 1):
        top, disk = run(cut)
        for k, choose in enumerate(choices):
            image = tmp_path / f"image{cut}-{k}"
            materialise(disk.image(choose), image)
            with Store.open(image / "reyn", OPTIONS) as store:
                assert store.floor in (1, planned)
                floors.add(store.floor)
                check_window(store, model, store.floor, sample=12, seed=cut)
            shutil.rmtree(image)
        shutil.rmtree(top)
    assert {1, planned} <= floors  # cuts before and after the deletions were both seen


# == the state machine ======================================================================

SM_OPTIONS = opts(segment_bytes=1024, snapshot_min_bytes=1 << 30)


def _off_or(on: st.SearchStrategy[float]) -> st.SearchStrategy[float]:
    """Mostly off (0), so that collections often reach the default floor."""
    return st.sampled_from([True, True, False]).flatmap(lambda off: st.just(0) if off else on)


policies = st.builds(
    RetentionPolicy,
    wal_keep_records=_off_or(st.integers(1, 60)),
    wal_keep_age_s=_off_or(st.integers(1, 60).map(float)),
    wal_keep_bytes=_off_or(st.integers(1, 6000)),
    snapshot_keep=st.integers(0, 3),
    snapshot_keep_age_s=_off_or(st.integers(1, 60).map(float)),
    # expected_floor models the explicit horizons; the default one is checked purely.
    horizon_checkpoints=st.just(0),
    horizon_age_s=st.just(0.0),
)


def _no_sync(fd: int) -> None:
    pass


class GcMachine(RuleBasedStateMachine):
    """Appends, rewinds, checkouts, snapshots, reopen and crash-reopen, with `gc` under random
    policies; the window is checked against LogModel after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="reynd-gc-"))
        self.root = self.dir / "reyn"
        self.clock = Clock()
        self._saved = swap_clock(self.clock)
        # Durability is the crash and power-cut tests' business: no real syncs here.
        self._syncs = {name: vars(fsops)[name] for name in ("fsync", "fdatasync")}
        vars(fsops).update(dict.fromkeys(self._syncs, _no_sync))
        self.store = Store.open(self.root, SM_OPTIONS, clock=CLOCK)
        self.model = LogModel()
        self.rng = random.Random(0)
        self.floor = 1
        self.collections = 0

    def teardown(self) -> None:
        event(f"floor>1: {self.floor > 1}")
        event(f"collections={min(self.collections, 3)}")
        event(f"coarse={min(len(self.coarse()), 2)}")
        self.store.close()
        restore_clock(self._saved)
        vars(fsops).update(self._syncs)
        shutil.rmtree(self.dir, ignore_errors=True)

    def coarse(self) -> set[int]:
        return {s for s in self.store.snapshots.seqs if s < self.floor}

    def reachable(self, s: int) -> bool:
        return s == 0 or s >= self.floor or s in self.coarse()

    @initialize(n=st.integers(0, 80), snapshot=st.booleans())
    def seed_log(self, n: int, snapshot: bool) -> None:
        while self.model.head < n:
            append_ops(self.store, self.model, self.model.next_ops(self.rng))
        if snapshot and n:
            self.store.snapshot_now()

    @rule(agent=st.sampled_from(AGENTS), steps=st.integers(1, 8), snapshot=st.booleans())
    def append(self, agent: str, steps: int, snapshot: bool) -> None:
        for _ in range(steps):
            append_ops(self.store, self.model, self.model.next_ops(self.rng, agent))
        if snapshot:
            self.store.snapshot_now()

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.model.active_set() - {self.model.head})))
        if self.reachable(target):
            assert self.store.rewind(target).seq == self.model.add_reset(target)
        else:
            with pytest.raises(errors.BelowFloor, match=f"the floor is {self.floor}"):
                self.store.rewind(target)

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        below = sorted(self.coarse())
        pick = st.integers(0, self.model.head - 1)
        target = data.draw(st.one_of(pick, st.sampled_from(below)) if below else pick)
        if self.reachable(target):
            mode, record = self.store.checkout(target)
            assert mode == ("undo" if target in self.model.active_set() else "fork_switch")
            assert record.seq == self.model.add_reset(target)
        else:
            with pytest.raises(errors.BelowFloor, match=f"the floor is {self.floor}"):
                self.store.checkout(target)

    @precondition(lambda self: self.model.head > 0)
    @rule()
    def snapshot(self) -> None:
        self.store.snapshot_now()

    @rule(policy=policies)
    def gc(self, policy: RetentionPolicy) -> None:
        before = set(self.store.snapshots.seqs)
        now = self.clock.now
        want = expected_floor(self.model, self.root, before, policy, now)
        snaps = expected_snapshots(
            before,
            model=self.model,
            floor=want,
            policy=policy,
            times=self.store.snapshots.times(),
            now=now,
        )
        report = collect(self.store, policy, now)
        assert report.floor_before == self.floor and report.floor == want
        assert set(self.store.snapshots.seqs) == snaps
        self.floor = want
        self.collections += 1

    @rule(agent=st.sampled_from(AGENTS), steps=st.integers(5, 30), policy=policies)
    def grow_snapshot_gc(self, agent: str, steps: int, policy: RetentionPolicy) -> None:
        """The common case, made likely: history grows, a snapshot is cut, a collection runs."""
        self.append(agent, steps, True)
        self.gc(policy)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = Store.open(self.root, SM_OPTIONS, clock=CLOCK)

    @rule(cut=st.integers(1, 200))
    def crash_and_reopen(self, cut: int) -> None:
        """A torn unacknowledged record at the tail, then reopen."""
        self.store.close()
        frame = encode_frame(b'{"kind":"message.received","seq":%d}' % (self.model.head + 1))
        if segments(self.root):
            with segments(self.root)[-1].open("ab") as f:
                f.write(frame[: min(cut, len(frame) - 1)])
        self.store = Store.open(self.root, SM_OPTIONS, clock=CLOCK)

    @invariant()
    def window(self) -> None:
        check_window(self.store, self.model, self.floor, sample=10, seed=self.model.head)

    @invariant()
    def watermark(self) -> None:
        retained = load_retained(self.root / "state")
        assert retained.next_seq <= self.model.head + 1
        assert retained.floor == self.floor
        assert self.store._next_seq == self.model.head + 1  # the next append gets head + 1


GcMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_gc_state_machine = GcMachine.TestCase


# -- the default horizon and its budget (pure) -----------------------------------------------

_segments = st.lists(st.integers(1, 5000), min_size=1, max_size=12).map(
    lambda sizes: [
        SegmentInfo(10 * i + 1, 10 * i + 10, size, float(10 * i + 10))
        for i, size in enumerate(sizes)
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    segs=_segments,
    required=st.integers(1, 130),
    checkpoint_floor=st.none() | st.integers(1, 130),
    horizon_age=st.sampled_from([0.0, 15.0, 55.0]),
    budget=st.none() | st.integers(0, 60000),
    now=st.floats(0, 200),
)
def test_the_budget_alone_forces_the_default_horizon(
    segs: list[SegmentInfo],
    *,
    required: int,
    checkpoint_floor: int | None,
    horizon_age: float,
    budget: int | None,
    now: float,
) -> None:
    """Against the same plan without a horizon: the horizon only keeps more; what it would
    keep goes only past the budget, and exactly that is reported (as far as, and how much)."""
    head = segs[-1].last_seq
    policy = RetentionPolicy(horizon_checkpoints=1, horizon_age_s=horizon_age, budget_bytes=0)
    base = plan_wal(segs, head, required, without_horizon(policy), now)
    plan = plan_wal(segs, head, required, policy, now, horizon=Horizon(checkpoint_floor, budget))
    unlimited = plan_wal(segs, head, required, policy, now, horizon=Horizon(checkpoint_floor))
    assert unlimited.forced is None and unlimited.drop <= base.drop
    assert unlimited.drop <= plan.drop <= base.drop  # a budget gives way, never past the rest
    forced = plan.forced
    if plan.drop == unlimited.drop:
        assert forced is None
        return
    event("budget forced")
    assert budget is not None and forced is not None and forced.budget == budget
    gone = segs[unlimited.drop : plan.drop]
    assert forced.through_seq == gone[-1].last_seq == segs[plan.drop - 1].last_seq
    assert (forced.bytes, forced.segments) == (sum(s.size for s in gone), len(gone))
    # It stopped as soon as the WAL left fits, or at what no budget can force.
    left = sum(s.size for s in segs[plan.drop :])
    assert left <= budget or plan.drop == base.drop
    assert sum(s.size for s in segs[plan.drop - 1 :]) > budget


def test_horizon_budget_and_legacy_policies() -> None:
    gib = 1 << 30
    policy = RetentionPolicy()
    assert policy.horizon_checkpoints == 1000 and policy.horizon_age_s == 7 * DAY
    assert horizon_budget(policy, None, 0) == 10 * gib  # free space unknown: the size
    assert horizon_budget(policy, 4 * gib, 2 * gib) == 3 * gib  # half of what the WAL could have
    assert horizon_budget(policy, 100 * gib, 0) == 10 * gib
    assert horizon_budget(RetentionPolicy(budget_bytes=0, budget_free_pct=0), 0, 0) is None
    assert not legacy([]) and not legacy(["gc_interval_s", "budget_bytes"])
    assert legacy(["snapshot_keep"]) and legacy(["wal_keep_records", "gc_interval_s"])
    assert not legacy(["snapshot_keep", "horizon_age_s"])
    assert without_horizon(policy) == RetentionPolicy(horizon_checkpoints=0, horizon_age_s=0)

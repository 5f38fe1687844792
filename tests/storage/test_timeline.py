"""The time index (core/timeline.py) against a brute-force replay of random histories.

A history is appends (plain records and checkpoints), rewinds and checkouts,
each at a time that may step backwards (an NTP step). The model keeps every
record's parent pointer and replays: where the tip stood at T is found by
walking from the newest record at or before T down its parents to the first
checkpoint or reset record; the newest active checkpoint by scanning the
active lineage. The index must agree, built record by record (the commit
path) and built at once (a restart), with and without a collected floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.lineage import Lineage
from reynd.core.timeline import Timeline
from reynd.protocol.timespec import TimeSpecError, format_time, resolve_time


@dataclass
class Model:
    """A log by brute force: per seq its time, its parent, and what kind it is."""

    ts: list[float] = field(default_factory=lambda: [-math.inf])  # seq 0: genesis
    parent: list[int] = field(default_factory=lambda: [0])
    checkpoint: list[bool] = field(default_factory=lambda: [False])
    target: dict[int, int] = field(default_factory=dict)

    @property
    def head(self) -> int:
        return len(self.ts) - 1

    def append(self, ts: float, *, checkpoint: bool = False, target: int | None = None) -> None:
        seq = len(self.ts)
        self.ts.append(ts)
        self.parent.append(seq - 1 if target is None else target)
        self.checkpoint.append(checkpoint)
        if target is not None:
            self.target[seq] = target

    def lineage(self, seq: int) -> list[int]:
        out = [seq]
        while out[-1]:
            out.append(self.parent[out[-1]])
        return out

    def effective(self, seq: int) -> float:
        """Never before an earlier checkpoint's or reset's time (a plain record has
        the time of the newest one at or below it: it lands nowhere itself)."""
        return max((self.ts[s] for s in range(seq + 1) if self.is_position(s)), default=-math.inf)

    def newest_record_at(self, t: float) -> int:
        return max((s for s in range(self.head + 1) if self.effective(s) <= t), default=0)

    def is_position(self, seq: int) -> bool:
        return self.checkpoint[seq] or seq in self.target

    def tip_at(self, t: float, floor: int) -> int | None:
        """Walk down from the newest record at or before t to the first checkpoint or reset."""
        seq = self.newest_record_at(t)
        while seq and not self.is_position(seq):
            seq = self.parent[seq]
        if seq == 0:
            return 0 if floor <= 1 else None
        if seq < floor:
            return None
        return self.target.get(seq, seq)

    def checkpoint_at(self, t: float, floor: int) -> int | None:
        kept = [
            s
            for s in self.lineage(self.head)
            if s >= max(floor, 1) and self.checkpoint[s] and self.effective(s) <= t
        ]
        if kept:
            return max(kept)
        return 0 if floor <= 1 else None  # genesis, while nothing was collected


OPS = st.lists(
    st.tuples(
        st.sampled_from(["plain", "checkpoint", "checkpoint", "rewind", "checkout"]),
        st.integers(0, 10_000),  # which seq a move picks
        st.floats(-30, 60, allow_nan=False),  # the clock's step since the last record
    ),
    max_size=60,
)


def _play(ops: list[tuple[str, int, float]]) -> tuple[Model, Lineage, Timeline]:
    model, lineage, timeline = Model(), Lineage(), Timeline()
    clock = 1000.0
    for op, pick, step in ops:
        clock += step
        if op in ("rewind", "checkout") and model.head > 0:
            if op == "rewind":
                choices = [s for s in model.lineage(model.head) if s < model.head]
            else:
                choices = list(range(model.head))
            target = sorted(choices)[pick % len(choices)]
            model.append(clock, target=target)
            lineage.observe(model.head, target)
            timeline.add(model.head, clock, target)
        else:
            checkpoint = op != "plain"
            model.append(clock, checkpoint=checkpoint)
            lineage.observe(model.head)
            if checkpoint:
                timeline.add(model.head, clock)
    return model, lineage, timeline


def _cut(lineage: Lineage, seq: int) -> list[tuple[int, int]]:
    """The active lineage at or below `seq`, by the plain walk from the tip."""
    out = []
    for lo, hi in lineage.iter_intervals(lineage.head):
        if lo <= seq:
            out.append((lo, min(hi, seq)))
    return out


def _rebuilt(model: Model) -> Timeline:
    """The index a restart builds: generations' times and resets' times, at once."""
    gens = [s for s in range(1, model.head + 1) if model.checkpoint[s]]
    resets = [(s, t, model.ts[s]) for s, t in model.target.items()]
    return Timeline.build(gens, [model.ts[s] for s in gens], resets)


def _probe_times(model: Model) -> list[float]:
    times = sorted(set(model.ts[1:]))
    return [-math.inf, 0.0, *times, *(t + 0.5 for t in times), *(t - 0.5 for t in times)]


@settings(max_examples=300, deadline=None)
@given(OPS, st.integers(0, 40))
def test_lookups_match_a_replay(ops: list[tuple[str, int, float]], floor_pick: int) -> None:
    model, lineage, live = _play(ops)
    floor = min(floor_pick, model.head) if floor_pick % 3 == 0 else 0
    for timeline in (live, _rebuilt(model)):
        timeline.drop_below(floor)
        for t in _probe_times(model):
            assert timeline.tip_at(t) == model.tip_at(t, floor), t
            want = model.checkpoint_at(t, floor)
            assert timeline.checkpoint_at(t, lineage.active_below) == want, t
            # Any lineage given from the top down answers the same (iter_intervals of the tip).
            assert timeline.checkpoint_at(t, lambda s: _cut(lineage, s)) == want, t


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_seq_bounds_select_by_effective_time(ops: list[tuple[str, int, float]]) -> None:
    model, _, timeline = _play(ops)
    gens = [s for s in range(1, model.head + 1) if model.checkpoint[s]]
    times = _probe_times(model)[1:]
    for after in [None, *times[::3]]:
        for before in [None, *times[1::3]]:
            at_least, below = timeline.seq_bounds(after, before)
            got = [s for s in gens if s >= at_least and (below is None or s < below)]
            want = [
                s
                for s in gens
                if (after is None or model.effective(s) > after)
                and (before is None or model.effective(s) < before)
            ]
            assert got == want


def test_a_clock_stepped_back_keeps_the_newest_earlier_time() -> None:
    # 10:00, 10:05, then the clock steps back to 09:58 for two checkpoints.
    timeline = Timeline()
    for seq, ts in [(1, 600.0), (2, 900.0), (3, 480.0), (4, 540.0), (5, 960.0)]:
        timeline.add(seq, ts)

    def intervals(seq: int) -> list[tuple[int, int]]:
        return [(1, min(5, seq))]

    # Records 3 and 4 count as made at 900 (the time of record 2): "at 09:59" is before them.
    assert timeline.checkpoint_at(599.0, intervals) == 0
    assert timeline.checkpoint_at(600.0, intervals) == 1
    assert timeline.checkpoint_at(899.0, intervals) == 1
    assert timeline.checkpoint_at(900.0, intervals) == 4
    assert timeline.tip_at(950.0) == 4


def test_collected_history_answers_none_not_genesis() -> None:
    timeline = Timeline()
    timeline.add(5, 100.0)
    timeline.add(9, 200.0, target=5)
    assert timeline.tip_at(150.0) == 5
    assert timeline.tip_at(250.0) == 5  # a reset record's state is its target's
    assert timeline.tip_at(50.0) == 0
    timeline.drop_below(9)
    assert timeline.tip_at(150.0) is None
    assert timeline.oldest() == (9, 200.0)


# -- times as the protocol takes them ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (1767225600, 1767225600.0),
        (1.5, 1.5),
        ("1767225600.25", 1767225600.25),
        ("90s", 10_000.0 - 90),
        ("10m", 10_000.0 - 600),
        ("2h", 10_000.0 - 7200),
        ("1d", 10_000.0 - 86400),
        ("1h30m", 10_000.0 - 5400),
        ("2026-12-06T00:00:00Z", 1796515200.0),
        ("2026-12-06T01:00:00+01:00", 1796515200.0),
    ],
)
def test_times_resolve(text: float | str, want: float) -> None:
    assert resolve_time(text, 10_000.0) == want


@pytest.mark.parametrize("text", ["", "10", "10 minutes", "yesterday", "1e400", "nan", "10x"])
def test_bad_times_are_refused_naming_the_forms(text: str) -> None:
    if text == "10":
        assert resolve_time(text, 0.0) == 10.0  # digits alone: Unix seconds
        return
    with pytest.raises(TimeSpecError, match="duration ago"):
        resolve_time(text, 0.0)


def test_a_time_of_day_is_the_last_such_moment() -> None:
    now = 1796515200.0 + 10 * 3600  # 2026-12-06T10:00:00Z
    assert resolve_time("09:30Z", now) == now - 1800
    assert resolve_time("10:30+00:00", now) == now - 1800 + 3600 - 86400  # yesterday
    assert format_time(1e300).endswith("(Unix seconds)")  # no calendar holds it


@given(st.floats(0, 1e6), st.sampled_from("smhd"), st.floats(0, 2e9))
def test_durations_count_back_from_now(n: float, unit: str, now: float) -> None:
    text = f"{n:.3f}{unit}"
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    assert resolve_time(text, now) == pytest.approx(now - float(f"{n:.3f}") * scale)

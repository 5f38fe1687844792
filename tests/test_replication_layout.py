"""The pure rules of reynd/replication/layout.py: key names, cover, the restore plan."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.replication import layout
from reynd.replication.layout import Claim, GapError, WalObject, cover, plan_restore


def test_keys_round_trip_and_sort_by_seq() -> None:
    obj = WalObject(7, 12, 3456)
    assert layout.parse_wal_key(obj.key) == obj
    assert layout.parse_snapshot_key(layout.snapshot_key(7, 99)) == (7, 99)
    assert layout.parse_claim_key(layout.claim_key(12)) == 12
    keys = [WalObject(1, a, a + 5).key for a in (1, 9, 10, 100, 1000)]
    assert sorted(keys) == keys
    assert layout.parse_retained_key(layout.retained_key(3, 40)) == (3, 40)
    assert layout.parse_shipped_key(layout.shipped_key(3, 41)) == (3, 41)
    for bad in ("00000001/wal/1-2.jsonl", "generations/7.json", "x/retained", "00000001/wal/"):
        assert layout.parse_wal_key(bad) is None and layout.parse_claim_key(bad) is None


def _covers(objs: list[WalObject], lo: int, hi: int) -> bool:
    held: set[int] = set()
    for o in objs:
        held.update(range(o.first, o.last + 1))
    return all(s in held for s in range(lo, hi + 1))


ranges = st.lists(
    st.tuples(st.integers(1, 60), st.integers(0, 15)).map(
        lambda t: WalObject(1, t[0], t[0] + t[1])
    ),
    max_size=12,
)


@settings(max_examples=500)
@given(objs=ranges, lo=st.integers(1, 60), span=st.integers(0, 30))
def test_cover_is_contiguous_or_names_the_gap(objs: list[WalObject], lo: int, span: int) -> None:
    hi = lo + span
    try:
        chosen = cover(objs, lo, hi)
    except GapError as exc:
        assert not _covers(objs, lo, hi)
        m = re.match(r"seqs (\d+)\.\.(\d+) are missing", str(exc))
        assert m is not None, exc
        a, b = int(m[1]), int(m[2])
        assert lo <= a <= b <= hi and _covers(objs, lo, a - 1)  # the first seq missing...
        assert all(not _covers(objs, s, s) for s in range(a, b + 1))  # ...the whole range...
        assert b == hi or _covers(objs, b + 1, b + 1)  # ...up to where an object starts
        return
    assert _covers(objs, lo, hi)
    need = lo
    for o in chosen:
        assert o in objs and o.first <= need <= o.last  # each extends the run, no hole
        need = o.last + 1
    assert need > hi
    assert len(chosen) <= len({(o.first, o.last) for o in objs})


@st.composite
def replicas(
    draw: st.DrawFn,
) -> tuple[dict[int, Claim], list[WalObject], list[tuple[int, int]], int]:
    """Generations of one history 1..N: each continues the last from where it shipped
    (or starts over from the floor), ships chunks, maybe a whole-segment object, and a
    superseded writer may keep shipping past its successor's base; remote retention may
    move the floor (objects wholly below it deleted, a retained file naming it)."""
    claims: dict[int, Claim] = {}
    objs: list[WalObject] = []
    retained: list[tuple[int, int]] = []
    shipped = 0
    gens = draw(st.integers(1, 4))
    for gen in range(1, gens + 1):
        restart = gen == 1 or draw(st.booleans())
        base = 1 if restart else shipped + 1
        claims[gen] = Claim(
            generation=gen,
            store_id="s",
            host="h",
            pid=1,
            created=0.0,
            base_seq=base,
            continues=None if restart else gen - 1,
        )
        seq = base
        end = base - 1 + draw(st.integers(0, 20))
        chunks = []
        while seq <= end:
            last = min(end, seq + draw(st.integers(0, 4)))
            chunks.append(WalObject(gen, seq, last))
            seq = last + 1
        objs += chunks
        if len(chunks) > 1 and draw(st.booleans()):  # a compacted segment
            objs.append(WalObject(gen, chunks[0].first, chunks[-1].last))
        shipped = end
        if draw(st.booleans()) and end >= claims[1].base_seq:  # remote retention: a new floor
            floor = draw(st.integers(claims[1].base_seq, end))
            objs = [o for o in objs if o.last >= floor]
            retained.append((gen, floor))
        if gen > 1 and draw(st.booleans()):  # the superseded writer shipped on
            prev = (o.last for o in objs if o.generation == gen - 1)
            prev_end = max(prev, default=claims[gen - 1].base_seq - 1)
            objs.append(WalObject(gen - 1, prev_end + 1, prev_end + 3))
    return claims, objs, retained, shipped


@settings(max_examples=500)
@given(replica=replicas(), data=st.data())
def test_a_plan_takes_every_seq_once_from_its_owner(
    replica: tuple[dict[int, Claim], list[WalObject], list[tuple[int, int]], int],
    data: st.DataObject,
) -> None:
    claims, objs, retained, end = replica
    newest = claims[max(claims)]
    root = newest
    chain = {root.generation}
    while root.continues is not None:
        root = claims[root.continues]
        chain.add(root.generation)
    floors = [f for g, f in retained if g in chain and f >= root.base_seq]
    floor = max(floors, default=root.base_seq)
    if end < floor:
        with pytest.raises(GapError):
            plan_restore(claims, objs, [], retained)
        return
    to_seq = data.draw(st.none() | st.integers(floor, end))
    plan = plan_restore(claims, objs, [(g, 3) for g in claims], retained, to_seq)
    assert plan.head == (end if to_seq is None else to_seq)
    assert plan.floor == floor
    if floors:  # the retained file naming that floor, from a generation of the chain
        assert plan.retained is not None and plan.retained[1] == floor
        assert plan.retained in retained and plan.retained[0] in chain
    else:
        assert plan.retained is None
    upper: dict[int, int] = {}  # the last seq each generation of the chain owns
    claim, limit = newest, plan.head
    while True:
        upper[claim.generation] = limit
        if claim.continues is None:
            break
        claim, limit = claims[claim.continues], claim.base_seq - 1
    taken: list[int] = []
    for piece in plan.wal:
        gen = piece.obj.generation
        assert piece.obj.first <= piece.lo <= piece.hi <= piece.obj.last
        assert claims[gen].base_seq <= piece.lo and piece.hi <= upper[gen]
        taken += range(piece.lo, piece.hi + 1)
    assert taken == list(range(plan.floor, plan.head + 1))
    assert all(seq <= plan.head for _, seq in plan.snapshots)


def test_to_seq_outside_the_replica_is_refused_with_its_range() -> None:
    claims = {1: Claim(generation=1, store_id="s", host="h", pid=1, created=0, base_seq=1)}
    objs = [WalObject(1, 1, 10)]
    with pytest.raises(ValueError, match=r"seq 11 is not in the replica \(it holds seqs 1..10\)"):
        plan_restore(claims, objs, [], [], 11)
    with pytest.raises(ValueError, match=r"seq 3 is not in the replica \(it holds seqs 5..10\)"):
        plan_restore(claims, objs, [], [(1, 5)], 3)
    with pytest.raises(GapError, match="no generation"):
        plan_restore({}, objs, [], [])


def test_a_superseded_writer_past_its_successor_base_is_not_mixed_in() -> None:
    """Generation 1 went on after generation 2 took over from seq 6: its snapshot at 19
    and its retained file at 20 describe another history than generation 2's."""
    claims = {
        1: Claim(generation=1, store_id="a", host="h", pid=1, created=0, base_seq=1),
        2: Claim(generation=2, store_id="b", host="h", pid=2, created=0, base_seq=6, continues=1),
    }
    objs = [WalObject(1, 1, 5), WalObject(1, 6, 25), WalObject(2, 6, 22)]
    plan = plan_restore(claims, objs, [(1, 3), (1, 19), (2, 10)], [(1, 20)])
    assert plan.snapshots == ((1, 3), (2, 10))
    assert plan.floor == 1 and plan.retained is None
    assert [(p.obj.generation, p.lo, p.hi) for p in plan.wal] == [(1, 1, 5), (2, 6, 22)]


def test_a_gap_below_the_last_shipped_seq_is_named_unless_to_seq_stops_before_it() -> None:
    """The newest generation must hold every seq up to what it says it shipped: its
    `shipped` markers and its objects' names (issue 22: a restore was silently short)."""
    claims = {1: Claim(generation=1, store_id="s", host="h", pid=1, created=0, base_seq=1)}
    middle_gone = [WalObject(1, 1, 10), WalObject(1, 21, 30)]
    with pytest.raises(GapError, match=r"seqs 11..20 are missing .* last shipped seq is 30"):
        plan_restore(claims, middle_gone, [], [])
    with pytest.raises(GapError, match=r"seqs 11..20 are missing"):
        plan_restore(claims, middle_gone, [], [], 15)
    assert plan_restore(claims, middle_gone, [], [], 10).head == 10
    # The newest object gone: only the marker says how far it went.
    last_gone = [WalObject(1, 1, 10)]
    with pytest.raises(GapError, match=r"seqs 11..25 are missing .* last shipped seq is 25"):
        plan_restore(claims, last_gone, [], [], shipped=[(1, 25)])
    plan = plan_restore(claims, last_gone, [], [], shipped=[(1, 25)], allow_gap=True)
    assert (plan.head, plan.shipped, plan.gap) == (10, 25, (11, 25))
    whole = plan_restore(claims, [*last_gone, WalObject(1, 11, 25)], [], [], shipped=[(1, 25)])
    assert (whole.head, whole.shipped, whole.gap) == (25, 25, None)
    # An older generation's marker says nothing about the newest one.
    claims[2] = Claim(
        generation=2, store_id="s", host="h", pid=2, created=0, base_seq=11, continues=1
    )
    assert plan_restore(claims, last_gone, [], [], shipped=[(1, 25)]).head == 10


def test_a_stray_root_claim_is_named_with_what_the_others_hold() -> None:
    claims = {
        1: Claim(generation=1, store_id="s", host="h", pid=1, created=0, base_seq=1),
        2: Claim(generation=2, store_id="x", host="other", pid=9, created=0, base_seq=1),
    }
    with pytest.raises(GapError) as info:
        plan_restore(claims, [WalObject(1, 1, 10)], [], [])
    text = str(info.value)
    assert "generation 2 (host other, pid 9, base seq 1) continues no generation" in text
    assert "generation 1 holds seqs 1..10" in text
    assert "remove the claim generations/00000002.json" in text
    with pytest.raises(GapError, match="generation 1, the newest, holds no WAL object yet"):
        plan_restore({1: claims[1]}, [], [], [])

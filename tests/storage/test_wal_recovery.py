"""Recovery from damaged files: torn tails are cut, everything else is a clean, named error.

Each test damages a copy of a pristine state directory written by a real
Store, then reopens it. docs/durability.md rules 2, 7, 8, 9 and 11.
"""

from __future__ import annotations

import random
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from helpers import (
    LogModel,
    build_log,
    flip,
    opts,
    read_all,
    record_spans,
    segments,
    snap_dir,
    summarize,
    to_event,
    wal_dir,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reynd.protocol import events as ev
from reynd.storage.errors import CorruptionError, UnsupportedVersion
from reynd.storage.extent import ExtentLost
from reynd.storage.framing import encode_frame
from reynd.storage.snapshots import SNAPSHOT_VERSION
from reynd.storage.store import AcceptLoss, Store
from reynd.storage.verify import verify

N = 60  # records in the pristine log: three segments of 4 KiB


@dataclass(frozen=True)
class Pristine:
    root: Path
    model: LogModel
    events: list[ev.Event]


def _make(tmp_path_factory: pytest.TempPathFactory, name: str, snapshot_every: int) -> Pristine:
    root = tmp_path_factory.mktemp(name) / "reyn"
    model = build_log(root, N, seed=7, snapshot_every=snapshot_every)
    with Store.open(root, opts()) as store:
        events = read_all(store)
    assert len(events) == N
    assert len(segments(root)) == 3
    return Pristine(root, model, events)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """A log of N records in three segments, no snapshots."""
    return _make(tmp_path_factory, "pristine", snapshot_every=0)


@pytest.fixture(scope="module")
def pristine_snaps(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """The same log with snapshots at 20, 40 and 60."""
    return _make(tmp_path_factory, "pristine-snaps", snapshot_every=20)


def _copy(src: Pristine, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src.root, dst)
    return dst


def _check_prefix(store: Store, p: Pristine, head: int) -> None:
    """The store holds exactly the first `head` records, and the state as of them."""
    assert store.head == head
    assert read_all(store) == p.events[:head]
    assert summarize(store.state) == p.model.state(head)


# -- torn tails ----------------------------------------------------------------------------


def test_torn_tail_at_every_byte_offset_of_the_last_record(
    pristine: Pristine, tmp_path: Path
) -> None:
    last = segments(pristine.root)[-1].name
    start, end = record_spans(pristine.root / "state" / "wal" / last)[-1]
    original = (wal_dir(pristine.root) / last).read_bytes()
    for length in range(start, end):
        root = _copy(pristine, tmp_path / "r")
        seg = wal_dir(root) / last
        seg.write_bytes(original[:length])
        with Store.open(root, opts()) as store:
            _check_prefix(store, pristine, N - 1)
            rep = store.recovery
            if length == start:
                assert rep.torn_saved_to is None  # a clean end: nothing to cut
            else:
                assert (rep.torn_path, rep.torn_offset) == (seg, start)
                assert rep.torn_bytes == length - start
                assert rep.torn_saved_to is not None
                assert rep.torn_saved_to.parent == wal_dir(root) / "torn"
                assert rep.torn_saved_to.read_bytes() == original[start:length]
            assert seg.stat().st_size == start  # cut on disk, not only skipped
            # The torn record was never acknowledged: its seq is issued again.
            (again,) = store.append([to_event(("msg", "a", "again", "again"))])
            assert again.seq == N
        with Store.open(root, opts()) as store:
            assert store.recovery.torn_saved_to is None
            assert store.head == N
            assert read_all(store)[:-1] == pristine.events[: N - 1]


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\0" * 4096, id="zero-block-after-last-record"),
        pytest.param(b"\0" * 3, id="few-zeros"),
        pytest.param(bytes(random.Random(1).randrange(256) for _ in range(700)), id="garbage"),
        pytest.param(b'{"crc":"00000000","len":5,"rec":{}}\n', id="bad-crc-last-line"),
        pytest.param(b'{"crc":"', id="header-prefix"),
        pytest.param(b"\n\n\n", id="newlines"),
    ],
)
def test_damaged_tail_after_the_last_record_is_cut(
    pristine: Pristine, tmp_path: Path, tail: bytes
) -> None:
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[-1]
    size = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(tail)
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine, N)
        assert store.recovery.torn_bytes == len(tail)
        assert seg.stat().st_size == size


def test_zeroed_block_over_the_last_record_is_cut(pristine: Pristine, tmp_path: Path) -> None:
    """Power loss: the file grew but the last record's block reads back as zeros."""
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[-1]
    start, end = record_spans(seg)[-1]
    data = bytearray(seg.read_bytes())
    data[start + 10 : end] = b"\0" * (end - start - 10)
    seg.write_bytes(bytes(data))
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine, N - 1)


def test_torn_first_record_of_a_new_segment(pristine: Pristine, tmp_path: Path) -> None:
    """A crash right after rotation: the last segment holds only a torn record."""
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[-1]
    first = int(seg.stem)
    seg.write_bytes(seg.read_bytes()[:40])
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine, first - 1)
        (e,) = store.append([to_event(("msg", "a", "x", "x"))])
        assert e.seq == first
    with Store.open(root, opts()) as store:
        assert store.head == first


# -- corruption: anything but the tail -----------------------------------------------------


def _expect_corruption(root: Path, path: Path, offset: int, seq: int) -> CorruptionError:
    before = {p: p.read_bytes() for p in segments(root)}
    with pytest.raises(CorruptionError) as info:
        Store.open(root, opts())
    err = info.value
    assert (err.path, err.offset, err.seq) == (path, offset, seq)
    msg = str(err)
    assert str(path) in msg
    assert f"at byte {offset}" in msg
    assert f"(seq {seq})" in msg
    assert "reynd repair" in msg
    # Nothing was cut or rewritten, and nothing was set aside as torn.
    assert {p: p.read_bytes() for p in segments(root)} == before
    assert not (wal_dir(root) / "torn").exists()
    return err


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_flipped_byte_anywhere_in_a_middle_record_is_named(
    pristine: Pristine, tmp_path: Path, mask: int
) -> None:
    """Every byte of one record in the middle of the last segment."""
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[-1]
    spans = record_spans(seg)
    k = len(spans) // 2
    start, end = spans[k]
    seq = int(seg.stem) + k
    original = seg.read_bytes()
    for off in range(start, end):
        flip(seg, off, mask)
        _expect_corruption(root, seg, start, seq)
        seg.write_bytes(original)
    with Store.open(root, opts()) as store:  # and the undamaged copy still opens
        _check_prefix(store, pristine, N)


def test_flipped_byte_in_every_record_of_an_older_segment(
    pristine: Pristine, tmp_path: Path
) -> None:
    """Including its last record, at that segment's end: only the last segment has a tail."""
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[0]
    original = seg.read_bytes()
    for k, (start, end) in enumerate(record_spans(seg)):
        flip(seg, (start + end) // 2)
        _expect_corruption(root, seg, start, 1 + k)
        seg.write_bytes(original)


def _line(p: Pristine, seq: int) -> tuple[Path, int, int]:
    """(segment, start, end) of record `seq` in the pristine copy's layout."""
    for seg in segments(p.root):
        first = int(seg.stem)
        spans = record_spans(seg)
        if first <= seq < first + len(spans):
            start, end = spans[seq - first]
            return seg, start, end
    raise KeyError(seq)


def _reframe(event: ev.Event, **changes: object) -> bytes:
    changed: ev.Event = msgspec.structs.replace(event, **changes)
    return encode_frame(msgspec.json.encode(changed))


def _edit(root: Path, seg_name: str, fn: Callable[[bytes], bytes]) -> Path:
    path = wal_dir(root) / seg_name
    path.write_bytes(fn(path.read_bytes()))
    return path


@dataclass(frozen=True)
class Case:
    """A corruption: how to damage the pristine copy, and what the error must name."""

    segment: int  # index into segments()
    damage: Callable[[Pristine, bytes], bytes]
    offset: Callable[[Pristine], int]  # where the error points
    seq: Callable[[Pristine], int]  # the seq it names


MID = N - 2  # a record in the middle of the last segment


def _mid(p: Pristine) -> tuple[Path, int, int]:
    return _line(p, MID)


def _first_of(p: Pristine, segment: int) -> int:
    return int(segments(p.root)[segment].stem)


def _first_seg_last(p: Pristine) -> tuple[Path, int, int]:
    return _line(p, _first_of(p, 1) - 1)


CASES: dict[str, Case] = {
    "duplicated-middle-record": Case(
        2,
        lambda p, d: d[: _mid(p)[2]] + d[_mid(p)[1] : _mid(p)[2]] + d[_mid(p)[2] :],
        lambda p: _mid(p)[2],
        lambda p: MID + 1,
    ),
    "duplicated-last-record": Case(
        2,
        lambda p, d: d + d[_line(p, N)[1] : _line(p, N)[2]],
        lambda p: _line(p, N)[2],
        lambda p: N + 1,
    ),
    "seq-gap": Case(
        2,
        lambda p, d: d[: _mid(p)[1]] + _reframe(p.events[MID - 1], seq=MID + 2) + d[_mid(p)[2] :],
        lambda p: _mid(p)[1],
        lambda p: MID,
    ),
    "seq-step-back": Case(
        2,
        lambda p, d: d[: _mid(p)[1]] + _reframe(p.events[MID - 1], seq=MID - 1) + d[_mid(p)[2] :],
        lambda p: _mid(p)[1],
        lambda p: MID,
    ),
    "last-record-with-wrong-seq": Case(
        2,
        lambda p, d: d[: _line(p, N)[1]] + _reframe(p.events[N - 1], seq=N + 5),
        lambda p: _line(p, N)[1],
        lambda p: N,
    ),
    "record-deleted-in-the-middle": Case(
        2, lambda p, d: d[: _mid(p)[1]] + d[_mid(p)[2] :], lambda p: _mid(p)[1], lambda p: MID
    ),
    "zeroed-block-in-the-middle": Case(
        2,
        lambda p, d: d[: _mid(p)[1]] + b"\0" * 64 + d[_mid(p)[1] + 64 :],
        lambda p: _mid(p)[1],
        lambda p: MID,
    ),
    "missing-newline-between-records": Case(
        2,
        lambda p, d: d[: _mid(p)[2] - 1] + d[_mid(p)[2] :],
        lambda p: _mid(p)[1],
        lambda p: MID,
    ),
    "valid-checksum-but-undecodable": Case(
        2,
        lambda p, d: (
            d[: _mid(p)[1]] + encode_frame(b'{"kind":"no.such","seq":%d}' % MID) + d[_mid(p)[2] :]
        ),
        lambda p: _mid(p)[1],
        lambda p: MID,
    ),
    "older-segment-torn-at-its-end": Case(
        0,
        lambda p, d: d[: _first_seg_last(p)[2] - 5],
        lambda p: _first_seg_last(p)[1],
        lambda p: _first_of(p, 1) - 1,
    ),
    "older-segment-zero-tail": Case(
        0,
        lambda p, d: d + b"\0" * 100,
        lambda p: _first_seg_last(p)[2],
        lambda p: _first_of(p, 1),
    ),
    "older-segment-lost-its-last-record": Case(
        1,
        lambda p, d: d[: _line(p, _first_of(p, 2) - 1)[1]],
        lambda p: 0,
        lambda p: _first_of(p, 2) - 1,  # the next segment's start, one too far
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_corruption_table(pristine: Pristine, tmp_path: Path, name: str) -> None:
    case = CASES[name]
    root = _copy(pristine, tmp_path / "r")
    seg_name = segments(root)[case.segment].name
    _edit(root, seg_name, lambda d: case.damage(pristine, d))
    # Where the error points: the segment that failed to line up with the log.
    where = (
        segments(root)[case.segment + 1]
        if name.endswith("lost-its-last-record")
        else (wal_dir(root) / seg_name)
    )
    _expect_corruption(root, where, case.offset(pristine), case.seq(pristine))


def test_missing_middle_segment_is_corruption(pristine: Pristine, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path / "r")
    segs = segments(root)
    segs[1].unlink()
    _expect_corruption(root, segs[2], 0, int(segs[1].stem))


def test_failed_open_releases_the_lock(pristine: Pristine, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path / "r")
    flip(segments(root)[0], 100)
    for _ in range(2):
        with pytest.raises(CorruptionError):
            Store.open(root, opts())


# -- snapshots -----------------------------------------------------------------------------


def _snap(root: Path, seq: int) -> Path:
    return snap_dir(root) / f"{seq:020d}.snap"


def _damage_flip(data: bytes) -> bytes:
    return data[:40] + bytes([data[40] ^ 0x10]) + data[41:]


SNAPSHOT_DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "flipped-payload-byte": _damage_flip,
    "flipped-last-byte": lambda d: d[:-1] + bytes([d[-1] ^ 1]),
    "truncated": lambda d: d[: len(d) // 2],
    "header-only": lambda d: d[:32],
    "shorter-than-header": lambda d: d[:10],
    "zero-length": lambda d: b"",
    "zero-filled": lambda d: b"\0" * len(d),
    "bad-magic": lambda d: b"XXXXXXXX" + d[8:],
    "header-seq-disagrees": lambda d: d[:12] + struct.pack("<Q", 39) + d[20:],
    "wrong-length-field": lambda d: d[:20] + struct.pack("<Q", len(d)) + d[28:],
    "extra-bytes-appended": lambda d: d + b"junk",
    # Checksums right, the payload no deflate stream: version 2 inflates it first.
    "payload-does-not-inflate": lambda d: _resealed(d, 2, b"not a deflate stream"),
}


def _resealed(data: bytes, version: int, payload: bytes) -> bytes:
    """A snapshot file of `version` holding `payload`, its header and checksums made anew."""
    magic, _, seq = struct.unpack_from("<8sIQ", data)
    head = struct.pack("<8sIQQI", magic, version, seq, len(payload), zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


def test_snapshots_are_written_compressed(pristine_snaps: Pristine) -> None:
    for seq in (20, 40, 60):
        data = _snap(pristine_snaps.root, seq).read_bytes()
        assert struct.unpack_from("<I", data, 8)[0] == SNAPSHOT_VERSION == 2
        zlib.decompress(data[36:])  # the payload is a zlib stream


def test_version_1_snapshots_of_an_older_reynd_are_read_as_they_are(
    pristine_snaps: Pristine, tmp_path: Path
) -> None:
    """Migration: a state dir whose snapshots an older reynd wrote (version 1, the msgpack
    uncompressed) opens from them, none set aside; new ones are version 2 beside them."""
    root = _copy(pristine_snaps, tmp_path / "r")
    for seq in (20, 40, 60):
        path = _snap(root, seq)
        data = path.read_bytes()
        path.write_bytes(_resealed(data, 1, zlib.decompress(data[36:])))
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)
        assert store.snapshots.seqs == [20, 40, 60]
        assert store.plan(N).snapshot == 60
        assert summarize(store.state_as_of(30)) == pristine_snaps.model.state(30)
        assert not list(snap_dir(root).glob("*.damaged"))
        seq = store.snapshot_now()
    assert struct.unpack_from("<I", _snap(root, seq).read_bytes(), 8)[0] == 2
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)
        assert store.plan(N).snapshot == seq


@pytest.mark.parametrize("name", list(SNAPSHOT_DAMAGE))
def test_damaged_newest_snapshot_falls_back_to_an_older_one(
    pristine_snaps: Pristine, tmp_path: Path, name: str
) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    path = _snap(root, 60)
    path.write_bytes(SNAPSHOT_DAMAGE[name](path.read_bytes()))
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)
        assert store.snapshots.seqs == [20, 40]
        assert store.plan(N).snapshot == 40
        assert not path.exists()
        assert path.with_suffix(".damaged").exists()  # set aside, not deleted


def test_all_snapshots_damaged_falls_back_to_the_wal(
    pristine_snaps: Pristine, tmp_path: Path
) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    for seq in (20, 40, 60):
        _snap(root, seq).write_bytes(_damage_flip(_snap(root, seq).read_bytes()))
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)
        assert store.snapshots.seqs == []
        assert store.plan(N).snapshot == 0


def test_damaged_snapshot_off_the_tip_path_is_caught_on_an_as_of_read(
    pristine_snaps: Pristine, tmp_path: Path
) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    path = _snap(root, 20)
    path.write_bytes(_damage_flip(path.read_bytes()))
    with Store.open(root, opts()) as store:
        assert summarize(store.state_as_of(30)) == pristine_snaps.model.state(30)
        assert store.snapshots.seqs == [40, 60]


def _with_version(data: bytes, version: int) -> bytes:
    """A well-formed header of another version (its own checksum recomputed)."""
    magic, _, seq, length, crc = struct.unpack_from("<8sIQQI", data)
    head = struct.pack("<8sIQQI", magic, version, seq, length, crc)
    return head + struct.pack("<I", zlib.crc32(head)) + data[36:]


def test_newer_snapshot_version_is_refused_with_a_clear_message(
    pristine_snaps: Pristine, tmp_path: Path
) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    path = _snap(root, 60)
    path.write_bytes(_with_version(path.read_bytes(), SNAPSHOT_VERSION + 1))
    with pytest.raises(UnsupportedVersion) as info:
        Store.open(root, opts())
    msg = str(info.value)
    assert str(path) in msg
    assert f"version {SNAPSHOT_VERSION + 1}" in msg
    assert f"reads up to {SNAPSHOT_VERSION}" in msg
    assert path.exists()  # refused, not set aside: it is not damaged


def test_bit_flip_in_snapshot_version_field_falls_back(
    pristine_snaps: Pristine, tmp_path: Path
) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    path = _snap(root, 60)
    flip(path, 11, 0x40)  # high byte of the u32 version
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)


def test_leftover_tmp_snapshot_is_removed_on_open(pristine_snaps: Pristine, tmp_path: Path) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    tmp = snap_dir(root) / f".tmp-{80:020d}.snap"
    tmp.write_bytes(_snap(root, 60).read_bytes()[:100])
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)
        assert not tmp.exists()
        assert store.snapshots.seqs == [20, 40, 60]


def test_snapshot_beyond_the_cut_tail_is_not_trusted(
    pristine_snaps: Pristine, tmp_path: Path
) -> None:
    root = _copy(pristine_snaps, tmp_path / "r")
    seg = segments(root)[-1]
    _, end = record_spans(seg)[-1]
    seg.write_bytes(seg.read_bytes()[: end - 3])
    # A snapshot is written after the records it covers are durable: one beyond the
    # log's end proves a lost record, never a torn tail. A start refuses it, naming it.
    with pytest.raises(ExtentLost, match=f"seqs {N}..{N} were acknowledged .snapshot {N}"):
        Store.open(root, opts())
    # Under the operator's decision (reynd repair) it is set aside, not trusted.
    with Store.open(root, opts(), accept_loss=AcceptLoss("test")) as store:
        _check_prefix(store, pristine_snaps, N - 1)
        assert store.snapshots.seqs == [20, 40]
        assert store.accepted is not None and store.accepted.first == store.accepted.last == N


# -- fuzz ----------------------------------------------------------------------------------

damage = st.lists(
    st.tuples(
        st.sampled_from(["flip", "zero", "truncate", "garbage"]),
        st.sampled_from([0, 1, 2, 2, 2]),  # which segment (mostly the last)
        st.one_of(  # where in it (often near the end)
            st.floats(0, 1, exclude_max=True), st.floats(0.9, 1, exclude_max=True)
        ),
        st.integers(1, 64),  # how many bytes
    ),
    min_size=1,
    max_size=3,
)


def _apply_damage(root: Path, ops: list[tuple[str, int, float, int]], rng: random.Random) -> None:
    segs = segments(root)
    for kind, which, where, n in ops:
        path = segs[which]
        data = bytearray(path.read_bytes())
        if not data:
            continue
        off = int(where * len(data))
        if kind == "flip":
            data[off] ^= rng.randrange(1, 256)
        elif kind == "zero":
            data[off : off + n] = b"\0" * len(data[off : off + n])
        elif kind == "garbage":
            data[off : off + n] = bytes(rng.randrange(256) for _ in range(len(data[off : off + n])))
        else:
            del data[off:]
        path.write_bytes(bytes(data))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.tuples(damage, st.integers(0, 2**32 - 1), st.booleans()))
def test_fuzzed_damage_opens_to_a_prefix_or_raises_corruption(
    pristine: Pristine,
    pristine_snaps: Pristine,
    tmp_path: Path,
    case: tuple[list[tuple[str, int, float, int]], int, bool],
) -> None:
    ops, seed, with_snaps = case
    p = pristine_snaps if with_snaps else pristine
    root = _copy(p, tmp_path / "fuzz")
    # A full scan, as every open did before segment indexes (see the test below).
    shutil.rmtree(root / "state" / "index", ignore_errors=True)
    _apply_damage(root, ops, random.Random(seed))
    try:
        store = Store.open(root, opts())
    except CorruptionError as exc:
        event("corruption")
        assert exc.path.exists()
        assert exc.seq is None or 1 <= exc.seq <= N + 1
        return
    with store:
        h = store.head
        event("opened, full log" if h == N else "opened, tail cut")
        assert h <= N
        _check_prefix(store, p, h)
        for s in range(0, h + 1, 7):
            assert summarize(store.state_as_of(s)) == p.model.state(s)
        # And the log accepts the next record at h + 1.
        (e,) = store.append([to_event(("create", "fuzz"))])
        assert e.seq == h + 1


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.tuples(damage, st.integers(0, 2**32 - 1)))
def test_fuzzed_damage_under_a_segment_index_is_found_on_read_and_by_verify(
    pristine_snaps: Pristine, tmp_path: Path, case: tuple[list[tuple[str, int, float, int]], int]
) -> None:
    """The same damage with the segment indexes the snapshots wrote.

    An open takes the records an index describes on trust (after cheap checks
    of the segment), so: where a full scan opens, the indexed open opens to
    the same prefix; where a full scan refuses, the indexed open refuses too,
    or opens and a damaged record raises a clean CorruptionError when it is
    read. `verify` (reynd repair --verify) refuses exactly when a full scan does.
    """
    ops, seed = case
    p = pristine_snaps
    root = _copy(p, tmp_path / "fuzz")
    assert list((root / "state" / "index").glob("*.idx"))
    _apply_damage(root, ops, random.Random(seed))
    scan = tmp_path / "scan"
    if scan.exists():
        shutil.rmtree(scan)
    shutil.copytree(root, scan)
    shutil.rmtree(scan / "state" / "index")
    try:
        with Store.open(scan, opts()) as full:
            full_head: int | None = full.head
    except CorruptionError:
        full_head = None
    try:
        verify(root)
        verified = True
    except CorruptionError:
        verified = False
    assert verified == (full_head is not None)
    try:
        store = Store.open(root, opts())
    except CorruptionError:
        event("indexed open refuses")
        assert full_head is None
        return
    with store:
        if full_head is not None:
            event("both open")
            _check_prefix(store, p, full_head)
            return
        event("indexed open trusts a damaged record")
        bad = 0
        for s in range(1, store.head + 1):
            try:
                (e,) = store.wal.read(s, s)
            except CorruptionError as exc:
                assert exc.path.parent == wal_dir(root)
                bad += 1
                continue
            assert e == p.events[s - 1]
        assert bad


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(offset=st.integers(12, 10_000), mask=st.integers(1, 255))
def test_fuzzed_snapshot_damage_never_changes_the_state(
    pristine_snaps: Pristine, tmp_path: Path, offset: int, mask: int
) -> None:
    """Any flipped byte outside the version field: fall back, same state."""
    root = _copy(pristine_snaps, tmp_path / "fuzz")
    path = _snap(root, 60)
    size = path.stat().st_size
    flip(path, offset % size if offset % size >= 12 else 12, mask)
    with Store.open(root, opts()) as store:
        _check_prefix(store, pristine_snaps, N)


def test_checksums_are_crc32_of_the_body(pristine: Pristine) -> None:
    """The on-disk frame stays readable with standard tools (docs/format.md)."""
    line = segments(pristine.root)[0].read_bytes().split(b"\n")[0]
    obj = msgspec.json.decode(line)
    body = msgspec.json.encode(obj["rec"])
    assert obj["len"] == len(body)
    assert int(obj["crc"], 16) == zlib.crc32(body)


def test_second_torn_tail_at_the_same_offset_keeps_both_copies(
    pristine: Pristine, tmp_path: Path
) -> None:
    """The retried append lands at the same offset; its torn copy must not overwrite the first."""
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[-1]
    size = seg.stat().st_size
    cuts = [b'{"crc":"0123', b'{"crc":"89abcdef","len":9']
    for torn in cuts:
        with seg.open("ab") as f:
            f.write(torn)
        with Store.open(root, opts()) as store:
            assert store.recovery.torn_offset == size
    kept = sorted(p.read_bytes() for p in (wal_dir(root) / "torn").iterdir())
    assert kept == sorted(cuts)


def test_checksummed_reset_with_an_impossible_target_is_a_clean_error(
    pristine: Pristine, tmp_path: Path
) -> None:
    """Rule 11: a record that passes its checksum but breaks the lineage is corruption too."""
    root = _copy(pristine, tmp_path / "r")
    seg = segments(root)[-1]
    start, end = record_spans(seg)[-1]
    bad = ev.Rewind(seq=N, target_n=N + 3, supersedes=N - 1)
    data = seg.read_bytes()
    seg.write_bytes(data[:start] + encode_frame(msgspec.json.encode(bad)) + data[end:])
    _expect_corruption(root, seg, start, N)

"""Segment indexes (state/index/*.idx): an open through them equals an open by a full scan.

A hypothesis state machine drives a real Store on disk through random
histories (appends, rewinds, checkouts, snapshots that write the index,
index writes of their own, retention GC, reopens, and crashes that leave a
torn WAL tail and a torn, damaged or missing index). After every reopen the
store is compared with a full-scan open of a copy of the same directory
without its indexes: head, floor, lineage, branches, catalog, the seqs of
workspace.files records, segment offsets, snapshots, the tip's state and the
state as of every seq.

Then each way an index can be wrong (torn, failing its checksum, stale,
missing, from a newer reynd or of version 1, left over by a deleted
segment) falls back to
scanning that segment, says so in the log, and opens to the same store; and
a state directory without indexes (an older reynd's) opens exactly as before,
changing nothing on disk.
"""

from __future__ import annotations

import logging
import random
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
from helpers import (
    AGENTS,
    CLOCK,
    LogModel,
    Op,
    append_ops,
    assert_same_as_full_scan,
    build_log,
    frame_chunk,
    index_dir,
    index_files,
    opts,
    segments,
    store_view,
    summarize,
)
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reynd.core.retention import RetentionPolicy, without_horizon
from reynd.protocol import errors
from reynd.storage.errors import CorruptionError
from reynd.storage.framing import encode_frame
from reynd.storage.gc import collect
from reynd.storage.segindex import HEADER_SIZE, INDEX_VERSION, decode_index, encode_chunk
from reynd.storage.store import Store

OPTIONS = opts(segment_bytes=2048, snapshot_min_bytes=1 << 30)  # snapshots only when asked

DAMAGE = ("none", "torn", "flip", "delete", "junk")


def _indexed(store: Store) -> int:
    return sum(s.indexed for s in store.wal.segments)


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="reynd-idx-"))
        self.root = self.dir / "reyn"
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        self.model = LogModel()
        self.rng = random.Random(0)

    def teardown(self) -> None:
        event(f"index files={len(index_files(self.root))}")
        event(f"segments={len(segments(self.root))}")
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the history --------------------------------------------------------------------

    @initialize(n=st.integers(0, 30))
    def seed_log(self, n: int) -> None:
        while self.model.head < n:
            append_ops(self.store, self.model, self.model.next_ops(self.rng))

    @rule(agent=st.sampled_from(AGENTS), steps=st.integers(1, 12), batch=st.booleans())
    def append(self, agent: str, steps: int, batch: bool) -> None:
        if batch:
            ops = []
            for _ in range(steps):
                for op in self.model.next_ops(self.rng, agent):
                    ops.append(op)
                    self.model.add(op)
            del self.model.records[-len(ops) :]
            append_ops(self.store, self.model, ops)
            return
        for _ in range(steps):
            append_ops(self.store, self.model, self.model.next_ops(self.rng, agent))

    @rule(agent=st.sampled_from(AGENTS), with_step=st.booleans())
    def workspace_files(self, agent: str, with_step: bool) -> None:
        """A workspace.files record, alone or in the batch of the agent's next step."""
        ops: list[Op] = [("files", agent, f"f{self.model.head}")]
        if with_step:
            ops += self.model.next_ops(self.rng, agent)
        append_ops(self.store, self.model, ops)

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        active = sorted(self.model.active_set() - {self.model.head})
        target = data.draw(st.sampled_from(active), label="target")
        try:
            self.store.rewind(target)
        except errors.BelowFloor:
            return
        self.model.add_reset(target)

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.model.head - 1), label="target")
        try:
            self.store.checkout(target)
        except errors.BelowFloor:
            return
        self.model.add_reset(target)

    @precondition(lambda self: self.model.head > 0)
    @rule()
    def snapshot(self) -> None:
        self.store.snapshot_now()  # writes the index too
        assert _indexed(self.store) == sum(len(s.offsets) for s in self.store.wal.segments)

    @rule()
    def index_now(self) -> None:
        self.store.index_now()

    @rule(keep=st.integers(0, 60), snapshots=st.integers(0, 3))
    def gc(self, keep: int, snapshots: int) -> None:
        policy = RetentionPolicy(wal_keep_records=keep, snapshot_keep=snapshots)
        collect(self.store, without_horizon(policy))

    # -- reopening -----------------------------------------------------------------------

    @rule()
    def reopen(self) -> None:
        indexed = _indexed(self.store)
        self.store.close()
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        assert self.store.recovery.indexed == indexed  # every chunk written was used
        assert self.store.recovery.torn_bytes == 0
        event("reopen through the index" if indexed else "reopen, nothing indexed")
        self._compare()

    @rule(
        cut=st.integers(0, 200),
        damage=st.sampled_from(DAMAGE),
        data=st.data(),
    )
    def crash_and_reopen(self, cut: int, damage: str, data: st.DataObject) -> None:
        """What a crash can leave: a torn WAL tail, and an index torn, damaged or lost."""
        self.store.close()
        if cut and segments(self.root):
            frame = encode_frame(b'{"kind":"message.received","seq":%d}' % (self.model.head + 1))
            with segments(self.root)[-1].open("ab") as f:
                f.write(frame[: min(cut, len(frame) - 1)])
        # An index torn to nothing earlier stays as an empty file: nothing left to damage.
        files = [p for p in index_files(self.root) if p.stat().st_size]
        if damage != "none" and files:
            path = data.draw(st.sampled_from(files), label="index file")
            raw = bytearray(path.read_bytes())
            at = data.draw(st.integers(0, len(raw) - 1), label="byte")
            if damage == "torn":
                del raw[at:]
            elif damage == "flip":
                raw[at] ^= data.draw(st.integers(1, 255), label="mask")
            elif damage == "junk":
                raw += bytes(self.rng.randrange(256) for _ in range(at % 97 + 1))
            if damage == "delete":
                path.unlink()
            else:
                path.write_bytes(bytes(raw))
            event(f"index damage: {damage}")
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        self._compare()

    def _compare(self) -> None:
        assert_same_as_full_scan(self.store, self.root, self.dir / "scan")

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def tip_matches_the_model(self) -> None:
        assert self.store.head == self.model.head
        assert summarize(self.store.state) == self.model.tip_state()


IndexMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_index_open_equals_full_scan = IndexMachine.TestCase


# == each way an index can be wrong: fall back, say so, same store =======================

N = 90  # records: four or five segments of 2 KiB


@pytest.fixture(scope="module")
def indexed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log over several segments, a snapshot (and with it an index) every 20 records,
    then a tail no index describes."""
    root = tmp_path_factory.mktemp("indexed") / "reyn"
    build_log(root, N, seed=3, options=OPTIONS, snapshot_every=20, files_every=7)
    assert len(index_files(root)) >= 4
    return root


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _open_and_compare(root: Path, tmp_path: Path) -> Store:
    store = Store.open(root, OPTIONS)
    assert_same_as_full_scan(store, root, tmp_path / "scan")
    return store


def _not_used(caplog: pytest.LogCaptureFixture, path: Path) -> str:
    """The log line that says `path` was not used; its reason."""
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "reynd.storage.index" and str(path) in r.getMessage()
    ]
    assert lines, caplog.text
    assert "not used, segment scanned in full" in lines[-1]
    return lines[-1]


def test_intact_index_is_used_and_only_the_tail_is_scanned(
    indexed_dir: Path, tmp_path: Path
) -> None:
    root = _copy(indexed_dir, tmp_path / "r")
    with _open_and_compare(root, tmp_path) as store:
        rec = store.recovery
        assert rec.records == N
        assert 0 < rec.scanned < 20 and rec.indexed == N - rec.scanned
        # The next write covers the tail; the open after it scans nothing.
        store.index_now()
    with Store.open(root, OPTIONS) as store:
        assert store.recovery.scanned == 0


@pytest.mark.parametrize("which", [0, -1])
def test_torn_index_at_every_byte_falls_back(
    indexed_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, which: int
) -> None:
    """A chunk cut short at any byte (a crash mid-append): that segment is scanned, the index
    removed; the next write rebuilds it whole."""
    caplog.set_level(logging.WARNING)
    src = index_files(indexed_dir)[which]
    size = src.stat().st_size
    chunks = decode_index(src.read_bytes(), int(src.stem))
    last_start = size - _chunk_size(src, len(chunks) - 1)
    for cut in range(last_start + 1, size, 3):
        caplog.clear()
        root = _copy(indexed_dir, tmp_path / f"r{cut}")
        path = index_dir(root) / src.name
        path.write_bytes(src.read_bytes()[:cut])
        with _open_and_compare(root, tmp_path) as store:
            assert "torn chunk" in _not_used(caplog, path)
            assert not path.exists()
            seg = next(s for s in store.wal.segments if s.first_seq == int(src.stem))
            assert seg.indexed == 0
            store.index_now()
            assert seg.indexed == len(seg.offsets)
        with Store.open(root, OPTIONS) as store:
            assert store.recovery.scanned == 0
        shutil.rmtree(root)


def _chunk_size(path: Path, k: int) -> int:
    """The byte length of chunk k of an index file."""
    data = path.read_bytes()
    pos = 0
    for i in range(k + 1):
        (length,) = struct.unpack_from("<Q", data, pos + 28)
        if i == k:
            return HEADER_SIZE + int(length)
        pos += HEADER_SIZE + length
    raise AssertionError


def test_any_flipped_byte_of_an_index_falls_back(
    indexed_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every byte of one index file (every 5th, and the headers in full): checksums catch it."""
    caplog.set_level(logging.WARNING)
    src = index_files(indexed_dir)[1]
    data = src.read_bytes()
    offsets = sorted({*range(0, len(data), 5), *range(HEADER_SIZE)})
    reasons: set[str] = set()
    for at in offsets:
        caplog.clear()
        root = _copy(indexed_dir, tmp_path / f"r{at}")
        path = index_dir(root) / src.name
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :])
        with _open_and_compare(root, tmp_path):
            reasons.add(_not_used(caplog, path).split(": ", 1)[1].split(" at byte")[0])
        shutil.rmtree(root)
    assert "chunk checksum mismatch" in reasons
    assert "chunk header checksum mismatch" in reasons


def test_index_of_a_newer_version_is_ignored_not_fatal(
    indexed_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    root = _copy(indexed_dir, tmp_path / "r")
    path = index_files(root)[0]
    raw = bytearray(path.read_bytes())
    struct.pack_into("<I", raw, 8, INDEX_VERSION + 1)
    struct.pack_into("<I", raw, HEADER_SIZE - 4, zlib.crc32(raw[: HEADER_SIZE - 4]))
    path.write_bytes(bytes(raw))
    with _open_and_compare(root, tmp_path) as store:
        assert f"version {INDEX_VERSION + 1}" in _not_used(caplog, path)
        assert store.wal.segments[0].indexed == 0


def _as_version_1(path: Path) -> None:
    """Rewrite an index file as reynd wrote it before version 2: no `file_seqs`."""
    out = []
    for chunk in decode_index(path.read_bytes(), int(path.stem)):
        payload = msgspec.msgpack.decode(zlib.decompress(encode_chunk(chunk)[HEADER_SIZE:]))
        del payload["file_seqs"]
        out.append(frame_chunk(payload, chunk.first, len(chunk.offsets), 1))
    path.write_bytes(b"".join(out))


def test_index_of_version_4_is_used_as_it_is(indexed_dir: Path, tmp_path: Path) -> None:
    """Migration: the version 4 index an older reynd wrote (its payload not deflated) is
    used by a start as it is, no more scanned than with this version's; the same store."""
    root = _copy(indexed_dir, tmp_path / "r")
    with Store.open(root, OPTIONS) as store:
        view, before = store_view(store, every_seq=False), store.recovery
    for path in index_files(root):
        out = []
        for chunk in decode_index(path.read_bytes(), int(path.stem)):
            body = msgspec.msgpack.decode(zlib.decompress(encode_chunk(chunk)[HEADER_SIZE:]))
            out.append(frame_chunk(body, chunk.first, len(chunk.offsets), 4))
        path.write_bytes(b"".join(out))
        assert struct.unpack_from("<I", path.read_bytes(), 8) == (4,)
    with Store.open(root, OPTIONS) as store:
        assert (store.recovery.indexed, store.recovery.scanned) == (before.indexed, before.scanned)
        assert store.recovery.indexed > 0
        assert store_view(store, every_seq=False) == view


def test_index_of_version_1_is_scanned_once_and_written_again(
    indexed_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A version 1 index does not list the workspace.files seqs: believing it would lose them
    (a rewind after the restart would restore the wrong files). Its segment is scanned, and
    the next index write writes it again, as version 2, which the open after it uses."""
    caplog.set_level(logging.WARNING)
    root = _copy(indexed_dir, tmp_path / "r")
    old = index_files(root)
    for path in old:
        _as_version_1(path)
    with Store.open(root, OPTIONS) as store:
        view = store_view(store, every_seq=False)
        assert store.recovery.indexed == 0
        assert len(store.file_ops) > len(old)  # every segment holds file records
        for path in old:
            assert "version 1, written before the index listed" in _not_used(caplog, path)
        store.index_now()
    assert {p.name for p in old} < {p.name for p in index_files(root)}  # and the tail's
    for path in index_files(root):
        assert struct.unpack_from("<I", path.read_bytes(), 8) == (INDEX_VERSION,)
    with _open_and_compare(root, tmp_path) as store:
        assert store.recovery.scanned == 0
        assert store_view(store, every_seq=False) == view


def test_stale_index_of_a_longer_segment_falls_back(
    indexed_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The segment holds less than its index describes (cut by hand, or by an older reynd's
    repair): the index is not believed; the open is what a full scan makes of the segment."""
    caplog.set_level(logging.WARNING)
    root = _copy(indexed_dir, tmp_path / "r")
    seg = segments(root)[-2]
    idx = index_dir(root) / f"{seg.stem}.idx"
    last = decode_index(idx.read_bytes(), int(seg.stem))[-1]
    seg.write_bytes(seg.read_bytes()[: last.offsets[-1]])  # the last record it describes: gone
    # A full scan refuses this (a segment ends before the next one starts): so must we.
    with pytest.raises(CorruptionError, match="expected"):
        Store.open(root, OPTIONS)
    assert "the index describes" in _not_used(caplog, idx)
    # In the last segment, the same cut is a torn tail to a full scan: the same for us.
    root = _copy(indexed_dir, tmp_path / "r2")
    with Store.open(root, OPTIONS) as store:
        store.index_now()  # the last segment too
    seg = segments(root)[-1]
    idx = index_dir(root) / f"{seg.stem}.idx"
    last = decode_index(idx.read_bytes(), int(seg.stem))[-1]
    seg.write_bytes(seg.read_bytes()[: last.offsets[-1] + 5])
    with _open_and_compare(root, tmp_path) as store:
        assert store.head == last.last - 1
        assert store.recovery.torn_bytes == 5
    assert "the index describes" in _not_used(caplog, idx)


def test_stale_index_of_another_history_falls_back(
    indexed_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The WAL was replaced by another history (a restored backup) under the same names: the
    last record an index describes is not there, so no index is used."""
    caplog.set_level(logging.WARNING)
    other = tmp_path / "other"
    build_log(other, N, seed=99, options=OPTIONS)
    root = _copy(indexed_dir, tmp_path / "r")
    shutil.rmtree(root / "state" / "wal")
    shutil.copytree(other / "state" / "wal", root / "state" / "wal")
    shutil.rmtree(root / "state" / "snapshots")
    with _open_and_compare(root, tmp_path) as store:
        assert store.recovery.indexed == 0
    assert all(not p.exists() for p in index_files(indexed_dir) if p.parent == index_dir(root))
    assert "not used" in caplog.text


def test_missing_index_of_one_segment_scans_that_segment(indexed_dir: Path, tmp_path: Path) -> None:
    root = _copy(indexed_dir, tmp_path / "r")
    gone = index_files(root)[1]
    gone.unlink()
    with _open_and_compare(root, tmp_path) as store:
        seg = next(s for s in store.wal.segments if s.first_seq == int(gone.stem))
        assert seg.indexed == 0
        assert store.recovery.indexed > 0
        store.index_now()  # rebuilt whole
        assert gone.exists() and seg.indexed == len(seg.offsets)


def test_index_of_a_deleted_segment_is_removed(indexed_dir: Path, tmp_path: Path) -> None:
    """Retention deletes the segment, then its index: a crash in between leaves the index."""
    root = _copy(indexed_dir, tmp_path / "r")
    orphan = index_dir(root) / f"{10**15:020d}.idx"
    shutil.copy(index_files(root)[0], orphan)
    with _open_and_compare(root, tmp_path):
        assert not orphan.exists()


def test_state_dir_without_indexes_opens_exactly_as_before(tmp_path: Path) -> None:
    """An older reynd's state directory: every record scanned, nothing on disk changed."""
    root = tmp_path / "old"
    model = build_log(root, N, seed=5, options=OPTIONS, snapshot_every=20)
    shutil.rmtree(index_dir(root))  # what an older reynd leaves: the same files, no index

    def tree() -> dict[str, bytes | None]:
        return {
            str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.name != "LOCK"
        }

    before = tree()
    head = model.head
    with Store.open(root, OPTIONS) as store:
        rec = store.recovery
        assert (rec.records, rec.indexed, rec.scanned) == (head, 0, head)
        assert store.head == head
        assert summarize(store.state) == model.tip_state()
        for s in range(head + 1):
            assert summarize(store.state_as_of(s)) == model.state(s)
    assert tree() == before  # no index directory appears by opening


def test_index_that_passes_cheap_checks_but_lies_is_caught_by_verify(
    indexed_dir: Path, tmp_path: Path
) -> None:
    """The limit of the cheap checks, stated: an index whose checksums are right and whose
    last record matches, but which lies about an earlier offset, is believed at open (a read
    there then fails cleanly, on the record's own checksum); `verify` names it."""
    from reynd.storage.verify import verify

    root = _copy(indexed_dir, tmp_path / "r")
    path = index_files(root)[0]
    chunks = decode_index(path.read_bytes(), int(path.stem))
    first = chunks[0]
    first.offsets[1] += 1  # a lie, re-checksummed
    path.write_bytes(b"".join(encode_chunk(c) for c in chunks))
    report = verify(root)
    assert len(report.problems) == 1
    assert str(path) in report.problems[0] and "record offsets" in report.problems[0]
    with Store.open(root, OPTIONS) as store:
        with pytest.raises(Exception, match="corrupt record"):
            list(store.wal.read(first.first + 1, first.first + 1))
        assert store_view(store, every_seq=False)["head"] == N
    msgspec.json.encode(report.problems)  # plain strings, for the CLI


def test_index_that_drops_a_file_record_is_caught_by_verify(
    indexed_dir: Path, tmp_path: Path
) -> None:
    """The workspace.files seqs are part of what verify compares with the scan."""
    from reynd.storage.verify import verify

    root = _copy(indexed_dir, tmp_path / "r")
    path = index_files(root)[1]
    chunks = decode_index(path.read_bytes(), int(path.stem))
    (lying,) = [c for c in chunks if len(c.file_ops)][:1]
    chunks[chunks.index(lying)] = replace(lying, file_ops=lying.file_ops[1:])
    path.write_bytes(b"".join(encode_chunk(c) for c in chunks))
    (problem,) = verify(root).problems
    assert str(path) in problem and "workspace.files records" in problem


# == SIGKILL at each crash point of an index write ==========================================

CRASH_SCRIPT: list[list[object]] = [["append", 100], ["snapshot"], ["append", 40], ["snapshot"]]


@pytest.fixture(scope="module")
def chunks_per_write(tmp_path_factory: pytest.TempPathFactory) -> list[int]:
    """How many chunks (segments) each index write of the crash script appends."""
    from test_crash import run_worker

    root = tmp_path_factory.mktemp("dry") / "reyn"
    run = run_worker(root, CRASH_SCRIPT[:2])
    assert run.lines[-1] == "done"
    first = len(index_files(root))
    run = run_worker(root, [["append", 40], ["snapshot"]])
    assert run.lines[-1] == "done"
    with Store.open(root, opts()) as store:
        second = sum(1 for s in store.wal.segments if s.first_seq + s.indexed - 1 > 100)
    assert [first, second] == [4, 3]  # what the parametrization below counts on
    return [first, second]


@pytest.mark.parametrize(
    ("point", "nth"),
    [
        # The first write appends 4 chunks (the log's first 4 segments), the second 3.
        ("index.mid_write", 1),
        ("index.mid_write", 3),
        ("index.mid_write", 5),  # into an index file that already holds a chunk
        ("index.mid_write", 7),
        ("index.after_chunk", 1),
        ("index.after_chunk", 4),  # the first write is complete, its snapshot unreported
        ("index.after_chunk", 6),
    ],
)
def test_sigkill_while_writing_the_index(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    chunks_per_write: list[int],
    point: str,
    nth: int,
) -> None:
    """Killed halfway through a chunk (a torn index) or between the chunks of one write: the
    next open loses nothing, says which index it did not use, equals a full scan; the next
    write brings the index back whole."""
    from test_crash import _killed, run_worker

    caplog.set_level(logging.WARNING)
    root = tmp_path / "reyn"
    run = run_worker(root, CRASH_SCRIPT, crash_at=f"{point}:{nth}")
    _killed(run)
    model = run.model()
    # The snapshot itself is durable before its index is written: the kill is after it.
    snapped = [int(ln.split()[1]) for ln in run.lines if ln.startswith("snap ")]
    assert model.head == (100 if nth <= chunks_per_write[0] else 140)
    assert snapped == ([] if nth <= chunks_per_write[0] else [100])
    with Store.open(root, opts()) as store:
        assert store.head == model.head
        assert summarize(store.state) == model.tip_state()
        assert_same_as_full_scan(store, root, tmp_path / "scan")
        torn = "torn chunk" in caplog.text or "chunk checksum" in caplog.text
        assert torn == (point == "index.mid_write")
        assert not [p for p in index_files(root) if _is_torn(p)]  # removed at open
        store.snapshot_now()
    with Store.open(root, opts()) as store:
        assert store.recovery.scanned == 0
        assert_same_as_full_scan(store, root, tmp_path / "scan")


def _is_torn(path: Path) -> bool:
    try:
        decode_index(path.read_bytes(), int(path.stem))
    except Exception:
        return True
    return False


# == power loss at every step of an index write ============================================


def test_power_cut_at_every_step_of_an_index_write(tmp_path: Path) -> None:
    """Whatever a disk keeps of an interrupted index write (a chunk missing, torn, zero-filled,
    garbage; a new file's entry lost), the directory opens to what a full scan opens to."""
    from simdisk import SimDisk, live_image, materialise
    from test_power_loss import OPTIONS as POWER_OPTIONS
    from test_power_loss import _all_choices, run_cut

    assert POWER_OPTIONS.segment_bytes == 4096  # several segments, and so several index files

    base = tmp_path / "base"
    base.mkdir()
    model = LogModel()
    rng = random.Random(11)
    with Store.open(base / "reyn", POWER_OPTIONS, clock=CLOCK) as store:
        while model.head < 40:
            append_ops(store, model, model.next_ops(rng))
        store.index_now()  # later writes append to an existing file, and start new ones
        while model.head < 90:
            append_ops(store, model, model.next_ops(rng))

    def run(cut: int | None) -> SimDisk:
        top = tmp_path / f"cut{cut}"
        disk = run_cut(base, top, cut, lambda store: store.index_now())
        if cut is None:
            assert disk.image() == live_image(top), "a write escaped the simulated disk"
        return disk

    total = run(None).steps
    assert total >= 8  # per new chunk: write, write, fdatasync; a created file: fsync dir
    images = 0
    used: set[str] = set()  # how much of the index each image let the open use
    for cut in range(total + 1):
        disk = run(cut)

        def check(choose: Callable[[int], int], disk: SimDisk = disk) -> None:
            nonlocal images
            images += 1
            dest = tmp_path / "image"
            if dest.exists():
                shutil.rmtree(dest)
            materialise(disk.image(choose), dest)
            with Store.open(dest / "reyn", POWER_OPTIONS) as store:
                assert store.head == model.head
                assert summarize(store.state) == model.tip_state()
                assert_same_as_full_scan(store, dest / "reyn", tmp_path / "scan")
                indexed = store.recovery.indexed
                used.add("all" if indexed == model.head else "some" if indexed else "none")

        _all_choices(check)
        shutil.rmtree(tmp_path / f"cut{cut}")
    assert images > total
    assert used == {"all", "some"}  # the chunks written before the cut are always usable

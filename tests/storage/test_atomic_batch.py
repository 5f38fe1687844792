"""Atomic batches in the WAL: after any crash, all of a batch's records or none of them.

A batch's records are separate frames, each saying how many of the batch
follow it (`more`). Recovery holds a batch back until its last record is
read, and cuts an unfinished one with the torn tail. Here a real Store
writes a batch, a copy of its directory is cut at every byte offset inside
the batch (what a crash part-way through the write can leave), and each copy
is reopened for real.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from helpers import opts, read_all, segments, wal_dir

from reynd.protocol import events as ev
from reynd.storage.errors import CorruptionError
from reynd.storage.framing import encode_frame
from reynd.storage.store import Store

BATCH = 4


def _batch(i: int) -> list[ev.Event]:
    return [
        ev.MessageReceived(agent="a", message_id=f"b{i}-{k}", text=f"member {k} of batch {i}")
        for k in range(BATCH)
    ]


def _build(root: Path, segment_bytes: int = 1 << 20) -> tuple[int, int]:
    """A log: agent a, two single appends, then one batch. Returns the batch's byte span."""
    with Store.open(root, opts(segment_bytes=segment_bytes)) as store:
        store.append([ev.AgentCreated(agent="a")])
        store.append([ev.MessageReceived(agent="a", message_id="m1", text="one")])
        (seg,) = segments(root)
        start = seg.stat().st_size
        got = store.append(_batch(0), atomic=True)
        assert [e.more for e in got] == [3, 2, 1, 0]
        return start, seg.stat().st_size


def test_a_batch_cut_anywhere_is_dropped_whole(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    start, end = _build(pristine)
    for cut in range(start, end + 1):
        root = tmp_path / f"cut-{cut}"
        shutil.copytree(pristine, root)
        (seg,) = segments(root)
        with seg.open("r+b") as f:
            f.truncate(cut)
        with Store.open(root, opts()) as store:
            texts = [e.text for e in read_all(store) if isinstance(e, ev.MessageReceived)]
            inbox = [m.message_id for m in store.state.agents["a"].inbox]
            want = 2 + BATCH if cut == end else 2  # whole batch, or nothing of it
            assert store.head == want, cut
            assert len(texts) == want - 1 and len(inbox) == want - 1, cut
            if start < cut < end:
                assert store.recovery.torn_offset == start, cut
            # The log goes on: the seqs the dropped batch had are issued again.
            again = store.append(_batch(1), atomic=True)
            assert [e.seq for e in again] == list(range(want + 1, want + 1 + BATCH))
        shutil.rmtree(root)


def test_a_batch_never_straddles_segments(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    # Segments of 256 bytes: singles rotate every record or two; a batch of
    # four ~120-byte records must still land in one file.
    with Store.open(root, opts(segment_bytes=256)) as store:
        store.append([ev.AgentCreated(agent="a")])
        for i in range(6):
            store.append(_batch(i), atomic=True)
            store.append([ev.MessageReceived(agent="a", message_id=f"s{i}", text="x")])
    with Store.open(root, opts(segment_bytes=256)) as store:
        assert store.head == 1 + 6 * (BATCH + 1)
        for seg in segments(root):
            recs = [e for e in store.wal.read(int(seg.stem), _last(store, seg))]
            assert recs[-1].more == 0, seg  # no segment ends inside a batch


def _last(store: Store, seg: Path) -> int:
    (found,) = [s for s in store.wal.segments if s.path == seg]
    return found.last_seq


def test_an_unfinished_batch_before_intact_records_is_corruption(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    start, end = _build(root)
    (seg,) = segments(root)
    data = seg.read_bytes()
    lines = data[start:end].splitlines(keepends=True)
    # The batch's third record, intact but saying it ends the batch while the
    # one before announced two more: a batch cut short with records after it.
    third = msgspec.json.decode(lines[2], type=dict)["rec"]
    del third["more"]
    lines[2] = encode_frame(msgspec.json.encode(third))
    seg.write_bytes(data[:start] + b"".join(lines))
    with pytest.raises(CorruptionError, match="ends no batch"):
        Store.open(root, opts())


def test_an_unfinished_batch_ending_an_older_segment_is_corruption(tmp_path: Path) -> None:
    root = tmp_path / "reyn"
    start, end = _build(root)
    (seg,) = segments(root)
    data = seg.read_bytes()
    first_cut = data[: start + len(data[start:end].splitlines(keepends=True)[0])]
    seg.write_bytes(first_cut)
    # A later segment after it: the unfinished batch is no longer the tail.
    nxt = wal_dir(root) / f"{4:020d}.jsonl"
    with Store.open(tmp_path / "other", opts()) as other:
        other.append([ev.AgentCreated(agent="z")] * 1)
        other.append(
            [ev.MessageReceived(agent="z", message_id=f"q{i}", text="q") for i in range(3)]
        )
    line = [ln for ln in segments(tmp_path / "other")[0].read_bytes().splitlines(True)][3]
    nxt.write_bytes(line)
    with pytest.raises(CorruptionError, match="unfinished"):
        Store.open(root, opts())


OLDER_SEGMENT = (
    b'{"crc":"5d1b7a4e","len":57,"rec":{"kind":"agent.created","seq":1,"ts":1.0,"agent":"a"}}\n'
)


def test_a_state_dir_written_before_batches_opens_unchanged(tmp_path: Path) -> None:
    """Records written before `more` existed (every record then) read as complete, as before."""
    root = tmp_path / "reyn"
    with Store.open(root, opts()) as store:
        store.append([ev.AgentCreated(agent="a")])
        store.append([ev.MessageReceived(agent="a", message_id="m1", text="one")])
        store.append([ev.MessageReceived(agent="a", message_id="m2", text="two")])
    (seg,) = segments(root)
    before = seg.read_bytes()
    assert b'"more"' not in before  # single appends write exactly the older format
    with Store.open(root, opts()) as store:
        assert store.head == 3 and store.recovery.torn_bytes == 0
        assert [m.message_id for m in store.state.agents["a"].inbox] == ["m1", "m2"]
    assert seg.read_bytes() == before

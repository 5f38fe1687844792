"""`reynd repair --truncate-at` on the simulated disk (simdisk.py): power cut at every step.

The repair moves the damaged bytes aside, truncates a segment and appends
`lost` records. Every one of those writes goes through reynd.storage.fsops,
so the simulated disk sees them: with no cut its image is the live tree, and
with a cut before any step and any loss the disk allows, the state directory
either refuses to start (naming the repair that finishes the job) or starts
with every seq from the damage on a `lost` record: never with a seq that a
later append would issue twice.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest
from simdisk import PowerCut, SimDisk, live_image, materialise

from reynd.protocol import events as ev
from reynd.storage import fsops
from reynd.storage.errors import CorruptionError
from reynd.storage.extent import ExtentLost
from reynd.storage.options import StorageOptions
from reynd.storage.repair import accept_lost_segments, truncate_at
from reynd.storage.store import Store

RECORDS = 12
DAMAGED = 6  # inside a segment before the last: the repair moves the later ones aside whole
KEPT = [f"m{i}" for i in range(2, DAMAGED)]  # the messages before the damaged record


def _damaged_log(root: Path) -> tuple[str, int]:
    """RECORDS records in a few segments, indexed; seq DAMAGED flipped: (segment, offset)."""
    options = StorageOptions(segment_bytes=500, snapshot_min_bytes=1 << 30)
    with Store.open(root, options) as store:
        store.append([ev.AgentCreated(agent="a")])
        for i in range(2, RECORDS + 1):
            store.append([ev.MessageReceived(agent="a", message_id=f"m{i}", text="x" * 60)])
        store.index_now()  # the repair removes the index of every segment it cuts
        seg = next(s for s in store.wal.segments if s.first_seq <= DAMAGED <= s.last_seq)
        assert seg.first_seq < DAMAGED and seg is not store.wal.segments[-1]
        offset = seg.offsets[DAMAGED - seg.first_seq]
    data = bytearray(seg.path.read_bytes())
    data[offset + 30] ^= 0x01
    seg.path.write_bytes(bytes(data))
    return seg.path.name, offset


def _repair_on(disk_top: Path, root: Path, segment: str, offset: int, cut: int | None) -> SimDisk:
    """Run the repair on a SimDisk cutting the power before step `cut` (None: no cut)."""
    disk = SimDisk(disk_top, cut_at=cut)
    with fsops.installed(disk):
        try:
            truncate_at(root, segment, offset)
        except PowerCut:
            pass
        finally:
            with suppress(BaseException):
                disk.release()
    return disk


def _outcome(root: Path) -> tuple[int, list[str], list[str]]:
    """(head, message ids of the tip's state, kinds from seq DAMAGED on): a start's view."""
    with Store.open(root) as store:
        ids = [m.message_id for m in store.state.agents["a"].inbox]
        kinds = [type(e).__name__ for e in store.wal.read(DAMAGED, store.head)]
        return store.head, ids, kinds


REPAIRED = (RECORDS, KEPT, ["Lost"] * (RECORDS - DAMAGED + 1))


def _finish(root: Path) -> tuple[int, list[str], list[str]]:
    """Start; when refused, run the repair the error names, as an operator would, and again."""
    for _ in range(3):
        try:
            return _outcome(root)
        except ExtentLost:
            accept_lost_segments(root)
        except CorruptionError as exc:
            truncate_at(root, exc.path.name, exc.offset)
    return _outcome(root)


def test_the_repair_writes_only_through_fsops(tmp_path: Path) -> None:
    """No cut: the disk saw every write (its image is the live tree), and what it made
    durable (only synced data and entries) is the repaired log."""
    top = tmp_path / "disk"
    root = top / "reyn"
    segment, offset = _damaged_log(root)
    disk = _repair_on(top, root, segment, offset, None)
    assert disk.image() == live_image(top), "a write escaped the simulated disk"
    synced_only = tmp_path / "synced"
    materialise(disk.image(lambda n: 0), synced_only)
    assert _outcome(synced_only / "reyn") == REPAIRED
    assert _outcome(root) == REPAIRED


CHOICES: dict[str, Callable[[int], int]] = {
    "synced only": lambda n: 0,
    "half": lambda n: n // 2,
    "all but the last": lambda n: max(0, n - 1),
    "everything": lambda n: n,
}


@pytest.mark.parametrize("choice", list(CHOICES))
def test_a_power_cut_anywhere_in_the_repair_never_reissues_a_seq(
    tmp_path: Path, choice: str
) -> None:
    base = tmp_path / "base"
    segment, offset = _damaged_log(base / "reyn")
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    total = _repair_on(probe, probe / "reyn", segment, offset, None).steps
    assert total >= 10  # moves, truncation, syncs, the extent, the lost records
    for cut in range(total + 1):
        top = tmp_path / f"cut{cut}"
        shutil.copytree(base, top)
        disk = _repair_on(top, top / "reyn", segment, offset, cut)
        image = tmp_path / f"image{cut}"
        materialise(disk.image(CHOICES[choice]), image)
        root = image / "reyn"
        # A start either refuses or has every seq up to the old head: none is issued twice.
        with suppress(CorruptionError):
            assert _outcome(root) == REPAIRED, f"cut {cut}"
        assert _finish(root) == REPAIRED, f"cut {cut}"
        with Store.open(root) as store:
            (after,) = store.append([ev.MessageReceived(agent="a", message_id="n", text="y")])
            assert after.seq == RECORDS + 1, f"cut {cut}"
        shutil.rmtree(top)
        shutil.rmtree(image)

"""`reynd repair --verify`: read every record of a state directory back, change nothing.

Start-up takes the records a segment index describes on trust (after cheap
checks), so damage to one of them (bit rot) is found only when it is read.
This is the full check, for an operator or a cron job, with the daemon
stopped: every WAL record is read and verified as a start without indexes
would (checksum, seq order, decoding, the lineage it implies, the retained
file), every snapshot is read and checked, and every segment index that a
start would use is compared with what the scan rebuilt, chunk by chunk.

Damage in the WAL raises the CorruptionError a start would raise (file,
offset, seq, the repair command); a log shorter than what the state
directory proves was acknowledged (a newest segment gone) raises the
ExtentLost a start would raise. Damaged snapshots and indexes that
disagree with the WAL are `problems`. What a start handles by itself (a torn
tail it would cut, an index it would not use, a leftover temporary file)
is only noted. The config store is checked too (`_check_config`): config.db
and every generation file index.log names pass SQLite's quick_check and
have their tables, and index.log reads; so do replication.json and
clean-stop (`_check_side_files`).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from reynd.config_store.db import check_file
from reynd.config_store.generations import ConfigFileDamaged, GenerationFiles, GenerationIndex
from reynd.protocol.events import Event
from reynd.replication.identity import IDENTITY, Identity
from reynd.runtime.clean_stop import NAME as CLEAN_STOP
from reynd.runtime.clean_stop import CleanStop
from reynd.storage.errors import CorruptionError, UnsupportedVersion
from reynd.storage.extent import ExtentLost, find_loss, gather
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.indexfiles import INDEX_DIR, SUFFIX, IndexFiles, record_crc
from reynd.storage.lock import hold_lock
from reynd.storage.rebuild import Rebuild
from reynd.storage.retained import load_retained
from reynd.storage.segindex import Chunk, IndexUnusable
from reynd.storage.segments import Segment
from reynd.storage.snapshots import decode_snapshot
from reynd.storage.wal import Wal

__all__ = ["VerifyReport", "verify"]


@dataclass(slots=True)
class VerifyReport:
    head: int = 0
    records: int = 0
    segments: int = 0
    snapshots: int = 0  # snapshot files read and checked
    index_chunks: int = 0  # index chunks compared with the scan
    notes: list[str] = field(default_factory=list)  # what a start handles by itself
    problems: list[str] = field(default_factory=list)  # damage outside the WAL's records


def verify(root: Path) -> VerifyReport:
    """Check everything under `root` (a state directory) without changing it.

    Holds the state directory's lock (StateLocked when a daemon runs).
    Raises CorruptionError or UnsupportedVersion for damage in the WAL or the
    retained file; every other finding is in the report.
    """
    state_dir = root / "state"
    if not state_dir.is_dir():
        raise FileNotFoundError(f"no state directory at {root} (expected {state_dir})")
    with hold_lock(root):
        return _verify(state_dir)


def _verify(state_dir: Path) -> VerifyReport:
    report = VerifyReport()
    retained = load_retained(state_dir)
    wal_dir = state_dir / "wal"
    rebuild = Rebuild(retained, wal_dir)
    times: array[float] = array("d")  # the time of every record, in seq order

    def on_record(event: Event, nbytes: int) -> None:
        rebuild.record(event)
        times.append(event.ts)

    wal, recovery = Wal.open(wal_dir, 1 << 62, on_record, read_only=True)
    try:
        rebuild.check_end(wal.head)
        _check_extent(state_dir, wal.head, report)
        report.head, report.records, report.segments = wal.head, recovery.records, len(wal.segments)
        if recovery.torn_path is not None:
            report.notes.append(
                f"torn tail: {recovery.torn_bytes} bytes at {recovery.torn_path}:"
                f"{recovery.torn_offset}, never acknowledged (the next start cuts it)"
            )
        _check_indexes(state_dir, wal, times, rebuild, report)
        _check_snapshots(state_dir / "snapshots", wal.head, report)
    finally:
        wal.close()
    _check_config(state_dir / "config", report)
    _check_side_files(state_dir, report)
    return report


def _check_side_files(state_dir: Path, report: VerifyReport) -> None:
    """The small files a start reads beside the log: replication.json, clean-stop."""
    identity = state_dir / IDENTITY
    if identity.exists():
        try:
            msgspec.json.decode(identity.read_bytes(), type=Identity)
        except msgspec.DecodeError as exc:
            report.problems.append(
                f"{identity}: does not decode ({exc}); a start with [replicate] fails on it: "
                "if this directory never replicated, move it away; otherwise the store id it "
                "held is gone, and the next start on a new one ships to another prefix"
            )
    stop = state_dir / CLEAN_STOP
    if stop.exists():
        try:
            body, _ = next_frame(stop.read_bytes(), 0)
            msgspec.json.decode(body, type=CleanStop)
        except (FrameInvalid, msgspec.DecodeError) as exc:
            report.notes.append(
                f"{stop}: damaged ({exc}); the next start ignores it (the steps it listed "
                "are then ambiguous, for the operator)"
            )


# A damaged live database: what an operator does about it.
_CONFIG_DB_REPAIR = (
    "restore state/config from a copy `reynd backup` made, or move config.db away: "
    "the next start recreates it empty (settings set at run time are lost, agents are "
    "rebuilt from the WAL), and a checkout restores a generation"
)
_GENERATION_REPAIR = (
    "restore it from a copy `reynd backup` made, or move it away: a restore to a seq it "
    "covers then uses the previous generation of that lineage"
)


def _check_config(config_dir: Path, report: VerifyReport) -> None:
    """config.db (quick_check, schema), index.log, and every generation it names."""
    if not config_dir.is_dir():
        return
    db_path = config_dir / "config.db"
    if db_path.exists():
        _check_database(db_path, _CONFIG_DB_REPAIR, report)
    else:
        report.notes.append(f"{db_path}: absent (the next start creates it empty)")
    index_path = config_dir / "index.log"
    if not index_path.exists():
        return
    index = GenerationIndex(index_path)
    data = index_path.read_bytes()
    try:
        good = index._load(data)
    except ConfigFileDamaged as exc:
        report.problems.append(str(exc))
        return
    if good < len(data):
        report.notes.append(
            f"{index_path}: a torn last entry at byte {good}, never acknowledged "
            "(the next start cuts it)"
        )
    files = GenerationFiles(config_dir / "generations")
    for digest in sorted(set(index.gens.values())):
        path = files.path(digest)
        if not path.exists():
            report.problems.append(
                f"{path}: missing, though {index_path} names it: a restore to a seq it covers "
                "fails; restore it from a copy `reynd backup` made"
            )
        else:
            _check_database(path, _GENERATION_REPAIR, report)


def _check_database(path: Path, repair: str, report: VerifyReport) -> None:
    found = check_file(path)
    report.notes.extend(f"{path}: {note}" for note in found.notes)
    report.problems.extend(f"{path}: {problem}; {repair}" for problem in found.problems)


def _check_extent(state_dir: Path, head: int, report: VerifyReport) -> None:
    """The check a start makes (extent.py): ExtentLost for acknowledged seqs that are gone."""
    evidence = gather(state_dir)
    loss = find_loss(head, evidence)
    if loss is not None:
        raise ExtentLost(loss, state_dir.parent)
    if evidence.extent is None:
        report.notes.append(
            f"no {state_dir / 'wal' / 'extent'} (written before reynd recorded the log's "
            "extent): the next start writes it from the segment files"
        )


def _check_indexes(
    state_dir: Path,
    wal: Wal,
    times: array[float],
    rebuild: Rebuild,
    report: VerifyReport,
) -> None:
    files = IndexFiles(state_dir / INDEX_DIR)
    if not files.dir.is_dir():
        return
    segments = {seg.first_seq: seg for seg in wal.segments}
    base = wal.segments[0].first_seq if wal.segments else 0
    for path in sorted(files.dir.iterdir()):
        if path.suffix != SUFFIX or path.name.startswith("."):
            continue
        seg = segments.get(int(path.stem)) if path.stem.isdigit() else None
        if seg is None:
            report.notes.append(f"{path}: no such segment (the next start removes it)")
            continue
        try:
            chunks = files.load(seg.first_seq, seg.path)
        except IndexUnusable as exc:
            report.notes.append(f"{path}: a start would not use it ({exc}) and scan instead")
            continue
        for chunk in chunks:
            report.index_chunks += 1
            ts = times[chunk.first - base : chunk.last - base + 1]
            wrong = _disagreement(chunk, seg, ts, rebuild)
            if wrong is not None:
                report.problems.append(
                    f"{path}: the chunk for seqs {chunk.first}..{chunk.last} disagrees with "
                    f"the WAL ({wrong}); a start would use it: remove {path}"
                )
                break


def _disagreement(chunk: Chunk, seg: Segment, ts: array[float], rebuild: Rebuild) -> str | None:
    """How `chunk` differs from what the scan rebuilt for its records, or None."""
    wrong = _frames_disagreement(chunk, seg, ts)
    return wrong if wrong is not None else _summary_disagreement(chunk, rebuild)


def _frames_disagreement(chunk: Chunk, seg: Segment, ts: array[float]) -> str | None:
    """How `chunk` describes its records' frames (offsets, end, time, checksum) wrong, or None."""
    i0 = chunk.first - seg.first_seq
    i1 = i0 + len(chunk.offsets)
    if i1 > len(seg.offsets):
        return "it describes records the segment does not hold"
    if chunk.offsets != seg.offsets[i0:i1]:
        return "record offsets"
    end = seg.offsets[i1] if i1 < len(seg.offsets) else seg.size
    if chunk.end != end:
        return "where its last record ends"
    if ts[-1] != chunk.last_ts:
        return "the last record's time"
    try:
        crc = record_crc(seg.path, chunk.offsets[-1], end, chunk.last)
    except CorruptionError as exc:
        return exc.reason
    if crc != chunk.last_crc:
        return "the last record's checksum"
    return None


def _summary_disagreement(chunk: Chunk, rebuild: Rebuild) -> str | None:
    """How `chunk` summarizes its records (resets, files, generations) wrong, or None."""
    if list(chunk.resets) != rebuild.lineage.resets_between(chunk.first, chunk.last):
        return "reset records"
    if list(chunk.file_ops) != rebuild.file_ops.between(chunk.first, chunk.last):
        return "workspace.files records"
    if list(chunk.tags) != rebuild.tags.between(chunk.first, chunk.last):
        return "tag records"
    want, got = rebuild.catalog.columns(chunk.first, chunk.last), chunk.generations
    if want.seqs != got.seqs or want.kinds != got.kinds or want.times != got.times:
        return "generations"
    if [want.names[i] for i in want.agents] != [got.names[i] for i in got.agents]:
        return "the agents of generations"
    if [want.labels[i] for i in range(len(want.labels))] != [
        got.labels[i] for i in range(len(got.labels))
    ]:
        return "the labels of generations"
    return None


def _check_snapshots(directory: Path, head: int, report: VerifyReport) -> None:
    if not directory.is_dir():
        return
    for path in sorted(directory.iterdir()):
        if path.name.startswith(".tmp-"):
            report.notes.append(f"{path}: an interrupted write (the next start removes it)")
            continue
        if path.suffix == ".damaged":
            report.notes.append(f"{path}: set aside as damaged by an earlier start")
            continue
        if path.suffix != ".snap":
            continue
        report.snapshots += 1
        try:
            state = decode_snapshot(path.read_bytes(), path)
        except (CorruptionError, UnsupportedVersion) as exc:
            report.problems.append(f"{path}: {exc}")
            continue
        if state.seq > head:
            report.problems.append(
                f"{path}: covers seq {state.seq}, beyond the log's head {head} "
                "(records it was taken after are missing)"
            )

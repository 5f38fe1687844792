"""`reynd backup DEST`: a consistent copy of a state directory, live or stopped, that opens.

A plain copy of a live directory can catch `config.db` in the middle of a
transaction (SQLite writes its pages in place under a rollback journal),
the active WAL segment mid-record, and a GC between two files. This copy
works from the files alone, without the daemon's lock and without asking
the daemon (so it works the same on a stopped directory, needs no new wire
method, and a stuck backup can never hold the daemon's GC back):

- `config.db` through SQLite's online backup API (a read transaction: a
  consistent snapshot of the database, whatever the daemon writes);
- the WAL: every sealed segment whole (a later segment exists, so its writes
  are done), the active one up to its last complete, checksum-valid record
  of a complete atomic batch (the `scan_segment` a start runs, cutting
  nothing in the source); that record's seq is the backup's seq;
- the other files in the order their writers make them durable, so that
  whatever one names already exists in the copy: the audit log first (its
  lines follow commits), config (`index.log` lines name generation files
  written before them, and seqs already in the WAL), snapshots (taken at
  seqs already in the WAL), the WAL, then the workspace objects (a blob is
  durable before the record naming it; trees past the backup's seq are left
  out: that seq will be issued again);
- GC is the race: it publishes `retained` (the new floor) before it deletes
  a segment or an entry snapshot. Every source file is opened before it is
  read, so a file deleted mid-copy still reads whole; `retained` is read
  before the first file and again after the last: if it changed, or a file
  vanished between listing and opening, the attempt is thrown away and the
  copy starts again.

Every file written is fsynced, every directory too; DEST must be absent or
empty. The result is verified as `reynd repair --verify` would (every
record, every snapshot, config.db) before it is reported.

Not copied: `LOCK` (a start creates it), `index/` (a cache of the WAL: the
first start scans), `wal/torn/` (cut bytes, never read), `procs/` (the live
daemon's programs: a start on the copy would kill them), and the
replication identity (`replication.json`, `.progress`): a daemon on the copy
is a new store and must not continue the source's replica.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from reynd.audit.codec import GZ_SUFFIX, whole_prefix
from reynd.storage.errors import StorageError
from reynd.storage.extent import LogExtent, load_extent, present_segments, save_extent
from reynd.storage.fsutil import (
    create_empty,
    fsync_dir,
    make_dir,
    open_private,
    write_all,
    write_durable,
)
from reynd.storage.recovery import RecoveryReport, scan_segment
from reynd.storage.segments import SUFFIX, Segment
from reynd.storage.verify import VerifyReport, verify

__all__ = ["BackupError", "BackupReport", "backup"]

_ATTEMPTS = 8
_CHUNK = 1 << 20

# Files under state/ copied as they are, when present (one writer, written atomically).
_STATE_FILES = ("damage", "clean-stop", "workspace-restore.json")


class BackupError(StorageError):
    """The backup cannot be made; `refused`: DEST is not a new or empty directory."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(slots=True)
class BackupReport:
    seq: int = 0  # every record up to this seq is in the copy
    files: int = 0
    bytes: int = 0
    attempts: int = 0
    duration_s: float = 0.0
    verified: VerifyReport = field(default_factory=VerifyReport)


class _Vanished(Exception):
    """A source file was removed between listing and opening it (GC): start again."""


def backup(
    source: Path, dest: Path, *, say: Callable[[str], None] = lambda _: None
) -> BackupReport:
    """Copy the state directory `source` (live or stopped) into `dest`, absent or empty.

    Raises BackupError when `dest` holds anything or the copy cannot be made
    consistent in a few attempts, FileNotFoundError when `source` is no state
    directory; OSError, CorruptionError and ConfigFileDamaged pass through.
    """
    started = time.monotonic()
    src_state = source / "state"
    if not (src_state / "wal").is_dir():
        raise FileNotFoundError(f"no state directory at {source} (expected {src_state}/wal)")
    if dest.resolve().is_relative_to(source.resolve()):
        raise BackupError(f"{dest} is inside the state directory {source}", refused=True)
    created = _prepare_dest(dest)
    try:
        report = _copy(source, dest, say)
    except BaseException:
        # Never leave a partial copy that looks like a backup.
        _empty(dest)
        if created:
            dest.rmdir()
        raise
    report.duration_s = time.monotonic() - started
    return report


def _copy(source: Path, dest: Path, say: Callable[[str], None]) -> BackupReport:
    for attempt in range(1, _ATTEMPTS + 1):
        report = BackupReport(attempts=attempt)
        try:
            if _attempt(source, dest, report):
                break
            say(f"retained history changed during attempt {attempt} (GC ran): starting again")
        except _Vanished as exc:
            say(f"{exc} vanished during attempt {attempt} (GC ran): starting again")
        _empty(dest)
    else:
        raise BackupError(
            f"{source} changed under every one of {_ATTEMPTS} attempts (GC running all the "
            "time?): lengthen retention's gc_interval_s, or stop the daemon, and try again"
        )
    _sync_tree(dest)
    report.verified = verify(dest)
    if report.verified.problems:
        raise BackupError(f"the copy in {dest} does not verify: {report.verified.problems[0]}")
    report.seq = report.verified.head
    return report


def _prepare_dest(dest: Path) -> bool:
    """Refuse anything but an absent or empty directory; True when it was created here."""
    if dest.exists():
        if not dest.is_dir():
            raise BackupError(f"{dest} exists and is not a directory", refused=True)
        if any(dest.iterdir()):
            raise BackupError(f"{dest} is not empty: give a new or empty directory", refused=True)
        return False
    dest.mkdir(mode=0o700, parents=True)
    fsync_dir(dest.parent)
    return True


def _empty(dest: Path) -> None:
    """Throw away a failed attempt (dest was empty before it)."""
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _read_retained(state: Path) -> bytes | None:
    try:
        return (state / "retained").read_bytes()
    except FileNotFoundError:
        return None


def _attempt(source: Path, dest: Path, report: BackupReport) -> bool:
    """One consistent copy; False when GC published a new floor meanwhile."""
    src, out = source / "state", dest / "state"
    retained = _read_retained(src)
    make_dir(out)
    toml = source / "reynd.toml"
    if toml.is_file():
        _copy_file(toml, dest / toml.name, report)
    # Files that go while the floor stays (rotated audit files, snapshots outside the
    # window, workspace objects nothing names) are not needed: skipped, not retried.
    _copy_tree(source / "events", dest / "events", report, whole_lines=True, missing_ok=True)
    _copy_config(src / "config", out / "config", report)
    _copy_tree(src / "snapshots", out / "snapshots", report, keep=_snapshot_name, missing_ok=True)
    head = _copy_wal(src / "wal", out / "wal", report)
    _write_extent(src / "wal", out / "wal", head)
    _drop_after(out / "snapshots", head)
    for name, keep in (
        ("trees", lambda n: n.isdigit() and int(n) <= head),  # that seq is issued again
        ("manifests", _object_name),
        ("blobs", _object_name),
    ):
        _copy_tree(src / name, out / name, report, keep=keep, missing_ok=True)
    for name in _STATE_FILES:
        if (src / name).is_file():
            _copy_file(src / name, out / name, report, missing_ok=True)
    if _read_retained(src) != retained:
        return False
    if retained is not None:
        _write(out / "retained", retained, report)
    return True


def _snapshot_name(name: str) -> bool:
    return name.endswith(".snap") and not name.startswith(".")


def _object_name(name: str) -> bool:
    return not name.startswith(".tmp-")


# -- files --------------------------------------------------------------------------


def _open_source(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _Vanished(str(path)) from None


def _read_fd(fd: int, limit: int | None = None) -> Iterator[bytes]:
    left = os.fstat(fd).st_size if limit is None else limit
    pos = 0
    while left > 0:
        data = os.pread(fd, min(_CHUNK, left), pos)
        if not data:
            break
        yield data
        pos += len(data)
        left -= len(data)


def _write(path: Path, data: bytes, report: BackupReport) -> None:
    write_durable(path, data, exclusive=True)
    report.files += 1
    report.bytes += len(data)


def _copy_file(
    source: Path,
    dest: Path,
    report: BackupReport,
    *,
    whole_lines: bool = False,
    missing_ok: bool = False,
) -> None:
    """Copy one file through a descriptor opened first (it reads whole even if removed).

    `whole_lines`: stop after the last whole audit line, or gzip member, of an audit file
    (what follows is being written).
    """
    try:
        fd = _open_source(source)
    except _Vanished:
        if missing_ok:
            return
        raise
    try:
        data = b"".join(_read_fd(fd))
    finally:
        os.close(fd)
    if whole_lines:
        data = whole_prefix(data, compressed=source.name.endswith(GZ_SUFFIX))
    _write(dest, data, report)


def _copy_tree(
    source: Path,
    dest: Path,
    report: BackupReport,
    *,
    keep: Callable[[str], bool] = lambda _: True,
    whole_lines: bool = False,
    missing_ok: bool = False,
) -> None:
    """Copy a directory and its subdirectories (fan-out) when it exists.

    `missing_ok`: a file removed between listing and opening is skipped
    (else the attempt starts again).
    """
    if not source.is_dir():
        return
    make_dir(dest)
    for entry in sorted(source.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            _copy_tree(
                entry,
                dest / entry.name,
                report,
                keep=keep,
                whole_lines=whole_lines,
                missing_ok=missing_ok,
            )
        elif entry.is_file() and keep(entry.name):
            _copy_file(
                entry, dest / entry.name, report, whole_lines=whole_lines, missing_ok=missing_ok
            )


def _copy_config(source: Path, dest: Path, report: BackupReport) -> None:
    """config.db through the online backup API, then index.log, then the generations."""
    if not source.is_dir():
        return
    make_dir(dest)
    db = source / "config.db"
    if db.is_file():
        _backup_sqlite(db, dest / "config.db", report)
    if (source / "index.log").is_file():
        _copy_file(source / "index.log", dest / "index.log", report, whole_lines=True)
    _copy_tree(
        source / "generations",
        dest / "generations",
        report,
        keep=lambda n: n.endswith(".db") and not n.startswith("."),
    )


def _backup_sqlite(source: Path, dest: Path, report: BackupReport) -> None:
    # Read-only: the copy must not create, roll back or migrate anything in the source.
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        create_empty(dest)  # 0600, as the daemon makes it
        dst = sqlite3.connect(dest)
        try:
            src.backup(dst)  # all pages in one step, under one read transaction
        finally:
            dst.close()
    finally:
        src.close()
    fd = os.open(dest, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    report.files += 1
    report.bytes += dest.stat().st_size


def _copy_wal(source: Path, dest: Path, report: BackupReport) -> int:
    """Sealed segments whole, the active one to its last complete record; returns the head."""
    make_dir(dest)
    names = sorted(p.name for p in source.iterdir() if p.suffix == SUFFIX and p.is_file())
    # Open them all before reading any: a segment GC removes meanwhile still reads whole.
    fds: list[int] = []
    try:
        for name in names:
            fds.append(_open_source(source / name))
        head = int(names[-1][: -len(SUFFIX)]) - 1 if names else 0
        for i, (name, fd) in enumerate(zip(names, fds, strict=True)):
            path = dest / name
            out = open_private(path, os.O_WRONLY | os.O_EXCL | os.O_CLOEXEC)
            try:
                for data in _read_fd(fd):
                    write_all(out, data)
                    report.bytes += len(data)
                report.files += 1
                if i == len(names) - 1:
                    head = _cut_active(path, out, head)
                os.fsync(out)
            finally:
                os.close(out)
        return head
    finally:
        for fd in fds:
            os.close(fd)


def _write_extent(source: Path, dest: Path, head: int) -> None:
    """The copy's own extent: the segments it holds, durable up to its cut.

    Never the source's: that one may list a segment or a watermark past the
    cut, which the copy does not hold and a start on it would refuse.
    """
    accepted = load_extent(source)
    lost = accepted.lost if accepted is not None else []
    save_extent(dest, LogExtent(segments=present_segments(dest), issued=head, lost=lost))


def _cut_active(path: Path, fd: int, head: int) -> int:
    """Cut the copy of the active segment after its last complete record; its seq, or `head`.

    The scan a start makes (checksums, seqs, whole atomic batches), cutting
    nothing but the copy: a record or batch the daemon was still writing is
    not in the backup. Sealed segments are verified with everything else.
    """
    seg = Segment(int(path.stem), path)
    scan_segment(seg, last=True, on_record=lambda *_: None, report=RecoveryReport(), cut=False)
    os.ftruncate(fd, seg.size)
    return seg.last_seq if seg.offsets else head


def _drop_after(snapshots: Path, head: int) -> None:
    """Snapshots past the copied WAL's head (cut from records the copy does not hold)."""
    if not snapshots.is_dir():
        return
    for path in snapshots.iterdir():
        if path.stem.isdigit() and int(path.stem) > head:
            path.unlink()


def _sync_tree(root: Path) -> None:
    """fsync every directory of the copy, deepest first (the files were synced as written)."""
    for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda w: -w[0].count(os.sep)):
        fsync_dir(Path(dirpath))
    fsync_dir(root.parent)

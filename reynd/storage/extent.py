"""The log's acknowledged extent, recorded apart from the segment files (`state/wal/extent`).

A segment file that disappears (deleted, lost in a copy) leaves a log that
still reads as intact when it was the newest one: the head is simply lower,
and the next append would issue a seq that was acknowledged before. This
file is what says otherwise. One framed JSON line (the WAL's framing):

    {"crc":"...","len":N,"rec":{"version":1,"segments":[1,412345],"issued":412344,"lost":[]}}

- `segments`: the first seq of every segment created (and not collected since).
- `issued`: a seq known durable when the file was written: the log never ends below it.
  Written when a segment is created (the one before it is synced then: `first - 1`)
  and when the daemon stops cleanly (its head), never per commit.
- `lost`: `[first, last, why]` of every loss an operator accepted (`reynd repair`).

Together with what other files prove (a snapshot of seq S, a segment index
of a segment that is gone, a config generation of seq S: each needs the log
to reach S), a start or a verification compares it with what the segment
files hold (`find_loss`). Pure logic here, file reading in `gather`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from reynd.storage.errors import CorruptionError, StorageError, UnsupportedVersion
from reynd.storage.framing import FrameInvalid, encode_frame, next_frame
from reynd.storage.fsutil import atomic_write
from reynd.storage.segindex import HEADER
from reynd.storage.segments import SUFFIX, segment_path

__all__ = [
    "EXTENT_VERSION",
    "NAME",
    "Evidence",
    "ExtentLost",
    "LogExtent",
    "Loss",
    "find_loss",
    "gather",
    "load_extent",
    "present_segments",
    "save_extent",
]

EXTENT_VERSION: Final = 1
NAME: Final = "extent"


class LogExtent(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = EXTENT_VERSION
    segments: list[int] = []
    issued: int = 0
    lost: list[tuple[int, int, str]] = []


class ExtentLost(CorruptionError):
    """The segment files hold less than the state directory proves was acknowledged.

    A CorruptionError (of the WAL directory, at the first missing seq) whose
    message names the missing range and the repair that accepts the loss.
    """

    def __init__(self, loss: Loss, state_root: Path) -> None:
        self.loss = loss
        self.path, self.offset, self.seq = state_root / "state" / "wal", 0, loss.first
        self.reason = loss.describe()
        StorageError.__init__(  # not CorruptionError's message: there is no record to cut at
            self,
            f"{loss.describe()}. Nothing was started. Bring the missing segment file(s) "
            "back if a copy exists (a backup, `reynd restore`); otherwise run "
            f"`reynd repair --state-dir {state_root} --accept-lost-segments` to record "
            "the loss: the missing seqs become `lost` records and no seq is issued twice",
        )


def load_extent(wal_dir: Path) -> LogExtent | None:
    """The file's content; None when there is none (a new or pre-extent state directory)."""
    path = wal_dir / NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        body, _ = next_frame(data, 0)
        extent = msgspec.json.decode(body, type=LogExtent)
    except (FrameInvalid, msgspec.DecodeError) as exc:
        # Written atomically, so never torn: damage. No record to cut here (not CorruptionError).
        raise StorageError(
            f"{path} is damaged ({exc}): it records how far the log reached. Check that no "
            "segment file is missing (a backup, the replica), then remove it: the next start "
            "writes it again from the segment files"
        ) from None
    if extent.version > EXTENT_VERSION:
        raise UnsupportedVersion(
            f"{path} has version {extent.version}; this reynd reads up to "
            f"{EXTENT_VERSION}: run the newer reynd that wrote it"
        )
    return extent


def save_extent(wal_dir: Path, extent: LogExtent) -> None:
    """Publish atomically (tmp, fsync, rename, fsync the directory)."""
    atomic_write(wal_dir / NAME, encode_frame(msgspec.json.encode(extent)))


def present_segments(wal_dir: Path) -> list[int]:
    """First seqs of the segment files on disk, ascending (names that are not seqs skipped)."""
    if not wal_dir.is_dir():
        return []
    return sorted(int(p.stem) for p in wal_dir.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the state directory proves about the log, apart from its segment files."""

    wal_dir: Path
    extent: LogExtent | None
    present: list[int]  # segment files on disk
    proofs: list[tuple[int, str]] = field(default_factory=list)  # (seq the log must reach, why)

    @property
    def missing(self) -> list[int]:
        """Segments the extent lists whose file is gone (collected ones, below the first, aside)."""
        if self.extent is None:
            return []
        low = self.present[0] if self.present else 0
        have = set(self.present)
        return [s for s in self.extent.segments if s >= low and s not in have]


@dataclass(frozen=True, slots=True)
class Loss:
    """Seqs `first..last` are acknowledged but not in the log (`last < first`: none proven)."""

    head: int
    first: int
    last: int
    missing: tuple[Path, ...]
    why: str

    def describe(self) -> str:
        files = ", ".join(str(p) for p in self.missing)
        gone = f"segment file {files} is gone" if files else "no segment file holds them"
        if self.last >= self.first:
            return (
                f"the log ends at seq {self.head} but seqs {self.first}..{self.last} were "
                f"acknowledged ({self.why}): {gone}"
            )
        return (
            f"the log ends at seq {self.head} but {gone} (seqs from {self.first} on; "
            "how many it held is not recorded)"
        )


def find_loss(head: int, evidence: Evidence) -> Loss | None:
    """The acknowledged seqs the log lacks, or None when it holds everything proven (pure)."""
    missing = evidence.missing
    proven, why = max(evidence.proofs, default=(0, ""))
    if not missing and proven <= head:
        return None
    paths = tuple(segment_path(evidence.wal_dir, s) for s in missing)
    first = min([head + 1, *missing])
    return Loss(head, first, max(proven, first - 1), paths, why or "the extent file")


def gather(state_dir: Path) -> Evidence:
    """Read what proves the log's reach: the extent file, snapshots, indexes, config seqs.

    Only reads. Index files count only for segments the extent lists whose
    file is gone (an index of a present segment is checked against it; one
    of an unlisted segment may be of another history).
    """
    wal_dir = state_dir / "wal"
    extent = load_extent(wal_dir)
    present = present_segments(wal_dir)
    evidence = Evidence(wal_dir, extent, present)
    proofs = evidence.proofs
    if extent is not None and extent.issued:
        proofs.append((extent.issued, f"{wal_dir / NAME} records seq {extent.issued} as durable"))
    if extent is not None and extent.segments:
        newest = max(extent.segments)
        proofs.append(
            (newest - 1, f"segment {newest} was created once seq {newest - 1} was durable")
        )
    snapshot = _newest_snapshot(state_dir / "snapshots")
    if snapshot:
        proofs.append((snapshot, f"snapshot {snapshot} covers it"))
    for first in evidence.missing:
        last = _index_reach(state_dir / "index" / f"{first:020d}.idx")
        if last:
            proofs.append((last, f"the index of the missing segment {first} describes it"))
    config = _config_reach(state_dir / "config" / "index.log")
    if config:
        proofs.append((config, f"{state_dir / 'config' / 'index.log'} names seq {config}"))
    return evidence


def _newest_snapshot(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return max(
        (int(p.stem) for p in directory.iterdir() if p.suffix == ".snap" and p.stem.isdigit()),
        default=0,
    )


def _index_reach(path: Path) -> int:
    """The last seq the intact chunk headers of an index file describe (0: none)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    pos = last = 0
    size = HEADER.size
    while len(data) - pos >= size:
        _, _, first, count, length, _, header_crc = HEADER.unpack_from(data, pos)
        if zlib.crc32(data[pos : pos + size - 4]) != header_crc or count < 1:
            break
        last = first + count - 1  # a chunk describes only records already durable
        pos += size + length
    return last


def _config_reach(path: Path) -> int:
    """The highest seq an intact line of the config store's index.log names (0: none)."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    best = 0
    for line in data.split(b"\n"):
        if len(line) < 10 or line[8:9] != b" ":
            continue
        try:
            if int(line[:8], 16) != zlib.crc32(line[9:]):
                continue
        except ValueError:
            continue
        words = line[9:].split()
        # gen <seq> <hash> | reset <R> <target> | restored <R> | base <seq>
        if len(words) >= 2 and words[0] in (b"gen", b"reset", b"restored", b"base"):
            try:
                best = max(best, int(words[1]))
            except ValueError:
                continue
    return best

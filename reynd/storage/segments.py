"""WAL segment files: names, and the in-memory index of one segment."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SUFFIX", "TORN_DIR", "Segment", "segment_path"]

SUFFIX = ".jsonl"
TORN_DIR = "torn"


def segment_path(wal_dir: Path, first_seq: int) -> Path:
    """Fixed-width names so that a plain sort orders segments by seq."""
    return wal_dir / f"{first_seq:020d}{SUFFIX}"


@dataclass(slots=True)
class Segment:
    first_seq: int
    path: Path
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    size: int = 0  # end of the last durable record
    last_ts: float = 0.0  # time of the last record (retention by age)
    indexed: int = 0  # records 0..indexed-1 are described by its index file (indexfiles.py)

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.offsets) - 1

"""WAL segment files: names, preallocated space, and the in-memory index of one segment.

The segment being written is preallocated: the writer fills it with newlines
ahead of its records (FILL), so that an append overwrites blocks the file
already has and its fdatasync need not commit a new file size. Whatever
follows the last record of the last segment and is only newlines or zero
bytes (what a crash can leave of an extension) is that space, not a torn
record. A segment is trimmed to its records when it is sealed or the log is
closed.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FILL", "PREALLOCATE", "SUFFIX", "TORN_DIR", "Segment", "content_end", "segment_path"]

SUFFIX = ".jsonl"
TORN_DIR = "torn"
FILL = b"\n"  # blank lines: the file stays readable by jq and grep while it is written
PREALLOCATE = 1 << 20  # how far ahead of its records the writer fills a segment
_SPACE = b"\n\0"  # a crash can leave an extension's blocks zeroed


def content_end(data: bytes, start: int) -> int:
    """Where the preallocated space at the end of `data[start:]` begins (`start`: all of it).

    A record's closing newline (after its `}`) is its own, not space: it is counted in.
    """
    kept = len(data[start:].rstrip(_SPACE))
    if kept == 0:
        return start
    end = start + kept
    return end + 1 if data[end - 1 : end + 1] == b"}\n" else end


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

"""Reading the audit log back: decoded lines per file, cached (files only grow)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from reynd.audit.codec import whole_lines
from reynd.audit.record import AuditLine

__all__ = ["LineCache", "Loaded"]


@dataclass(slots=True)
class Loaded:
    """What a read found: lines per run (ascending index) and lines it could not decode."""

    runs: dict[str, list[AuditLine]] = field(default_factory=dict)
    damaged: int = 0


@dataclass(slots=True)
class _Entry:
    ino: int
    done: int = 0  # bytes of the file read
    weight: int = 0  # bytes of the lines decoded from them: what the budget counts
    lines: list[AuditLine] = field(default_factory=list)
    damaged: int = 0


class LineCache:
    """Decoded lines per file, read incrementally (files only grow), LRU by the bytes of
    the lines held (a compressed file holds about ten times its size)."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._entries: OrderedDict[Path, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def lines(
        self, path: Path, size: int, compressed: bool, decoder: msgspec.json.Decoder[AuditLine]
    ) -> tuple[list[AuditLine], int]:
        with self._lock:
            entry = self._entries.pop(path, None)
            if entry is not None:
                self._bytes -= entry.weight
        try:
            with path.open("rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                if entry is None or entry.ino != ino or entry.done > size:
                    entry = _Entry(ino)
                f.seek(entry.done)
                data = f.read(max(size - entry.done, 0))
        except FileNotFoundError:  # removed by retention since it was listed
            return [], 0
        # A last line without its newline (a member cut short) is still being written.
        text, end, damaged = whole_lines(data, compressed)
        entry.damaged += damaged
        for raw in text.splitlines():
            if not raw.strip():
                continue
            try:
                entry.lines.append(decoder.decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError):
                entry.damaged += 1  # a torn line after a crash, or a newer format
        entry.done += end
        entry.weight += len(text)
        with self._lock:
            self._entries[path] = entry
            self._bytes += entry.weight
            while self._bytes > self._budget and len(self._entries) > 1:
                _, old = self._entries.popitem(last=False)
                self._bytes -= old.weight
        return entry.lines, entry.damaged

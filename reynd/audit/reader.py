"""Reading the audit log back: decoded lines per file, cached (files only grow)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from reynd.audit.record import AuditLine

__all__ = ["LineCache", "Loaded"]


@dataclass(slots=True)
class Loaded:
    """What a read found: lines per run (ascending index) and lines it could not decode."""

    runs: dict[str, list[AuditLine]] = field(default_factory=dict)
    damaged: int = 0


class LineCache:
    """Decoded lines per file, read incrementally (files only grow), LRU by bytes."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        # path -> (inode, bytes decoded, lines, damaged lines)
        self._entries: OrderedDict[Path, tuple[int, int, list[AuditLine], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def lines(
        self, path: Path, size: int, decoder: msgspec.json.Decoder[AuditLine]
    ) -> tuple[list[AuditLine], int]:
        with self._lock:
            entry = self._entries.pop(path, None)
            if entry is not None:
                self._bytes -= entry[1]
        try:
            with path.open("rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                if entry is None or entry[0] != ino or entry[1] > size:
                    entry = (ino, 0, [], 0)
                _, done, lines, damaged = entry
                f.seek(done)
                data = f.read(max(size - done, 0))
        except FileNotFoundError:  # removed by retention since it was listed
            return [], 0
        end = data.rfind(b"\n") + 1  # a last line without its newline is still being written
        for raw in data[:end].splitlines():
            if not raw.strip():
                continue
            try:
                lines.append(decoder.decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError):
                damaged += 1  # a torn line after a crash, or a newer format
        done += end
        with self._lock:
            self._entries[path] = (ino, done, lines, damaged)
            self._bytes += done
            while self._bytes > self._budget and len(self._entries) > 1:
                _, old = self._entries.popitem(last=False)
                self._bytes -= old[1]
        return lines, damaged

"""The timeline's JSON, its rows encoded in chunks counted from the oldest (pure).

Rows only ever come on top of a layout kept per head (`Timeline`): after a
write or a reset the oldest rows are the same objects as before, so only the
chunks holding rows that changed are encoded again, and the 4 MB body of
22,000 rows is the other chunks joined (encoding it whole took 8-15 ms).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["CHUNK", "Body"]

CHUNK = 1024  # rows per chunk


class Body:
    """`encode` a layout; told by `changed` how many of its oldest rows a change kept."""

    def __init__(self, chunk: int = CHUNK) -> None:
        self._chunk = chunk
        self._chunks: list[bytes] = []  # oldest first: the rows from the end, comma-joined
        self._kept = 0  # rows from the end as they were when the chunks were encoded

    def changed(self, kept: int) -> None:
        """The layout changed but for its `kept` oldest rows (the same objects); 0: all."""
        self._kept = min(self._kept, kept)

    def encode(self, layout: dict[str, Any]) -> bytes:
        """`layout` as JSON (`rows` last), the chunks of unchanged rows as they were."""
        rows: list[dict[str, Any]] = layout["rows"]
        n, size = len(rows), self._chunk
        full = n // size
        del self._chunks[min(len(self._chunks), self._kept // size, full) :]
        for j in range(len(self._chunks), full):
            self._chunks.append(msgspec.json.encode(rows[n - (j + 1) * size : n - j * size])[1:-1])
        self._kept = n
        parts = [msgspec.json.encode(rows[: n - full * size])[1:-1]] if n > full * size else []
        parts += reversed(self._chunks)
        rest = msgspec.json.encode({k: v for k, v in layout.items() if k != "rows"})
        return rest[:-1] + b',"rows":[' + b",".join(parts) + b"]}"

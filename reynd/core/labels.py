"""An append-only sequence of short strings that loads in bulk without making a str each.

The catalog's labels. Strings appended one by one are kept as they are; a run
loaded from a segment index stays as it was stored (UTF-8 bytes and the end
offset of each string) and a string is decoded only when it is read, which
makes loading a run a copy of two buffers whatever its length. Pure code.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["Labels", "Packed"]


@dataclass(frozen=True, slots=True)
class Packed:
    """Strings as one UTF-8 buffer: string i is data[ends[i - 1]:ends[i]] (ends[-1] = 0)."""

    data: bytes
    ends: array[int]  # "I", non-decreasing

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> str:
        start = self.ends[i - 1] if i else 0
        # A damaged buffer (that still passed its checksum) reads as
        # replacement characters, never as an exception in a query.
        return self.data[start : self.ends[i]].decode("utf-8", "replace")

    @classmethod
    def pack(cls, strings: list[str]) -> Packed:
        encoded = [s.encode() for s in strings]
        ends: array[int] = array("I")
        total = 0
        for b in encoded:
            total += len(b)
            ends.append(total)
        return cls(b"".join(encoded), ends)

    def slice(self, a: int, b: int) -> Packed:
        """Strings a..b-1, packed."""
        if a >= b:
            return Packed(b"", array("I"))
        base = self.ends[a - 1] if a else 0
        ends = self.ends[a:b]
        if base:
            ends = array("I", (e - base for e in ends))
        return Packed(self.data[base : self.ends[b - 1]], ends)


class Labels:
    """A list of strings, appended singly (`append`) or by packed runs (`extend_packed`)."""

    def __init__(self) -> None:
        self._runs: list[list[str] | Packed] = []
        self._bases: list[int] = []  # index of each run's first string
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def append(self, label: str) -> None:
        if not self._runs or isinstance(self._runs[-1], Packed):
            self._runs.append([])
            self._bases.append(self._len)
        run = self._runs[-1]
        assert isinstance(run, list)
        run.append(label)
        self._len += 1

    def extend_packed(self, packed: Packed) -> None:
        if not len(packed):
            return
        self._runs.append(packed)
        self._bases.append(self._len)
        self._len += len(packed)

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < self._len:
            raise IndexError(i)
        k = bisect_right(self._bases, i) - 1
        return self._runs[k][i - self._bases[k]]

    def packed(self, a: int, b: int) -> Packed:
        """Strings a..b-1 as one packed run."""
        b = min(b, self._len)
        if a >= b:
            return Packed(b"", array("I"))
        k = bisect_right(self._bases, a) - 1
        pieces: list[Packed] = []
        while a < b:
            run, base = self._runs[k], self._bases[k]
            stop = min(b, base + len(run))
            if isinstance(run, Packed):
                pieces.append(run.slice(a - base, stop - base))
            else:
                pieces.append(Packed.pack(run[a - base : stop - base]))
            a = stop
            k += 1
        if len(pieces) == 1:
            return pieces[0]
        data = bytearray()
        ends: array[int] = array("I")
        for piece in pieces:
            offset = len(data)
            data += piece.data
            ends.extend(e + offset for e in piece.ends)
        return Packed(bytes(data), ends)

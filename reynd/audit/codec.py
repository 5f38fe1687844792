"""How audit lines sit in a file: plain JSON lines, or gzip members of whole lines.

Two formats, told apart by the file name (files.py):

- format 1, `<run>[.<n>].jsonl` (before issue 29): the lines as they are;
- format 2, `<run>[.<n>].jsonl.gz`: each flush is one gzip member (RFC 1952)
  holding whole lines. A file of members is a gzip file (`zcat` reads it, and
  then `jq`), and a reader that finds a member cut short (the daemon writing
  it, or a crash) stops before it, as format 1 stops before a line without its
  newline.

An audit line carries its WAL event whole, so the log repeated every payload
the WAL holds: 12.7 KB a turn of LangGraph checkpoints beside the WAL's 11.2 KB.
Compressed (zlib level 6) it takes 1.4 KB, for ~5 µs of a worker thread per KB.
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["GZ_SUFFIX", "compress", "whole_lines", "whole_prefix"]

GZ_SUFFIX: Final = ".gz"
_LEVEL: Final = 6
_GZIP_WBITS: Final = 31  # zlib's gzip container
_PIECE: Final = 64 * 1024


def compress(lines: bytes) -> bytes:
    """One gzip member holding `lines` (whole lines)."""
    c = zlib.compressobj(_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(lines) + c.flush()


def whole_lines(data: bytes, compressed: bool) -> tuple[bytes, int, bool]:
    """The whole lines at the start of `data`: (lines, bytes of `data` they took, damaged).

    Plain: up to the last newline. Compressed: the complete members, each
    decompressed; a member cut short ends the read (it is being written), and
    one that does not decompress too, `damaged` then set (its end, and so the
    next member's start, cannot be known).
    """
    if not compressed:
        end = data.rfind(b"\n") + 1
        return data[:end], end, False
    view = memoryview(data)
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        d = zlib.decompressobj(_GZIP_WBITS)
        member: list[bytes] = []
        fed = pos
        try:
            # In pieces: what is left over after a member's end is at most one piece,
            # so a file of many members is read in time linear in its size.
            while not d.eof and fed < len(data):
                piece = view[fed : fed + _PIECE]
                member.append(d.decompress(piece))
                fed += len(piece)
        except zlib.error:
            return b"".join(out), pos, True
        if not d.eof:
            break
        out += member
        pos = fed - len(d.unused_data)
    return b"".join(out), pos, False


def whole_prefix(data: bytes, compressed: bool) -> bytes:
    """The longest start of a file's bytes made of whole lines (or members): a copy of it
    reads back as the file did, without what was still being written."""
    return data[: whole_lines(data, compressed)[1]]

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
Compressed (zlib level 6) it takes 1.4 KB, for ~5 µs of a worker thread per KB. Since the
WAL's LangGraph values are deflated already (base64 in the lines), most of what is left is
ids and digits: level 9 takes 3% fewer bytes than 6 for ~30% more of that time (any level
reads back the same: not a format change).
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["GZ_SUFFIX", "compress", "whole_lines", "whole_prefix"]

GZ_SUFFIX: Final = ".gz"
_LEVEL: Final = 9
_GZIP_WBITS: Final = 31  # zlib's gzip container
_PIECE: Final = 64 * 1024
_MAGIC: Final = b"\x1f\x8b\x08"  # a gzip member's first bytes (RFC 1952: ID1, ID2, CM deflate)


def compress(lines: bytes) -> bytes:
    """One gzip member holding `lines` (whole lines)."""
    c = zlib.compressobj(_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(lines) + c.flush()


def whole_lines(data: bytes, compressed: bool) -> tuple[bytes, int, int]:
    """The whole lines in `data`: (lines, bytes of `data` read, members found damaged).

    Plain: up to the last newline. Compressed: the complete members, each
    decompressed. A member cut short at the end is being written: the read
    stops before it (and goes on from there next time). A member that does not
    decompress, or is cut short with more data after it (a crash or a bad
    block; the log is never synced), is damaged: the read goes on from the next
    gzip header from which a whole member decodes, as a plain read goes on at
    the next line; with none, it ends past the damage.
    """
    if not compressed:
        end = data.rfind(b"\n") + 1
        return data[:end], end, 0
    out, end, damaged = _scan(data, keep=True)
    return b"".join(out), end, damaged


def whole_prefix(data: bytes, compressed: bool) -> bytes:
    """The longest start of a file's bytes made of whole lines (or members): a copy of it
    reads back as the file did, without what was still being written."""
    if not compressed:
        return data[: data.rfind(b"\n") + 1]
    return data[: _scan(data, keep=False)[1]]


def _scan(data: bytes, *, keep: bool) -> tuple[list[bytes], int, int]:
    view = memoryview(data)
    out: list[bytes] = []
    pos = damaged = 0
    while pos < len(data):
        whole, lines, end = _member(view, pos, keep)
        if whole:
            out += lines
            pos = end
            continue
        found = _next_whole(data, view, pos + 1, keep)
        if found is None:
            if end < 0:  # does not decompress, and nothing readable after it
                damaged += 1
                pos = len(data)
            break  # else cut short at the end: being written
        damaged += 1
        out += found[0]
        pos = found[1]
    return out, pos, damaged


def _member(view: memoryview, pos: int, keep: bool) -> tuple[bool, list[bytes], int]:
    """The member at `pos`: (True, its lines, its end); (False, [], pos) when it is cut
    short; (False, [], -1) when it does not decompress."""
    d = zlib.decompressobj(_GZIP_WBITS)
    lines: list[bytes] = []
    fed = pos
    try:
        # In pieces: what is left over after a member's end is at most one piece,
        # so a file of many members is read in time linear in its size.
        while not d.eof and fed < len(view):
            piece = view[fed : fed + _PIECE]
            text = d.decompress(piece)
            if keep:
                lines.append(text)
            fed += len(piece)
    except zlib.error:
        return False, [], -1
    if not d.eof:
        return False, [], pos
    return True, lines, fed - len(d.unused_data)


def _next_whole(
    data: bytes, view: memoryview, start: int, keep: bool
) -> tuple[list[bytes], int] | None:
    """The first whole member at a gzip header from `start` on: (its lines, its end)."""
    at = data.find(_MAGIC, start)
    while at >= 0:
        whole, lines, end = _member(view, at, keep)
        if whole:
            return lines, end
        at = data.find(_MAGIC, at + 1)
    return None

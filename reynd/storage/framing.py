"""The WAL's on-disk record framing (see docs/format.md).

One record per line, each line a JSON object that standard tools can read:

    {"crc":"1a2b3c4d","len":57,"rec":{...the event...}}\\n

`len` is the byte length of the `rec` value and `crc` its CRC-32 (zlib) in
lowercase hex. A line that does not have exactly this shape, whose length
does not land on the closing `}\\n`, or whose checksum fails is invalid.
"""

from __future__ import annotations

import re
import zlib
from typing import Final

__all__ = ["FRAME_OVERHEAD_MAX", "FrameInvalid", "encode_frame", "next_frame"]

# The header up to the body, matched in one C call; the body must then end on `}\n`.
_HEADER: Final = re.compile(rb'\{"crc":"([0-9a-f]{8})","len":(\d{1,10}),"rec":')
_TAIL: Final = b"}\n"
FRAME_OVERHEAD_MAX: Final = len(b'{"crc":"12345678","len":1234567890,"rec":}\n')


class FrameInvalid(Exception):
    """The bytes at this offset are not a valid record."""


def encode_frame(body: bytes) -> bytes:
    """Frame one encoded event."""
    return b'{"crc":"%08x","len":%d,"rec":%b}\n' % (zlib.crc32(body), len(body), body)


def next_frame(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Parse the record at `pos`: return its body and the offset just past it.

    Raises FrameInvalid (with the reason) for anything but a whole, intact
    record, including a record cut short by the end of `buf`.
    """
    m = _HEADER.match(buf, pos)
    if m is None:
        if pos >= len(buf):
            raise FrameInvalid("end of data")
        if len(buf) - pos < FRAME_OVERHEAD_MAX and b"\n" not in buf[pos:]:
            raise FrameInvalid("record cut short")
        raise FrameInvalid("bad record header")
    start = m.end()
    end = start + int(m.group(2))
    if end + 2 > len(buf):
        raise FrameInvalid("record cut short")
    if buf[end : end + 2] != _TAIL:
        raise FrameInvalid("length does not match the record")
    body = buf[start:end]
    if zlib.crc32(body) != int(m.group(1), 16):
        raise FrameInvalid("checksum mismatch")
    return body, end + 2

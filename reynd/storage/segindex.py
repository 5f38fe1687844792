"""The segment index format: what start-up rebuilds about a WAL segment, written down.

Pure code, no I/O. A segment index (`state/index/<first seq, 20 digits>.idx`,
see indexfiles.py for the files and docs/format.md for the layout) is a run of
chunks. Each chunk describes the next records of its segment, in seq order,
exactly as a scan of them would rebuild it: where each record starts, the
reset records among them (lineage), the generations they cut (catalog), the
seqs of their workspace.files records (workspace rewind), and enough of the
last one (end offset, checksum, time) to check cheaply that the segment still
holds what the chunk describes.

A chunk is a 44-byte little-endian header, then a msgpack payload:

    magic "REYNSIDX" | version u32 | first seq u64 | record count u64
    | payload length u64 | payload crc32 u32 | header crc32 u32 (over the 40 bytes before it)

The header layout is frozen across versions: the version is believed only when
the header passes its own checksum, so a flipped bit reads as damage, never as
"written by a newer reynd". Both mean the same thing here: the index is not
used, and the segment is scanned.

Version 2 added the workspace.files seqs. A version 1 chunk (reynd before
workspace rewind was tied to the WAL) does not list them, so it is not used
either: the segment is scanned once, and its index written again, as version 2.

Version 3 (issue 24) adds the tag records (`tags`); it also marks segments
that may hold reset records with a reason and who made them, or tag records,
which a reynd reading only version 2 cannot decode: such a reynd does not use the index, scans the
segment and stops at the first such record ("does not decode (was it
written by a newer reynd?)"), instead of trusting the index, serving, and
taking the record for damage when it reads it back. A version 2 chunk is
still complete for this reynd (its writer wrote no such record: no tags) and is used.

Version 4 (issue 25) has the payload of version 3; it marks segments that may
hold a memo or a turn end with an `effect` (what a step did outside reynd),
which a reynd reading up to version 3 refuses to decode: it scans instead of
trusting the index, as above. Versions 2 and 3 are used as they are.

Version 5 (issue 29) deflates the payload (zlib format; the header's length and
crc32 are of the stored, compressed bytes): offsets, seqs and times are mostly
zero bytes, labels repeat; a chunk takes ~0.45 of its bytes (a LangGraph
thread: 384 to ~170 B a turn at T=100). A reynd reading up to version 4 takes
it for a newer one: not used, the segment scanned. Versions 2 to 4 are used as
they are.
"""

from __future__ import annotations

import itertools
import operator
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Final

import msgspec

from reynd.core.catalog import KINDS, Columns
from reynd.core.labels import Packed
from reynd.core.tags import TagRecord

__all__ = [
    "INDEX_VERSION",
    "Chunk",
    "IndexUnusable",
    "decode_index",
    "encode_chunk",
]

# 2: workspace.files seqs (`file_seqs`); 3: issue 24's records; 4: issue 25's step effects;
# 5: the payload deflated
INDEX_VERSION: Final = 5
_COMPRESSED_FROM: Final = 5
# Level 1: within 1% of 6's bytes on real chunks, 4-6x faster (~0.2 us a record); a start
# inflates ~150 MB/s of payload (~6 ms per 100,000 records, on top of ~1 ms to decode them).
_LEVEL: Final = 1
OLDEST_COMPLETE: Final = 2  # older chunks do not list every workspace.files record
MAGIC: Final = b"REYNSIDX"
HEADER: Final = struct.Struct("<8sIQQQII")  # 44 bytes, the last 4 its own crc32
HEADER_SIZE: Final = HEADER.size
_LITTLE: Final = sys.byteorder == "little"
_SMALL: Final = 256  # up to this many agents in a chunk, their ids take one byte
_KIND_CODES: Final = bytes(range(len(KINDS)))


class IndexUnusable(Exception):
    """This index cannot be used as it stands: scan the segment instead. The message says why."""


# Binary fields decode as views into the file's bytes: copied once, into their arrays.
_EMPTY: Final = memoryview(b"")


class _Payload(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    offsets: memoryview  # u64 LE per record: where it starts in the segment
    end: int  # the offset just past the last record
    last_crc: int  # the checksum in the last record's frame
    last_ts: float  # the last record's time
    resets: list[tuple[int, int]] = []  # (seq, target), ascending
    gen_seqs: memoryview = _EMPTY  # u64 LE per generation
    gen_kinds: memoryview = _EMPTY  # u8: index into catalog.KINDS
    gen_agents: memoryview = _EMPTY  # index into `agents`: u8, or u32 LE past 256 agents
    gen_times: memoryview = _EMPTY  # f64 LE
    agents: list[str] = []
    label_data: memoryview = _EMPTY  # the labels, UTF-8, one after the other
    label_ends: memoryview = _EMPTY  # u32 LE per generation: where its label ends in label_data
    file_seqs: memoryview = _EMPTY  # u64 LE per workspace.files record, ascending (version 2)
    tags: list[tuple[int, str, int]] = []  # (seq, name, target or -1) per tag record (version 3)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records first..last of one segment, as a scan of them would index them."""

    first: int
    offsets: array[int]  # "Q"
    end: int
    last_crc: int
    last_ts: float
    resets: tuple[tuple[int, int], ...]
    generations: Columns
    file_ops: array[int]  # "Q": the seqs of its workspace.files records, ascending
    tags: tuple[TagRecord, ...] = ()  # its tag records: (seq, name, target or DELETED)

    @property
    def last(self) -> int:
        return self.first + len(self.offsets) - 1


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Payload)


def _le(values: array[int] | array[float]) -> memoryview:
    if _LITTLE:
        return memoryview(values.tobytes())
    swapped = array(values.typecode, values)
    swapped.byteswap()
    return memoryview(swapped.tobytes())


def _from_le(typecode: str, data: memoryview, what: str) -> array[int]:
    out: array[int] = array(typecode)
    if len(data) % out.itemsize:
        raise IndexUnusable(f"{what} is not a whole number of entries")
    out.frombytes(data)
    if not _LITTLE:
        out.byteswap()
    return out


def encode_chunk(chunk: Chunk) -> bytes:
    """A chunk's bytes: header, then payload."""
    gens = chunk.generations
    payload = _encoder.encode(
        _Payload(
            offsets=_le(chunk.offsets),
            end=chunk.end,
            last_crc=chunk.last_crc,
            last_ts=chunk.last_ts,
            resets=list(chunk.resets),
            gen_seqs=_le(gens.seqs),
            gen_kinds=memoryview(gens.kinds.tobytes()),
            gen_agents=_agent_ids(gens),
            gen_times=_le(gens.times),
            agents=list(gens.names),
            label_data=memoryview(gens.labels.data),
            label_ends=_le(gens.labels.ends),
            file_seqs=_le(chunk.file_ops),
            tags=list(chunk.tags),
        )
    )
    payload = zlib.compress(payload, _LEVEL)
    head = HEADER.pack(
        MAGIC, INDEX_VERSION, chunk.first, len(chunk.offsets), len(payload), zlib.crc32(payload), 0
    )
    return head[:-4] + struct.pack("<I", zlib.crc32(head[:-4])) + payload


def _agent_ids(gens: Columns) -> memoryview:
    if len(gens.names) <= _SMALL:
        return memoryview(array("B", gens.agents).tobytes())
    return _le(gens.agents)


def decode_index(data: bytes, first_seq: int) -> list[Chunk]:
    """Every chunk of the index of the segment that starts at `first_seq`.

    Raises IndexUnusable for anything but a run of intact chunks of this
    version that follow each other record for record from the segment's
    start: damage anywhere (a torn last chunk included) or a newer version
    makes the whole index unusable. What a chunk says about the segment
    itself (that the records are where it says) is checked by the caller.
    """
    chunks: list[Chunk] = []
    pos = 0
    expected_seq, expected_offset = first_seq, 0
    while pos < len(data):
        chunk, pos = _decode_one(data, pos, expected_seq)
        if chunk.offsets[0] != expected_offset:
            raise IndexUnusable(
                f"chunk at byte {pos} starts at offset {chunk.offsets[0]}, "
                f"the previous one ended at {expected_offset}"
            )
        chunks.append(chunk)
        expected_seq, expected_offset = chunk.last + 1, chunk.end
    return chunks


def _framed_payload(data: bytes, pos: int, expected_seq: int) -> tuple[int, int, memoryview, int]:
    """(first seq, count, payload inflated, its stored length) of the chunk header at `pos`,
    checked whole and in order."""
    if len(data) - pos < HEADER_SIZE:
        raise IndexUnusable(f"torn chunk header at byte {pos}")
    magic, version, first, count, length, crc, header_crc = HEADER.unpack_from(data, pos)
    view = memoryview(data)
    if magic != MAGIC:
        raise IndexUnusable(f"no chunk at byte {pos} (bad magic)")
    if zlib.crc32(view[pos : pos + HEADER_SIZE - 4]) != header_crc:
        raise IndexUnusable(f"chunk header checksum mismatch at byte {pos}")
    if version > INDEX_VERSION:
        raise IndexUnusable(
            f"chunk at byte {pos} has version {version}, this reynd reads up to {INDEX_VERSION}"
        )
    if version < OLDEST_COMPLETE:
        # It does not list the workspace.files seqs: what it does list is right, but
        # incomplete. Scanning the segment once rebuilds them, and the index anew.
        raise IndexUnusable(
            f"chunk at byte {pos} has version {version}, written before the index listed "
            f"workspace.files records; it is written again as version {INDEX_VERSION}"
        )
    start = pos + HEADER_SIZE
    if len(data) - start < length:
        raise IndexUnusable(f"torn chunk at byte {pos}")
    payload = view[start : start + length]
    if zlib.crc32(payload) != crc:
        raise IndexUnusable(f"chunk checksum mismatch at byte {pos}")
    if first != expected_seq or count < 1:
        raise IndexUnusable(
            f"chunk at byte {pos} covers seqs {first}..{first + count - 1}, "
            f"expected {expected_seq} onwards"
        )
    if version < _COMPRESSED_FROM:
        return first, count, payload, length
    return first, count, _inflate(payload, pos), length


def _inflate(payload: memoryview, pos: int) -> memoryview:
    try:
        return memoryview(zlib.decompress(payload))
    except zlib.error as exc:
        raise IndexUnusable(f"chunk at byte {pos} does not inflate ({exc})") from None


def _decode_one(data: bytes, pos: int, expected_seq: int) -> tuple[Chunk, int]:
    first, count, payload, stored = _framed_payload(data, pos, expected_seq)
    try:
        p = _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise IndexUnusable(f"chunk at byte {pos} does not decode ({exc})") from None
    label_ends = _from_le("I", p.label_ends, "label ends")
    n = len(label_ends)
    if n and label_ends[-1] != len(p.label_data):
        raise IndexUnusable(f"chunk at byte {pos}: labels and their ends disagree")
    # Kinds and agent ids must index their tables: checked on the bytes, at C speed.
    kinds = bytes(p.gen_kinds)
    if kinds.translate(None, _KIND_CODES):
        raise IndexUnusable(f"chunk at byte {pos} holds an unknown generation kind")
    if len(p.agents) <= _SMALL:
        ids = bytes(p.gen_agents)
        if len(ids) != n or ids.translate(None, bytes(range(len(p.agents)))):
            raise IndexUnusable(f"chunk at byte {pos} holds an unknown agent")
        agents = _widen(ids)
    else:
        agents = _from_le("I", p.gen_agents, "generation agents")
        if len(agents) != n or max(agents, default=0) >= len(p.agents):
            raise IndexUnusable(f"chunk at byte {pos} holds an unknown agent")
    chunk = Chunk(
        first,
        _from_le("Q", p.offsets, "offsets"),
        p.end,
        p.last_crc,
        p.last_ts,
        tuple(p.resets),
        Columns(
            _from_le("Q", p.gen_seqs, "generation seqs"),
            array("B", kinds),
            agents,
            _from_le_float(p.gen_times),
            tuple(p.agents),
            Packed(bytes(p.label_data), label_ends),
        ),
        _from_le("Q", p.file_seqs, "workspace.files seqs"),
        tuple(p.tags),
    )
    _check(chunk, count, pos)
    return chunk, pos + HEADER_SIZE + stored


def _widen(ids: bytes) -> array[int]:
    """u8 ids as an array of u32, without a Python int per id (a strided copy)."""
    wide = bytearray(4 * len(ids))
    wide[0 if _LITTLE else 3 :: 4] = ids
    out: array[int] = array("I")
    out.frombytes(wide)
    return out


def _from_le_float(data: memoryview) -> array[float]:
    out: array[float] = array("d")
    if len(data) % out.itemsize:
        raise IndexUnusable("generation times are not a whole number of entries")
    out.frombytes(data)
    if not _LITTLE:
        out.byteswap()
    return out


def _check(chunk: Chunk, count: int, pos: int) -> None:
    """What a chunk says must hang together (bounds, lengths); cheap, no per-record walk."""
    offsets, first, last = chunk.offsets, chunk.first, chunk.last
    if len(offsets) != count:
        raise IndexUnusable(f"chunk at byte {pos} holds {len(offsets)} offsets, not {count}")
    if not offsets[-1] < chunk.end:
        raise IndexUnusable(f"chunk at byte {pos} ends before its last record")
    prev = first - 1
    for seq, target in chunk.resets:
        if not (prev < seq <= last and 0 <= target < seq):
            raise IndexUnusable(f"chunk at byte {pos} holds an impossible reset {seq} -> {target}")
        prev = seq
    gens = chunk.generations
    n = len(gens.seqs)
    if not len(gens.kinds) == len(gens.agents) == len(gens.times) == len(gens.labels) == n:
        raise IndexUnusable(f"chunk at byte {pos}: generation columns differ in length")
    if n and not (first <= gens.seqs[0] and gens.seqs[-1] <= last):
        raise IndexUnusable(f"chunk at byte {pos} holds generations outside its seqs")
    files = chunk.file_ops
    # Ascending and inside first..last: each run extends the store's list as it is.
    if files and not (
        first <= files[0]
        and files[-1] <= last
        and all(map(operator.lt, files, itertools.islice(files, 1, None)))
    ):
        raise IndexUnusable(f"chunk at byte {pos} holds workspace.files seqs out of order or range")
    tag_seqs = [seq for seq, _, _ in chunk.tags]
    if tag_seqs != sorted(set(tag_seqs)) or any(not first <= s <= last for s in tag_seqs):
        raise IndexUnusable(f"chunk at byte {pos} holds tag records out of order or range")

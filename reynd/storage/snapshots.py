"""Snapshot generations: the full runtime state as of one seq, one file each.

File: `<state>/snapshots/<seq, 20 digits>.snap`, a 36-byte header then the
payload, the RuntimeState encoded as msgpack:

    magic "REYNSNAP" | version u32 | seq u64 | payload length u64
    | payload crc32 u32 | header crc32 u32 (over the 32 bytes before it)

Version 2 deflates the payload (zlib format; length and crc32 are of the
stored, compressed bytes): a state repeats its field names and its records'
text, and compressed it takes ~0.7 of the file (issue 29: a LangGraph
thread's snapshots). Version 1 files (the msgpack as it is) read as before.

The header layout is frozen across format versions: only a header that
passes its own checksum is believed, so a flipped bit in the version field
reads as damage (fall back), never as "written by a newer reynd" (refuse).

A state that msgpack cannot hold (an integer past 64 bits, from a record an
older version acknowledged) raises UnencodableState before anything is
written: the caller skips that snapshot.

Written atomically (tmp, fsync, rename, fsync dir). On open every file is
checked; a damaged one is set aside and an older one (or the WAL) serves
instead. A file from a newer format version is refused: it would be wrong to
guess at it.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from bisect import bisect_right
from pathlib import Path
from typing import Final

import msgspec

from reynd.protocol.state import RuntimeState
from reynd.storage import crashpoints, fsops
from reynd.storage.errors import CorruptionError, UnencodableState, UnsupportedVersion
from reynd.storage.fsutil import fsync_dir, make_dirs, open_private, write_halves

__all__ = [
    "SNAPSHOT_VERSION",
    "SnapshotStore",
    "decode_snapshot",
    "encode_snapshot",
    "pack_state",
    "seal",
]

log = logging.getLogger(__name__)

MAGIC: Final = b"REYNSNAP"
SNAPSHOT_VERSION: Final = 2
_COMPRESSED_FROM: Final = 2  # the first version whose payload is deflated
# Level 6: level 1 takes ~10% more bytes on a large state for ~60% of the time; sealing
# runs on a worker thread (the snapshotter), off the event loop.
_LEVEL: Final = 6
_HEADER: Final = struct.Struct("<8sIQQII")  # 36 bytes, the last 4 its own crc32
SUFFIX: Final = ".snap"

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(RuntimeState)


def encode_snapshot(state: RuntimeState) -> bytes:
    """The whole file for `state` (header + payload); UnencodableState if msgpack cannot hold it."""
    return seal(state.seq, pack_state(state))


def pack_state(state: RuntimeState) -> bytes:
    """`state` as msgpack: the part of a snapshot that must see the state as it is now
    (the event loop's); UnencodableState if msgpack cannot hold it."""
    try:
        return _encoder.encode(state)
    except OverflowError as exc:
        raise UnencodableState(
            f"the state as of seq {state.seq} cannot be written as a snapshot: "
            f"{_holder(state)} holds an integer msgpack cannot hold ({exc}); snapshots are "
            "skipped while it is in the state, so a restart replays more of the WAL"
        ) from None


def seal(seq: int, packed: bytes) -> bytes:
    """The file for the msgpack `packed` of the state as of `seq`: compressed, with its
    header. Pure CPU, any thread."""
    payload = zlib.compress(packed, _LEVEL)
    head = _HEADER.pack(MAGIC, SNAPSHOT_VERSION, seq, len(payload), zlib.crc32(payload), 0)
    return head[:-4] + struct.pack("<I", zlib.crc32(head[:-4])) + payload


def _holder(state: RuntimeState) -> str:
    """Which agent of `state` msgpack cannot hold (for the operator)."""
    for name, agent in state.agents.items():
        try:
            _encoder.encode(agent)
        except OverflowError:
            return f"agent {name!r}"
    return "the state"


def decode_snapshot(data: bytes, path: Path) -> RuntimeState:
    """Validate and decode a snapshot file's bytes.

    Raises UnsupportedVersion for a newer format and CorruptionError for any
    damage, never another exception.
    """
    return _decode(data, path)[0]


def _decode(data: bytes, path: Path) -> tuple[RuntimeState, int]:
    """`decode_snapshot`, and the length of the state's msgpack."""
    if len(data) < _HEADER.size:
        raise CorruptionError(path, 0, None, "snapshot shorter than its header")
    magic, version, seq, length, crc, header_crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptionError(path, 0, None, "not a reynd snapshot (bad magic)")
    if zlib.crc32(data[: _HEADER.size - 4]) != header_crc:
        raise CorruptionError(path, 0, None, "snapshot header checksum mismatch")
    if version > SNAPSHOT_VERSION:
        raise UnsupportedVersion(
            f"{path} has snapshot format version {version}; this reynd reads up to "
            f"{SNAPSHOT_VERSION}. Run the newer reynd that wrote it, or move the file away "
            "to rebuild from the WAL."
        )
    payload = data[_HEADER.size :]
    if len(payload) != length:
        raise CorruptionError(
            path, _HEADER.size, seq, f"payload is {len(payload)} bytes, header says {length}"
        )
    if zlib.crc32(payload) != crc:
        raise CorruptionError(path, _HEADER.size, seq, "snapshot checksum mismatch")
    if version >= _COMPRESSED_FROM:
        payload = _inflate(payload, path, seq)
    try:
        state = _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise CorruptionError(path, _HEADER.size, seq, f"snapshot does not decode: {exc}") from None
    if state.seq != seq:
        raise CorruptionError(path, 0, seq, f"payload is as of seq {state.seq}, header says {seq}")
    return state, len(payload)


def _inflate(payload: bytes, path: Path, seq: int) -> bytes:
    try:
        return zlib.decompress(payload)
    except zlib.error as exc:
        raise CorruptionError(
            path, _HEADER.size, seq, f"snapshot does not decompress: {exc}"
        ) from None


class SnapshotStore:
    """The snapshot files of one state directory, indexed by seq."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.seqs: list[int] = []  # ascending, files known to be intact at open
        self.sizes: dict[int, int] = {}
        # The msgpack bytes of each state (before compression) written or loaded here.
        self.packed: dict[int, int] = {}
        self._times: dict[int, float] = {}  # when each was written (retention by age)

    @classmethod
    def open(cls, directory: Path) -> SnapshotStore:
        """Index the snapshots, dropping leftovers of interrupted writes.

        Contents are checked when a snapshot is loaded (`load`), where a
        damaged file falls back to an older one.
        """
        if make_dirs(directory):
            fsync_dir(directory.parent)
        store = cls(directory)
        for p in directory.iterdir():
            if p.name.startswith(".tmp-"):
                fsops.unlink(p)  # a write that never reached its rename
                continue
            if p.suffix != SUFFIX:
                continue
            try:
                seq = int(p.stem)
            except ValueError:
                continue
            st = p.stat()
            store.seqs.append(seq)
            store.sizes[seq] = st.st_size
            store._times[seq] = st.st_mtime
        store.seqs.sort()
        return store

    def path(self, seq: int) -> Path:
        return self.dir / f"{seq:020d}{SUFFIX}"

    def write(self, data: bytes, seq: int) -> None:
        """Publish an encoded snapshot atomically; safe to call from a worker thread."""
        final = self.path(seq)
        tmp = self.dir / f".tmp-{final.name}"
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            write_halves(fd, data, "snapshot.mid_write")
            fsops.fsync(fd)
        finally:
            fsops.close(fd)
        crashpoints.hit("snapshot.before_rename")
        fsops.replace(tmp, final)
        fsync_dir(self.dir)

    def publish(self, seq: int, packed: bytes) -> int:
        """Seal the msgpack `packed` of the state as of `seq` and `write` it; the file's size.
        Compressing is CPU: a worker thread's work, as `write` is."""
        data = seal(seq, packed)
        self.write(data, seq)
        return len(data)

    def add(self, seq: int, size: int, packed: int | None = None) -> None:
        """Index a snapshot once `write` returned (owner thread); `packed`, if
        known, is the length of its state's msgpack."""
        i = bisect_right(self.seqs, seq)
        if i == 0 or self.seqs[i - 1] != seq:
            self.seqs.insert(i, seq)
        self.sizes[seq] = size
        if packed is not None:
            self.packed[seq] = packed
        self._times.setdefault(seq, time.time())

    def times(self) -> dict[int, float]:
        """When each indexed snapshot was written."""
        return dict(self._times)

    def remove(self, seq: int) -> None:
        """Delete a snapshot retention no longer keeps (owner thread)."""
        fsops.unlink(self.path(seq))
        fsync_dir(self.dir)
        self.seqs.remove(seq)
        del self.sizes[seq]
        self.packed.pop(seq, None)
        self._times.pop(seq, None)

    def load(self, seq: int) -> RuntimeState:
        """Read and validate one snapshot."""
        path = self.path(seq)
        state, self.packed[seq] = _decode(path.read_bytes(), path)
        return state

    def discard(self, seq: int, reason: str) -> None:
        """Set a damaged snapshot aside (renamed, not deleted) and forget it."""
        path = self.path(seq)
        if path.exists():
            fsops.replace(path, path.with_suffix(".damaged"))
            fsync_dir(self.dir)
        log.warning("snapshot %s set aside: %s", path, reason)
        if seq in self.sizes:
            self.seqs.remove(seq)
            del self.sizes[seq]
            self.packed.pop(seq, None)
            self._times.pop(seq, None)

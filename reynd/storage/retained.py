"""What the state directory keeps about WAL history that retention dropped.

`state/retained` is one framed JSON line (the WAL's framing, so it is
checksummed and readable with jq):

    {"crc":"...","len":N,"rec":{"version":1,"floor":F,"next_seq":S,"resets":[[R,T],...]}}

- `tags` (version 2, issue 24; only when there are any): the tag table made by
  the tag records below the floor, `[seq, name, target]` per live tag. A file
  without tags stays version 1, which every reynd reads.

- `resets`: every reset record below the floor. They still shape the lineage
  of what is kept: dropping one would make an abandoned future look active.
- `next_seq`: one past the highest seq ever issued when the file was written;
  the log must never end below it (that would mean newer segments are gone).

Written atomically before any segment is deleted, so after a crash at any
point of a collection the file covers every dropped record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from reynd.storage.errors import CorruptionError, UnsupportedVersion
from reynd.storage.framing import FrameInvalid, encode_frame, next_frame
from reynd.storage.fsutil import atomic_write

__all__ = ["RETAINED_VERSION", "Retained", "decode_retained", "load_retained", "save_retained"]

RETAINED_VERSION: Final = 2  # 2: `tags`
NAME: Final = "retained"


class Retained(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = 1
    floor: int = 1
    next_seq: int = 1
    resets: list[tuple[int, int]] = []
    tags: list[tuple[int, str, int]] = []

    def __post_init__(self) -> None:
        # Version 2 only when it says more: an older reynd then refuses it by
        # its version ("run the newer reynd") instead of losing the tags.
        if self.tags and self.version < 2:
            self.version = 2


def load_retained(state_dir: Path) -> Retained:
    """The file's content; the defaults (nothing dropped) when it does not exist."""
    try:
        data = (state_dir / NAME).read_bytes()
    except FileNotFoundError:
        return Retained()
    return decode_retained(data, state_dir)


def decode_retained(data: bytes, state_dir: Path) -> Retained:
    """The file's content from its bytes (CorruptionError names the file)."""
    path = state_dir / NAME
    try:
        body, _ = next_frame(data, 0)
    except FrameInvalid as exc:
        raise CorruptionError(path, 0, None, f"retained-history file is damaged ({exc})") from None
    try:
        retained = msgspec.json.decode(body, type=Retained)
    except msgspec.DecodeError as exc:
        raise CorruptionError(
            path, 0, None, f"retained-history file does not decode ({exc})"
        ) from None
    if retained.version > RETAINED_VERSION:
        raise UnsupportedVersion(
            f"{path} has version {retained.version}; this reynd reads up "
            f"to {RETAINED_VERSION}: run the newer reynd that wrote it"
        )
    return retained


def save_retained(state_dir: Path, retained: Retained) -> None:
    """Publish atomically (tmp, fsync, rename, fsync the directory)."""
    atomic_write(state_dir / NAME, encode_frame(msgspec.json.encode(retained)))

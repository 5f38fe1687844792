"""What a state directory remembers about replication: who it is, how far it shipped.

- `state/replication.json` (durable, written once or on restore): the
  directory's store id, which claims in a prefix carry, and the generation
  of a prefix it was restored from and may continue (`adopted`).
- `state/replication.progress` (a hint, not synced): the generation and the
  last seq known shipped. Lost or stale, the next start ships more than it
  needed to (a new generation from the floor), never less.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import msgspec

from reynd.storage.fsutil import atomic_write, open_private, write_all

__all__ = [
    "Identity",
    "Progress",
    "forget_progress",
    "load_identity",
    "load_progress",
    "save_identity",
    "save_progress",
]

IDENTITY = "replication.json"
PROGRESS = "replication.progress"


class Identity(msgspec.Struct, kw_only=True, frozen=True):
    store_id: str
    # A restore from `adopted_url` at generation `adopted_generation` may
    # continue that prefix as long as no one claimed a newer generation.
    adopted_url: str | None = None
    adopted_generation: int | None = None


class Progress(msgspec.Struct, kw_only=True, frozen=True):
    url: str
    generation: int
    shipped: int


def new_store_id() -> str:
    return secrets.token_hex(8)


def load_identity(state_dir: Path) -> Identity:
    """This directory's identity, created (durably) on first use."""
    path = state_dir / IDENTITY
    try:
        return msgspec.json.decode(path.read_bytes(), type=Identity)
    except FileNotFoundError:
        identity = Identity(store_id=new_store_id())
        save_identity(state_dir, identity)
        return identity


def save_identity(state_dir: Path, identity: Identity) -> None:
    atomic_write(state_dir / IDENTITY, msgspec.json.encode(identity))


def load_progress(state_dir: Path) -> Progress | None:
    try:
        return msgspec.json.decode((state_dir / PROGRESS).read_bytes(), type=Progress)
    except (OSError, msgspec.DecodeError):
        return None  # a hint: without it, the next generation starts from the floor


def save_progress(state_dir: Path, progress: Progress) -> None:
    """Replace the hint (rename keeps it whole; not synced: losing it costs bytes, not data)."""
    path = state_dir / PROGRESS
    tmp = path.with_name(f".tmp-{PROGRESS}")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        write_all(fd, msgspec.json.encode(progress))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def forget_progress(state_dir: Path) -> None:
    """After `reynd repair`: records below the hint changed, so the next start ships anew."""
    (state_dir / PROGRESS).unlink(missing_ok=True)

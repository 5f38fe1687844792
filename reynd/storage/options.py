"""Tunables of the storage core (the `[storage]` table of reynd.toml)."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["StorageOptions"]


class StorageOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """How the WAL is segmented and how often full snapshots are cut.

    A snapshot is written once the WAL bytes replayed on top of the nearest
    snapshot exceed max(snapshot_min_bytes, snapshot_ratio * that snapshot's
    size, uncompressed): reconstruct(N) then reads at most a bounded multiple of the state's
    own size, whatever the length of history, and snapshots add at most
    1 / snapshot_ratio of the WAL's bytes.
    """

    segment_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 64 * 1024 * 1024
    snapshot_min_bytes: Annotated[int, msgspec.Meta(ge=0)] = 16 * 1024
    snapshot_ratio: Annotated[float, msgspec.Meta(gt=0)] = 1.0

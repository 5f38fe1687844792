"""Tunables of the audit log (the `[audit]` table of reynd.toml)."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["AuditOptions"]

MiB = 1024 * 1024


class AuditOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Rotation, retention and flushing of `<state_dir>/events/`.

    A run's file is rotated before it would pass `file_bytes` on disk (it is
    compressed, codec.py; a gzip member of whole lines is never split).
    Retention removes whole files, oldest first, while the log holds more
    than `max_total_bytes` or more than `max_files` files (0: no limit);
    the file being written is never removed. Lines are buffered in memory and
    written, without fsync, at most `flush_interval_s` after they were
    recorded, or sooner once `buffer_bytes` are waiting.
    """

    # Bytes on disk, compressed (~1/9 of the lines): about as many lines as the
    # 16 MiB and 1 GiB of plain lines these were before issue 29.
    file_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 2 * MiB
    max_total_bytes: Annotated[int, msgspec.Meta(ge=0)] = 128 * MiB
    max_files: Annotated[int, msgspec.Meta(ge=0)] = 0
    flush_interval_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
    buffer_bytes: Annotated[int, msgspec.Meta(ge=0)] = MiB

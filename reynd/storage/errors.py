"""Errors of the storage layer: what went wrong on disk, and where."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CorruptionError", "StorageError", "UnencodableState", "UnsupportedVersion", "WalFailed"]


class StorageError(Exception):
    """Base of storage errors; the message is meant for an operator."""


class CorruptionError(StorageError):
    """A damaged record or file that is not an unacknowledged tail.

    Names the file, the byte offset and the seq expected there, and the
    command that repairs it.
    """

    def __init__(self, path: Path, offset: int, seq: int | None, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.seq = seq
        self.reason = reason
        where = f"{path} at byte {offset}" + (f" (seq {seq})" if seq is not None else "")
        state_dir = path.parent.parent.parent if path.parent.name in ("wal", "snapshots") else None
        fix = (
            f"reynd repair --state-dir {state_dir} --truncate-at {path.name}:{offset}"
            if state_dir is not None
            else "reynd repair"
        )
        super().__init__(
            f"corrupt record in {where}: {reason}. Nothing after it was loaded. "
            f"Inspect the file, then run `{fix}` to cut the log there "
            "(the cut bytes are kept beside it)."
        )


class UnencodableState(StorageError):
    """A state no snapshot can hold: an integer past msgpack's 64 bits.

    Only a record an older version acknowledged can put one there (the door
    now refuses them). Nothing was written; the WAL still covers that state,
    so the snapshot is skipped, never fatal.
    """


class UnsupportedVersion(StorageError):
    """A file written by a newer reynd, in a format this version cannot read."""


class WalFailed(StorageError):
    """A write or sync of the WAL failed earlier: the log refuses every later write.

    What reached the disk is unknown (a failed fsync may have dropped the
    pages for good), so carrying on could acknowledge records after a hole.
    Reopening the store (recovery) is the only way on (docs/durability.md rule 5).
    """

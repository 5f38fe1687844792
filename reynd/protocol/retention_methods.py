"""Params and results of retention.get / set / gc (registered in methods.METHODS)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from reynd.protocol.base import MethodDef, Params, Result

__all__ = [
    "DEFS",
    "GcResult",
    "RetentionGcParams",
    "RetentionGetParams",
    "RetentionInfo",
    "RetentionPolicyInfo",
    "RetentionSetParams",
]

Seq = int
NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class RetentionPolicyInfo(Result, kw_only=True):
    """The policy in force (see docs/operations.md#retention)."""

    wal_keep_records: int
    wal_keep_age_s: float
    wal_keep_bytes: int
    snapshot_keep: int
    snapshot_keep_age_s: float
    gc_interval_s: float


class RetentionGetParams(Params, kw_only=True):
    pass


class RetentionInfo(Result, kw_only=True):
    """`floor`: the lowest seq still in the WAL; `coarse`: snapshot seqs kept below it."""

    policy: RetentionPolicyInfo
    floor: Seq
    head: Seq
    wal_bytes: int
    segments: int
    snapshots: int
    coarse: list[Seq]


class RetentionSetParams(Params, kw_only=True):
    """Change the policy in force; persisted, it overrides reynd.toml and follows rewinds.

    Fields left out keep their value.
    """

    wal_keep_records: NonNegative | None = None
    wal_keep_age_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    wal_keep_bytes: NonNegative | None = None
    snapshot_keep: NonNegative | None = None
    snapshot_keep_age_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    gc_interval_s: Annotated[float, msgspec.Meta(ge=0)] | None = None


class RetentionGcParams(Params, kw_only=True):
    pass


class GcResult(Result, kw_only=True):
    floor_before: Seq
    floor: Seq
    segments_dropped: int
    bytes_dropped: int
    snapshots_dropped: int
    snapshots_written: int
    duration_ms: float


DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "retention.get",
        RetentionGetParams,
        RetentionInfo,
        "The retention policy, the WAL floor and what is kept.",
    ),
    MethodDef(
        "retention.set",
        RetentionSetParams,
        RetentionInfo,
        "Change the retention policy (persisted in state/config/config.db).",
        mutating=True,
    ),
    MethodDef(
        "retention.gc",
        RetentionGcParams,
        GcResult,
        "Collect now what the policy no longer keeps.",
        mutating=True,
    ),
)

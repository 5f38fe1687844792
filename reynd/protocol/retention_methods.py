"""Params and results of retention.get / set / gc and state.du (registered in methods.METHODS)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from reynd.protocol.base import MethodDef, Params, Result

__all__ = [
    "DEFS",
    "BudgetForced",
    "DiskPart",
    "DiskUsage",
    "DuParams",
    "GcFree",
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
    # The default horizon and its budget (0: off; a daemon without them sends none).
    horizon_checkpoints: int = 0
    horizon_age_s: float = 0.0
    budget_bytes: int = 0
    budget_free_pct: float = 0.0


class BudgetForced(Result, kw_only=True):
    """A collection dropped checkpoints of the default horizon because of the disk budget.

    Every seq through `dropped_through_seq` went; `bytes` of WAL in `segments`;
    `budget_bytes`: the budget it applied; `at`: when (Unix seconds).
    """

    dropped_through_seq: Seq
    bytes: int
    segments: int
    budget_bytes: int
    at: float


class RetentionGetParams(Params, kw_only=True):
    pass


class RetentionInfo(Result, kw_only=True):
    """`floor`: the lowest seq still in the WAL; `coarse`: snapshot seqs kept below it.

    `horizon_budget_bytes`: the budget the default horizon has now (None: no
    limit); `budget_forced`: the last collection since the daemon started
    that the budget forced into the horizon, if any.
    """

    policy: RetentionPolicyInfo
    floor: Seq
    head: Seq
    wal_bytes: int
    segments: int
    snapshots: int
    coarse: list[Seq]
    horizon_budget_bytes: int | None = None
    budget_forced: BudgetForced | None = None


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
    horizon_checkpoints: NonNegative | None = None
    horizon_age_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    budget_bytes: NonNegative | None = None
    budget_free_pct: Annotated[float, msgspec.Meta(ge=0, le=100)] | None = None


class RetentionGcParams(Params, kw_only=True):
    pass


class GcResult(Result, kw_only=True):
    """`reason`: in words, why the floor stops where it is (what keeps the oldest segment).

    `budget_forced`: set when the disk budget forced this collection into the
    default horizon (what it dropped there).
    """

    floor_before: Seq
    floor: Seq
    segments_dropped: int
    bytes_dropped: int
    snapshots_dropped: int
    snapshots_written: int
    duration_ms: float
    reason: str = ""
    budget_forced: BudgetForced | None = None


class DuParams(Params, kw_only=True):
    pass


class DiskPart(Result, kw_only=True):
    """One part of the state directory: `path` relative to it, `bytes` the files' sizes.

    `disk_bytes`: what they take on disk (allocated blocks); `files`: how many.
    """

    name: str
    path: str
    bytes: int
    disk_bytes: int
    files: int


class GcFree(Result, kw_only=True):
    """What a collection (retention.gc) would free now, and why not more (`reason`)."""

    bytes: int
    segments: int
    snapshots: int
    floor: Seq
    reason: str


class DiskUsage(Result, kw_only=True):
    """Bytes per part of the state directory (`parts`, largest first), their sum and GC's share.

    Parts: `wal`, `torn` (cut WAL bytes, never deleted by reynd), `snapshots`,
    `index`, `audit` (events/, kept by audit retention, not by GC), `config`,
    `blobs`, `manifests`, `trees` (workspace rewind), `other` (everything
    else under the state directory).
    """

    state_dir: str
    total_bytes: int
    total_disk_bytes: int
    parts: list[DiskPart]
    gc: GcFree


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
    MethodDef(
        "state.du",
        DuParams,
        DiskUsage,
        "What the state directory uses on disk, by part, and what GC could free now.",
    ),
)

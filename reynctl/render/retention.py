"""The retention policy, the floor, and what a collection dropped."""

from __future__ import annotations

import time
from collections.abc import Sequence

from reynctl.render.formats import _plural, format_bytes
from reynctl.render.table import Style, _pairs, table
from reynd.protocol import methods as m

__all__ = ["du_text", "gc_text", "retention_text"]


def _seqs(seqs: Sequence[int], limit: int = 8) -> str:
    if not seqs:
        return "none"
    shown = ", ".join(str(s) for s in seqs[-limit:])
    return shown if len(seqs) <= limit else f"{len(seqs) - limit} older, {shown}"


def _horizon(value: float, unit: str) -> str:
    return "off" if not value else f"{value:g}{unit}"


def retention_text(info: m.RetentionInfo, style: Style) -> str:
    """retention.get: the two windows, the floor and what the policy keeps."""
    p = info.policy
    rows = [
        ("floor", f"seq {info.floor}" + ("" if info.floor > 1 else " (nothing collected)")),
        ("head", f"seq {info.head}"),
        ("wal", f"{format_bytes(info.wal_bytes)} in {_plural(info.segments, 'segment')}"),
        ("snapshots", str(info.snapshots)),
        ("coarse points", _seqs(info.coarse)),
        ("keep records", _horizon(p.wal_keep_records, "")),
        ("keep age", _horizon(p.wal_keep_age_s, " s")),
        ("keep bytes", "off" if not p.wal_keep_bytes else format_bytes(p.wal_keep_bytes)),
        ("keep snapshots", f"{p.snapshot_keep} below the floor"),
        ("snapshot age", _horizon(p.snapshot_keep_age_s, " s")),
        ("gc every", "only on request" if not p.gc_interval_s else f"{p.gc_interval_s:g} s"),
        ("horizon", _default_horizon(p)),
        ("budget", _budget(p, info.horizon_budget_bytes)),
    ]
    if info.budget_forced is not None:
        rows.append(("budget forced", _forced(info.budget_forced)))
    return _pairs(rows, style)


def _default_horizon(p: m.RetentionPolicyInfo) -> str:
    """The default horizon in words: which checkpoints GC keeps unless the budget forces it."""
    parts = []
    if p.horizon_checkpoints:
        parts.append(f"the newest {_plural(p.horizon_checkpoints, 'checkpoint')}")
    if p.horizon_age_s:
        parts.append(f"every checkpoint of the last {p.horizon_age_s:g} s")
    return " or ".join(parts) + " (whichever keeps more)" if parts else "off"


def _budget(p: m.RetentionPolicyInfo, now: int | None) -> str:
    limits = []
    if p.budget_bytes:
        limits.append(format_bytes(p.budget_bytes))
    if p.budget_free_pct:
        limits.append(f"{p.budget_free_pct:g}% of the free space")
    if not limits:
        return "no limit"
    told = " and ".join(limits)
    return told if now is None else f"{format_bytes(now)} now ({told}, the smaller)"


def _forced(f: m.BudgetForced) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(f.at))
    return (
        f"at {when} the budget ({format_bytes(f.budget_bytes)}) dropped seqs through "
        f"{f.dropped_through_seq} inside the horizon ({format_bytes(f.bytes)})"
    )


def gc_text(res: m.GcResult, style: Style) -> str:
    """retention.gc: how far the floor moved and what went."""
    if res.floor == res.floor_before and not res.snapshots_dropped:
        head = f"nothing to collect: the floor stays at seq {res.floor}"
    else:
        head = f"floor seq {res.floor_before} -> {style(str(res.floor), 'bold')}"
    rows = [
        (
            "dropped",
            f"{_plural(res.segments_dropped, 'segment')} ({format_bytes(res.bytes_dropped)}), "
            f"{_plural(res.snapshots_dropped, 'snapshot')}",
        ),
        ("written", _plural(res.snapshots_written, "entry snapshot")),
        ("took", f"{res.duration_ms:.1f} ms"),
    ]
    if res.reason:  # older daemons leave it out
        rows.append(("why", res.reason))
    if res.budget_forced is not None:
        rows.append(("budget forced", _forced(res.budget_forced)))
    return head + "\n" + _pairs(rows, style)


def du_text(du: m.DiskUsage, style: Style) -> str:
    """state.du: a table of the parts (empty ones left out), the total, then what GC frees."""
    rows = [
        (p.name, p.path, format_bytes(p.bytes), format_bytes(p.disk_bytes), str(p.files))
        for p in du.parts
        if p.files
    ]
    rows.append(
        (
            "total",
            du.state_dir,
            format_bytes(du.total_bytes),
            format_bytes(du.total_disk_bytes),
            str(sum(p.files for p in du.parts)),
        )
    )
    parts = table(("part", "path", "bytes", "on disk", "files"), rows, style, align="llrrr")
    gc = du.gc
    free = (
        f"{format_bytes(gc.bytes)} ({_plural(gc.segments, 'segment')}, "
        f"{_plural(gc.snapshots, 'snapshot')}; the floor would be seq {gc.floor})"
    )
    return parts + "\n\n" + _pairs([("gc could free", free), ("why not more", gc.reason)], style)

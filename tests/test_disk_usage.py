"""state.du / `reynctl du`, and why a collection frees nothing (real daemon, real files)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import wait_until
from tests.test_retention_daemon import CONFIG, fill, rows
from tests.test_reynctl_cli import ok, reynctl


def file_bytes(root: Path, pattern: str) -> tuple[int, int]:
    """(bytes, files) of the regular files matching `pattern` under `root`, counted here."""
    found = [p for p in root.glob(pattern) if p.is_file() and not p.is_symlink()]
    return sum(p.stat().st_size for p in found), len(found)


def parts(du: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in du["parts"]}


def test_du_counts_every_part_of_the_state_dir_and_what_gc_would_free(short_tmp: Path) -> None:
    # Snapshots further apart than the 50 records kept (compressed, they come closer).
    config = CONFIG.replace("snapshot_min_bytes = 4096", "snapshot_min_bytes = 32768")
    assert config != CONFIG
    d = start_daemon(short_tmp, config=config)
    try:
        fill(d, "ext", 300)
        d.call("retention.set", {"snapshot_keep": 0, "wal_keep_records": 50})
        du = d.call("state.du")
        got = parts(du)
        root = d.state_dir
        assert (got["wal"]["bytes"], got["wal"]["files"]) == file_bytes(root, "state/wal/*")
        assert got["wal"]["files"] > 2 and got["wal"]["path"] == "state/wal"
        assert (got["snapshots"]["bytes"], got["snapshots"]["files"]) == file_bytes(
            root, "state/snapshots/*"
        )
        assert got["config"]["bytes"] == file_bytes(root, "state/config/**/*")[0] > 0
        assert got["audit"]["path"] == "events"

        def audit_counted() -> bool | None:  # lines reach the files within flush_interval_s
            audit = parts(d.call("state.du"))["audit"]
            return (audit["bytes"], audit["files"]) == file_bytes(root, "events/*") or None

        wait_until(audit_counted, "state.du counting the audit log's files")
        assert parts(d.call("state.du"))["audit"]["bytes"] > 0
        # Every regular file is in exactly one part: the parts add up to the total.
        total = sum(p["bytes"] for p in got.values())
        assert du["total_bytes"] == total
        assert {"wal", "torn", "snapshots", "index", "audit", "config", "other"} <= set(got)
        # What it says GC would free is what a collection then frees.
        free = du["gc"]
        assert free["segments"] > 0 and free["bytes"] > 0
        snap_sizes = {
            int(p.stem): p.stat().st_size for p in (root / "state" / "snapshots").glob("*.snap")
        }
        done = d.call("retention.gc")
        assert done["segments_dropped"] == free["segments"]
        assert done["snapshots_dropped"] == free["snapshots"]
        assert done["floor"] == free["floor"]
        left = {int(p.stem) for p in (root / "state" / "snapshots").glob("*.snap")}
        gone = sum(size for seq, size in snap_sizes.items() if seq not in left)
        assert free["bytes"] == done["bytes_dropped"] + gone, (free, done)
        after = d.call("state.du")
        assert after["gc"]["segments"] == 0 and after["gc"]["bytes"] == 0
        # The floor stops at the newest snapshot (what a restart replays), not at the 50 kept.
        assert "which a restart still replays" in after["gc"]["reason"], after["gc"]["reason"]
    finally:
        d.stop()


def test_reynctl_du_shows_the_parts_and_json_is_the_result(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=CONFIG)
    try:
        fill(d, "ext", 50)
        out = ok(reynctl("du", sock=d.socket))
        lines = out.splitlines()
        assert lines[0].split() == ["part", "path", "bytes", "on", "disk", "files"], out
        names = [line.split()[0] for line in lines[1:] if line.strip()]
        assert "wal" in names and "config" in names and "total" in names, out
        assert "gc could free" in out and "why not more" in out, out
        data = json.loads(ok(reynctl("du", "--json", sock=d.socket)))
        assert parts(data)["wal"]["bytes"] > 0 and "reason" in data["gc"]
    finally:
        d.stop()


def test_gc_on_a_small_install_says_why_it_frees_nothing(short_tmp: Path) -> None:
    """One segment far below the default 64 MiB: nothing to free, and the result says why."""
    d: Daemon = start_daemon(short_tmp)
    try:
        fill(d, "ext", 20)
        done = d.call("retention.gc")
        assert done["segments_dropped"] == 0 and done["floor"] == 1
        reason = done["reason"]
        assert "the WAL left is one segment" in reason, reason
        assert "64.0 MiB" in reason and "removed whole" in reason, reason
        assert "audit log" in reason, reason  # what GC never collects, said too
        out = ok(reynctl("retention", "gc", sock=d.socket))
        assert out.startswith("nothing to collect"), out
        assert rows(out.split("\n", 1)[1])["why"] == reason
        du = d.call("state.du")
        assert du["gc"]["bytes"] == 0 and du["gc"]["reason"] == reason
        wal = parts(du)["wal"]
        # The segments and the extent beside them (wal/torn/ is a part of its own).
        assert wal["disk_bytes"] >= 0 and wal["bytes"] == file_bytes(d.state_dir, "state/wal/*")[0]
        assert os.path.isdir(du["state_dir"])
    finally:
        d.stop()


def test_kept_reason_names_the_horizon_that_keeps_the_oldest_segment() -> None:
    """Pure: each horizon of plan_wal_drop, in words, and replication's hold."""
    from reynd.core.retention import (
        RetentionPolicy,
        SegmentInfo,
        kept_reason,
        plan_wal_drop,
        without_horizon,
    )

    def keep_only(**keys: Any) -> RetentionPolicy:
        return without_horizon(RetentionPolicy(**keys))

    segs = [SegmentInfo(1, 100, 4096, 1000.0), SegmentInfo(101, 200, 4096, 2000.0)]
    segs.append(SegmentInfo(201, 250, 2048, 3000.0))

    def why(policy: RetentionPolicy, required: int = 251, keep_from: int | None = None) -> str:
        return kept_reason(
            segs, 250, required, policy, 3000.0, segment_bytes=4096, keep_from=keep_from
        )

    assert plan_wal_drop(segs, 250, 251, keep_only(), 3000.0) == 2
    assert "the WAL left is one segment (2.0 KiB" in why(keep_only())
    assert "wal_keep_records = 120 keeps it" in why(keep_only(wal_keep_records=120))
    assert "segment 101..200" in why(keep_only(wal_keep_records=120))
    aged = why(keep_only(wal_keep_age_s=1500))
    assert "segment 101..200" in aged and "last written 1000 s ago" in aged, aged
    assert "wal_keep_bytes = 8000 keeps it" in why(keep_only(wal_keep_bytes=8000))
    assert "holds seqs from 50 on, which a restart" in why(keep_only(), required=50)
    held = why(keep_only(), keep_from=150)
    assert "inside the default horizon" in why(RetentionPolicy())  # 1000 s old: 7 days keep it
    assert held.startswith("replication has not shipped seqs from 150 on"), held

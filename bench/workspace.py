"""Workspace rewind: capture time and bytes added per generation, 10,000 files, 10 changed.

    python -m bench.workspace [--files N] [--changed K] [--rounds R] [--dir DIR] [--json]

A tree of N files (1-4 KiB each, 100 directories) is captured once (every
blob stored), then R generations each change K files and are captured again:
only the changed files are read (the stat cache holds the rest) and stored.
Also measured: a capture with nothing changed, a capture after a restart
(empty stat cache: every file is read again, nothing new is stored), the
dirty check a checkout runs, and restoring the K files of one generation.

The files' mtimes are set 10 s in the past after the tree is written, as for
a workspace that existed before reynd started (a file written within 100 ms
of a scan is always re-read: see RACY_NS in reynd/workspace/tree.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from reynd.storage.store import Store
from reynd.workspace import Workspace, WorkspaceConfig
from reynd.workspace.tree import changed_paths, restore_tree, scan


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _write_tree(ws: Path, files: int) -> list[Path]:
    paths = []
    past = time.time() - 10
    for i in range(files):
        p = ws / f"d{i % 100:02d}" / f"f{i:05d}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes((f"file {i} " * 400)[: 1024 + (i * 37) % 3072].encode())
        os.utime(p, (past, past))
        paths.append(p)
    return paths


def run(base: Path, files: int, changed: int, rounds: int) -> dict[str, Any]:
    ws = base / "ws"
    state_dir = base / "ws" / ".reyn"
    ws.mkdir()
    paths = _write_tree(ws, files)
    tree_bytes = sum(p.stat().st_size for p in paths)
    store = Store.open(state_dir)
    try:
        w = Workspace(WorkspaceConfig(enabled=True), state_dir, store)
        w.open()
        state = state_dir / "state"
        first = w.capture(1)
        unchanged = w.capture(2)
        per_gen: list[dict[str, Any]] = []
        for r in range(rounds):
            for k in range(changed):
                p = paths[(r * 997 + k * 131) % files]
                p.write_bytes(f"round {r} change {k} ".encode() * 64)
            before = _du(state)
            stats = w.capture(3 + r)
            per_gen.append(
                {
                    "ms": stats.duration_ms,
                    "hashed": stats.hashed,
                    "bytes_added": stats.bytes_added,
                    "du_added": _du(state) - before,
                }
            )
        # Dirty check (what a checkout runs first): hash-only scan + diff, warm cache.
        t = time.perf_counter()
        recorded = w.tree(w.index.get(2 + rounds) or "")
        dirty = changed_paths(recorded, scan(w.root, w._ignore, w._cache).tree)
        dirty_ms = (time.perf_counter() - t) * 1e3
        assert not dirty, dirty[:5]
        # Restore one generation back (K files rewritten).
        t = time.perf_counter()
        target = w.tree(w.index.get(1 + rounds) or "")
        now = scan(w.root, w._ignore, w._cache)
        written, deleted, skipped = restore_tree(w.root, w._ignore, now, target, w.blobs)
        restore_ms = (time.perf_counter() - t) * 1e3
        assert (written, deleted, skipped) == (changed, 0, []), (written, deleted, skipped)
        # A restart: a new Workspace has an empty stat cache.
        w2 = Workspace(WorkspaceConfig(enabled=True), state_dir, store)
        w2.open()
        cold = w2.capture(100 + rounds)
    finally:
        store.close()
    gens = per_gen
    return {
        "files": files,
        "changed_per_generation": changed,
        "tree_bytes": tree_bytes,
        "first_capture": {"ms": first.duration_ms, "bytes_added": first.bytes_added},
        "unchanged_capture": {"ms": unchanged.duration_ms, "bytes_added": unchanged.bytes_added},
        "generation": {
            "rounds": rounds,
            "median_ms": statistics.median(g["ms"] for g in gens),
            "max_ms": max(g["ms"] for g in gens),
            "hashed": gens[-1]["hashed"],
            "median_bytes_added": statistics.median(g["bytes_added"] for g in gens),
            "median_disk_bytes_added": statistics.median(g["du_added"] for g in gens),
            "changed_content_bytes": len(b"round 0 change 0 " * 64) * changed,
        },
        "restart_capture": {
            "ms": cold.duration_ms,
            "hashed": cold.hashed,
            "bytes_added": cold.bytes_added,
        },
        "dirty_check_ms": dirty_ms,
        "restore_ms": restore_ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None, help="file system to measure (default: /tmp)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="reynd-bench-ws-", dir=args.dir) as tmp:
        out = run(Path(tmp), args.files, args.changed, args.rounds)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    g = out["generation"]
    print(f"workspace: {out['files']} files, {out['tree_bytes'] / 1e6:.1f} MB")
    print(
        f"  first capture       {out['first_capture']['ms']:9.1f} ms   "
        f"{out['first_capture']['bytes_added'] / 1e6:8.2f} MB added"
    )
    print(
        f"  nothing changed     {out['unchanged_capture']['ms']:9.1f} ms   "
        f"{out['unchanged_capture']['bytes_added']:8d} B added"
    )
    print(
        f"  {out['changed_per_generation']} files changed    {g['median_ms']:9.1f} ms   "
        f"{g['median_bytes_added']:8.0f} B added (median of {g['rounds']}; "
        f"{g['hashed']} files read; changed content {g['changed_content_bytes']} B)"
    )
    print(
        f"  after a restart     {out['restart_capture']['ms']:9.1f} ms   "
        f"{out['restart_capture']['bytes_added']:8d} B added "
        f"({out['restart_capture']['hashed']} files read)"
    )
    print(f"  dirty check         {out['dirty_check_ms']:9.1f} ms")
    print(f"  restore {out['changed_per_generation']} files     {out['restore_ms']:9.1f} ms")


if __name__ == "__main__":
    main()

"""What the side-by-side framework benchmarks share (bench.langgraph, bench.openai_agents):
the bytes of a store's files, a reynd / other ratio, and the command line that runs one
workload at several sizes and prints the table or the JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.daemon import workdir

__all__ = ["files_bytes", "main", "ratio", "ratios"]


def files_bytes(paths: Iterable[Path]) -> int:
    """The bytes of the files among `paths`."""
    return sum(p.stat().st_size for p in paths if p.is_file())


def ratio(a: float, b: float) -> float | None:
    """reynd / other, rounded (None when the other is 0)."""
    return round(a / b, 3) if b else None


def ratios(rows: dict[str, dict[str, Any]], keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    """For each contender but reynd, reynd's figure over its own, for each of `keys` both
    have."""
    ours = rows["reynd"]
    return {
        other: {key: ratio(ours[key], row[key]) for key in keys if key in row and key in ours}
        for other, row in rows.items()
        if other != "reynd"
    }


def main(
    doc: str | None,
    *,
    name: str,  # what a size counts: "turns", "items"
    quick: tuple[int, ...],
    default: tuple[int, ...],
    run_one: Callable[[int, Path, Callable[[str], None]], dict[str, Any]],
    render: Callable[[list[dict[str, Any]]], str],
) -> None:
    """Parse --quick, --<name> and --json; run `run_one` per size, each in a fresh work
    directory; print the results."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=f"{name} = {quick} (a CI-size run)")
    ap.add_argument(f"--{name}", help=f"comma-separated sizes (default {default})")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args()
    given = getattr(args, name)
    sizes = tuple(int(n) for n in given.split(",")) if given else quick if args.quick else default

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results = []
    for n in sizes:
        with workdir() as base:
            log(f"{name}={n} in {base} (pid {os.getpid()})")
            results.append(run_one(n, base, log))
    print(json.dumps(results, indent=2) if args.json else render(results))

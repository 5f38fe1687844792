"""A replica that is short is never silently so (issue 22, item 7): real daemons, real S3.

A WAL object deleted from the middle of a prefix (moto's server on loopback,
tests/s3server.py): `reynd restore` refuses, naming the missing seqs and the
last shipped seq, unless `--to-seq` asks for the part before the gap; a
follower reports `gap` with the range, never `following` with no lag. A
stray claim that continues no generation is refused saying so.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import msgspec

from tests.harness import Daemon
from tests.runtime_helpers import head, wait_until
from tests.s3server import MotoServer
from tests.test_replication import (
    BUCKET,
    append,
    restore,
    s3,
    start,
    start_follower,
    turns,
    url,
    wait_shipped,
)

__all__ = ["s3", "url"]  # the fixtures


def _wal_objects(s3: MotoServer, url: str) -> list[tuple[str, int, int]]:
    """(key, first, last) of every WAL object under the prefix, by first seq."""
    prefix = url.split("/", 3)[3] + "/"
    out = []
    for key in s3.keys(BUCKET, prefix):
        if "/wal/" in key:
            first, last = key.rsplit("/", 1)[1].removesuffix(".jsonl").split("-")
            out.append((key, int(first), int(last)))
    return sorted(out, key=lambda o: o[1])


def _delete_a_middle_object(s3: MotoServer, url: str, above: int = 0) -> tuple[int, int]:
    """Delete one WAL object that has others before and after it; the seqs it alone held."""
    objs = _wal_objects(s3, url)
    middle = [o for o in objs[1:-1] if o[1] > above + 1]
    assert middle, objs
    key, first, _ = middle[len(middle) // 2]
    s3.client().delete_object(Bucket=BUCKET, Key=key)
    rest = [o for o in objs if o[0] != key]
    assert not any(a <= first <= b for _, a, b in rest)  # nothing else holds them
    return first, min(a for _, a, _ in rest if a > first) - 1


def _history(d: Daemon, n: int, tag: str) -> int:
    if head(d) == 0:
        append(d, "ada", "agent.created")
    return turns(d, "ada", n, tag)


def test_a_restore_with_a_wal_object_gone_refuses_naming_the_range(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    d = start(short_tmp, url, s3.url)
    try:
        _history(d, 15, "a")
        tip = head(d)
        wait_shipped(d)
    finally:
        d.stop()
    whole = restore(url, s3.url, short_tmp / "whole")
    assert whole.returncode == 0, whole.stderr
    assert f"restored seqs 1..{tip} " in whole.stdout
    assert f"the last shipped seq is {tip}" in whole.stdout

    first, last = _delete_a_middle_object(s3, url)
    short = restore(url, s3.url, short_tmp / "short")
    assert short.returncode == 3, short.stdout + short.stderr
    assert f"seqs {first}..{last} are missing" in short.stderr, short.stderr
    assert f"the last shipped seq is {tip}" in short.stderr
    assert f"--to-seq {first - 1}" in short.stderr
    assert not (short_tmp / "short").exists()

    inside = restore(url, s3.url, short_tmp / "part", "--to-seq", str(first - 1))
    assert inside.returncode == 0, inside.stderr
    assert f"restored seqs 1..{first - 1} " in inside.stdout
    assert f"the last shipped seq is {tip}" in inside.stdout
    across = restore(url, s3.url, short_tmp / "across", "--to-seq", str(first))
    assert across.returncode == 3 and f"seqs {first}..{last} are missing" in across.stderr


def test_a_follower_at_a_gap_reports_gap_with_the_range(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    p_dir, f_dir = short_tmp / "p", short_tmp / "f"
    p_dir.mkdir()
    p = start(p_dir, url, s3.url)
    try:
        _history(p, 2, "a")
        wait_shipped(p)
        f = start_follower(f_dir, url, s3.url)
        followed = head(f)
        f.stop()
        _history(p, 15, "b")
        tip = head(p)
        wait_shipped(p)
    finally:
        p.stop()
    first, last = _delete_a_middle_object(s3, url, above=followed)

    f = start_follower(f_dir, url, s3.url)
    try:

        def at_gap() -> dict[str, Any] | None:
            info: dict[str, Any] = f.call("daemon.status")["follow"]
            return info if info["state"] == "gap" else None

        def pulled_after(before: object) -> dict[str, Any] | None:
            """The gap reported by a pull later than the one at `before`."""
            info = at_gap()
            return info if info is not None and info["last_pulled_at"] != before else None

        info = wait_until(at_gap, "the follower to report the gap")
        assert head(f) == first - 1
        assert info["remote_head"] == tip and info["lag_records"] == tip - (first - 1), info
        assert f"seqs {first}..{last} are missing" in info["last_error"], info
        # Later pulls (interval 0.1 s) find the same: it stays at the gap, and says so.
        pulled = info["last_pulled_at"]
        for _ in range(3):
            again = wait_until(functools.partial(pulled_after, pulled), "another pull")
            pulled = again["last_pulled_at"]
        assert head(f) == first - 1 and again["lag_records"] == tip - (first - 1), again
    finally:
        f.stop()


def test_a_stray_claim_without_continues_is_named(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    d = start(short_tmp, url, s3.url)
    try:
        _history(d, 2, "a")
        tip = head(d)
        wait_shipped(d)
    finally:
        d.stop()
    prefix = url.split("/", 3)[3]
    stray = {
        "format": 1,
        "generation": 2,
        "store_id": "0" * 32,
        "host": "elsewhere",
        "pid": 7,
        "created": 1796268609.6,
        "base_seq": 1,
    }
    key = f"{prefix}/generations/00000002.json"
    s3.client().put_object(Bucket=BUCKET, Key=key, Body=msgspec.json.encode(stray))
    done = restore(url, s3.url, short_tmp / "r")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "holds no record yet" not in done.stderr
    assert "generation 2 (host elsewhere, pid 7" in done.stderr, done.stderr
    assert "continues no generation and holds no WAL object" in done.stderr
    assert f"generation 1 holds seqs 1..{tip}" in done.stderr
    assert "remove the claim generations/00000002.json under the prefix" in done.stderr

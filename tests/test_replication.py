"""Replication to S3-compatible storage against a real server on loopback (tests/s3server.py).

The daemon ships its WAL and snapshots; `reynd restore` rebuilds a state
directory elsewhere, compared here answer by answer with the source daemon
(head, branches, generations on every branch, the state as of every seq).
Faults are real: connections refused, 500s, a server that stops answering,
the daemon SIGKILLed while it uploads.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Daemon, daemon_env, run_daemon_to_exit, start_daemon
from tests.runtime_helpers import error_of, head, kill_daemon, wait_until
from tests.s3server import CREDENTIALS, FaultyProxy, MotoServer, moto
from tests.test_reynctl_cli import ok, reynctl

BUCKET = "reynd-test"


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoServer]:
    with moto() as server:
        server.create_bucket(BUCKET)
        yield server


_prefixes = iter(range(1, 1_000_000))


@pytest.fixture
def url() -> str:
    """A fresh prefix of the shared bucket for each test."""
    return f"s3://{BUCKET}/t{next(_prefixes)}"


def config(url: str, endpoint: str, *, interval: float = 0.1, extra: str = "") -> str:
    return (
        f'[replicate]\nurl = "{url}"\nendpoint = "{endpoint}"\nregion = "us-east-1"\n'
        f"interval_s = {interval}\ntimeout_s = 2\n"
        # Small segments and snapshots: several of each in a short history.
        f"[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 4096\n{extra}"
    )


def start(workdir: Path, url: str, endpoint: str, **kw: Any) -> Daemon:
    cfg = config(url, endpoint, **kw)
    return start_daemon(workdir, config=cfg, env=CREDENTIALS)


def refused_at_start(
    workdir: Path, toml: str, env: dict[str, str] | None = CREDENTIALS
) -> subprocess.CompletedProcess[str]:
    """Start a daemon whose state dir holds `toml` as reynd.toml; it is expected to refuse."""
    state = workdir / "state"
    state.mkdir(exist_ok=True)
    (state / "reynd.toml").write_text(toml)
    return run_daemon_to_exit(
        workdir,
        state_dir=state,
        socket_path=workdir / "refused.sock",
        config_path=state / "reynd.toml",
        env=env,
    )


def restore(url: str, endpoint: str, into: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "reynd.daemon.cli", "restore", "--from", url),
            *("--state-dir", str(into), "--endpoint", endpoint, *args),
        ],
        env=daemon_env(CREDENTIALS),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def replication(d: Daemon) -> dict[str, Any]:
    info: dict[str, Any] = d.call("daemon.status")["replication"]
    return info


def wait_shipped(d: Daemon, seq: int | None = None) -> dict[str, Any]:
    target = head(d) if seq is None else seq

    def shipped() -> dict[str, Any] | None:
        r = replication(d)
        return r if r["shipped"] >= target and r["state"] == "shipping" else None

    return wait_until(shipped, f"seq {target} shipped")


# -- a history with branches, generations and snapshots ----------------------------------


def append(d: Daemon, agent: str, kind: str, **data: Any) -> int:
    seq: int = d.call("wal.append", {"agent": agent, "kind": kind, "data": data})["seq"]
    return seq


def turns(d: Daemon, agent: str, n: int, tag: str) -> int:
    """`n` turns of an external agent, each a generation; returns the last seq."""
    seq = 0
    for i in range(n):
        mid, tid = f"{tag}-m{i}", f"{tag}-t{i}"
        append(d, agent, "message.received", message_id=mid, text="x" * 200)
        append(d, agent, "turn.started", turn_id=tid, message_id=mid)
        append(d, agent, "step.committed", turn_id=tid, step=0, output={"r": "r" * 100})
        seq = append(d, agent, "turn.ended", turn_id=tid, label=f"{tag} {i}")
    return seq


def history(d: Daemon) -> None:
    """Two agents, a rewind, more turns, a checkout of the abandoned future, more turns."""
    append(d, "ada", "agent.created")
    append(d, "bo", "agent.created")
    mid = turns(d, "ada", 6, "a")
    turns(d, "bo", 4, "b")
    d.call("rewind", {"seq": mid})
    abandoned = head(d) - 1
    turns(d, "ada", 3, "c")
    d.call("checkout", {"seq": abandoned})
    turns(d, "bo", 3, "d")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def view(d: Daemon, upto: int | None = None, lo: int | None = None) -> dict[str, Any]:
    """Everything a reader can see from seq `lo` (default: the floor) to `upto` (the head)."""
    status = d.call("daemon.status")
    tip = status["head"] if upto is None else upto
    lo = status["floor"] if lo is None else lo
    generations: list[Any] = []
    cursor = None
    while True:
        params = {"all_branches": True, **({"cursor": cursor} if cursor else {})}
        page = d.call("generations.list", params)
        generations += [g for g in page["generations"] if lo <= g["seq"] <= tip]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    return {
        "head": tip,
        "generations": generations,
        # A digest of each: a long history's states, held whole, take the square of its
        # length in memory (14 GB for the SIGKILL test's ~10^4 records).
        "states": [_digest(d.call("state.get", {"seq": s})) for s in range(lo, tip + 1)],
        **({"branches": d.call("branches.list")} if upto is None else {}),
    }


# -- tests -------------------------------------------------------------------------------


def test_restore_after_losing_the_state_dir_gives_back_everything(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    d = start(short_tmp, url, s3.url)
    history(d)
    wait_shipped(d)
    before = view(d)
    snapshots = len(list((d.state_dir / "state" / "snapshots").glob("*.snap")))
    segments = len(list((d.state_dir / "state" / "wal").glob("*.jsonl")))
    assert snapshots >= 2 and segments >= 3, (snapshots, segments)  # the history is not trivial
    kill_daemon(d)  # the machine is gone...
    shutil.rmtree(d.state_dir)  # ...and its disk with it

    into = short_tmp / "restored"
    done = restore(url, s3.url, into)
    assert done.returncode == 0, done.stderr
    assert f"restored seqs 1..{before['head']}" in done.stdout
    assert "must replicate to another prefix (or restore --adopt)" in done.stdout
    # Sealed segments went up as one object each, not as their tail chunks.
    wal_objects = [k for k in s3.keys(BUCKET, url.split("/", 3)[3] + "/") if "/wal/" in k]
    assert len(wal_objects) <= segments + 2, wal_objects

    r = start_daemon(short_tmp, state_dir=into)
    try:
        assert view(r) == before
    finally:
        r.stop()


def test_point_in_time_restore(short_tmp: Path, s3: MotoServer, url: str) -> None:
    d = start(short_tmp, url, s3.url)
    try:
        history(d)
        wait_shipped(d)
        tip = head(d)
        points = [1, tip // 3, tip // 2, tip - 1]
        expected = {n: view(d, n) for n in points}
    finally:
        d.stop()
    for n in points:
        into = short_tmp / f"at-{n}"
        done = restore(url, s3.url, into, "--to-seq", str(n))
        assert done.returncode == 0, done.stderr
        assert "continues the replica" not in done.stdout  # an older cut must not take over
        r = start_daemon(short_tmp, state_dir=into)
        try:
            assert head(r) == n
            assert view(r, n) == expected[n]
        finally:
            r.stop()
    beyond = restore(url, s3.url, short_tmp / "beyond", "--to-seq", str(tip + 1))
    assert beyond.returncode == 2
    assert f"seq {tip + 1} is not in the replica (it holds seqs 1..{tip})" in beyond.stderr


def test_a_second_state_dir_is_refused_the_prefix(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    d = start(short_tmp, url, s3.url)
    try:
        append(d, "ada", "agent.created")
        wait_shipped(d)
        other = short_tmp / "other"
        other.mkdir()
        cfg = other / "reynd.toml"
        cfg.write_text(config(url, s3.url))
        done = run_daemon_to_exit(
            other,
            state_dir=other,
            socket_path=short_tmp / "o.sock",
            config_path=cfg,
            env=CREDENTIALS,
        )
        assert done.returncode == 2, done.stderr
        assert "is replicated by another state directory" in done.stderr
        assert "reynd restore" in done.stderr
        assert replication(d)["state"] == "shipping"  # the owner is undisturbed
    finally:
        d.stop()


def test_a_missing_bucket_is_a_clear_error_at_start(short_tmp: Path, s3: MotoServer) -> None:
    done = refused_at_start(short_tmp, config("s3://no-such-bucket/x", s3.url))
    assert done.returncode == 2, done.stderr
    assert "s3://no-such-bucket/x/: no such bucket" in done.stderr


def test_credentials_that_do_not_work_are_a_clear_error_at_start(short_tmp: Path) -> None:
    state = short_tmp / "state"
    state.mkdir()
    cfg = state / "reynd.toml"
    home = short_tmp / "home"  # no ~/.aws to fall back on
    home.mkdir()
    # The bucket is made by the one unchecked request; then every key must be an IAM user's.
    with moto(unchecked_requests=1) as checked:
        checked.create_bucket(BUCKET)
        cfg.write_text(config(f"s3://{BUCKET}/x", checked.url))
        cases = [
            ({**CREDENTIALS, "HOME": str(home)}, "access denied: check the credentials"),
            (
                {
                    "HOME": str(home),
                    "AWS_EC2_METADATA_DISABLED": "true",
                    "AWS_CONFIG_FILE": str(home / "none"),
                    "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"),
                },
                "no credentials found",
            ),
        ]
        for env, reason in cases:
            done = run_daemon_to_exit(
                short_tmp,
                state_dir=state,
                socket_path=short_tmp / "s.sock",
                config_path=cfg,
                env=env,
            )
            assert done.returncode == 2, done.stderr
            assert reason in done.stderr, done.stderr


def test_a_bad_url_is_refused_with_the_key_named(short_tmp: Path) -> None:
    done = refused_at_start(short_tmp, '[replicate]\nurl = "https://bucket/x"\n', env=None)
    assert done.returncode == 2
    assert "bad value for 'replicate.url'" in done.stderr and "s3://BUCKET/PREFIX" in done.stderr


def test_faults_never_stop_local_writes_and_the_backlog_catches_up(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    proxy = FaultyProxy(s3.port)
    proxy.down()  # the store is down when the daemon starts: it starts anyway
    d = start(short_tmp, url, proxy.url, extra="[retention]\nwal_keep_records = 1\n")
    try:
        assert replication(d)["state"] == "retrying"
        history(d)  # every append acknowledged, from the local fsync
        info = replication(d)
        assert info["backlog_records"] == head(d) and info["backlog_bytes"] > 0, info
        assert "Could not connect" in info["last_error"], info
        shown = ok(reynctl("--color", "never", "status", sock=d.socket))
        assert f"{url}/: retrying, {head(d)} records (" in shown, shown
        assert "not shipped yet; " in shown and "Could not connect" in shown, shown
        # Retention would drop most segments, but none of them was shipped.
        floor = d.call("retention.gc")["floor"]
        assert floor == 1, floor

        proxy.up()
        wait_shipped(d)
        proxy.errors()  # 500 InternalError on every request
        turns(d, "ada", 2, "e")
        info = wait_until(
            lambda: ((r := replication(d))["state"] == "retrying" and r) or None, "a failed cycle"
        )
        assert "500" in info["last_error"] or "InternalError" in info["last_error"], info
        s3.pause()  # a store that stops answering: timeouts
        proxy.up()
        try:
            wait_until(
                lambda: "timeout" in (replication(d)["last_error"] or "").lower() or None,
                "a timed-out cycle",
            )
            turns(d, "bo", 2, "f")
        finally:
            s3.resume()
        info = wait_shipped(d)
        assert info["state"] == "shipping" and info["last_error"] is None, info
        shown = ok(reynctl("--color", "never", "status", sock=d.socket))
        assert f"{url}/ (generation 1): up to date, seq {head(d)} shipped" in shown, shown
        floor = d.call("retention.gc")["floor"]
        assert floor > 1  # shipped: now it may go
        wait_until(lambda: replication(d)["floor"] == floor or None, "the replica's floor")
        before = view(d)
    finally:
        d.stop()
        proxy.close()
    into = short_tmp / "restored"
    done = restore(url, s3.url, into)
    assert done.returncode == 0, done.stderr
    r = start_daemon(short_tmp, state_dir=into)
    try:
        assert view(r) == before
        # Remote retention followed the local floor: the restore starts there too.
        assert r.call("daemon.status")["floor"] == floor
    finally:
        r.stop()


def test_sigkill_while_uploading_loses_nothing_beyond_the_recovery_point(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    interval = 0.2
    # One interval plus one upload (milliseconds on loopback; 1 s of slack on a busy machine).
    recovery_point = interval + 1.0
    d = start(short_tmp, url, s3.url, interval=interval)
    append(d, "ada", "agent.created")
    acked: list[tuple[int, float]] = []  # (seq, when acknowledged)
    stop = threading.Event()

    def writer(daemon: Daemon) -> None:
        i = 0
        with daemon.connect() as c:
            while not stop.is_set():
                try:
                    reply = c.request(
                        "wal.append",
                        {
                            "agent": "ada",
                            "kind": "message.received",
                            "data": {"message_id": f"w{time.monotonic_ns()}", "text": "y" * 300},
                        },
                    )
                except (OSError, EOFError):
                    return  # killed
                acked.append((reply["result"]["seq"], time.monotonic()))
                i += 1

    for round_ in range(3):
        stop.clear()
        t = threading.Thread(target=writer, args=(d,), daemon=True)
        t.start()
        first = len(acked)

        def flowing(k: int = first) -> bool:
            """Appends have flowed for longer than the recovery point."""
            return len(acked) > k + 50 and time.monotonic() - acked[k][1] > recovery_point + 0.3

        wait_until(flowing, "appends to flow for longer than the recovery point")
        killed_at = time.monotonic()
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        stop.set()
        t.join()
        # The machine is lost now: what the replica holds is what a restore gets.
        into = short_tmp / f"lost-{round_}"
        done = restore(url, s3.url, into)
        assert done.returncode == 0, done.stderr
        restored_head = int(done.stdout.split("restored seqs 1..")[1].split()[0])
        due = [seq for seq, when in acked if when < killed_at - recovery_point]
        assert due and restored_head >= max(due), (restored_head, max(due))
        d = start_daemon(short_tmp, state_dir=d.state_dir, env=CREDENTIALS)
    try:
        wait_shipped(d)
        before = view(d)
        gens = [k for k in s3.keys(BUCKET, url.split("/", 3)[3] + "/generations/")]
        assert len(gens) == 4, gens  # one claim per start, each continuing the last
    finally:
        d.stop()
    into = short_tmp / "final"
    done = restore(url, s3.url, into)
    assert done.returncode == 0, done.stderr
    r = start_daemon(short_tmp, state_dir=into)
    try:
        assert view(r) == before
    finally:
        r.stop()


def test_a_restored_dir_takes_over_and_the_old_writer_stands_down(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    a_dir, b_dir = short_tmp / "a", short_tmp / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a = start(a_dir, url, s3.url)
    b: Daemon | None = None
    try:
        history(a)
        wait_shipped(a)
        done = restore(url, s3.url, b_dir / "state", "--adopt")
        assert done.returncode == 0, done.stderr
        assert "continues the replica" in done.stdout
        # The old writer goes on for a while, snapshots included, before B claims:
        # none of that is B's history, and a restore must not mix it in.
        append(a, "zed", "agent.created")
        turns(a, "zed", 8, "stale")
        wait_shipped(a)
        b = start(b_dir, url, s3.url)
        assert replication(b)["generation"] == 2
        turns(b, "ada", 2, "after")
        wait_shipped(b)
        turns(a, "bo", 1, "late")  # still serves and acknowledges locally...
        info = wait_until(
            lambda: ((r := replication(a))["state"] == "superseded" and r) or None,
            "the old writer to notice",
        )  # ...but ships no more
        assert "generation 2" in info["last_error"], info
        expected = view(b)
    finally:
        a.stop()
        if b is not None:
            b.stop()
    refused = run_daemon_to_exit(
        a_dir,
        state_dir=a_dir / "state",
        socket_path=a_dir / "again.sock",
        config_path=a_dir / "state" / "reynd.toml",
        env=CREDENTIALS,
    )
    assert refused.returncode == 2 and "another state directory" in refused.stderr
    into = short_tmp / "restored"
    done = restore(url, s3.url, into)
    assert done.returncode == 0, done.stderr
    r = start_daemon(short_tmp, state_dir=into)
    try:
        assert view(r) == expected
    finally:
        r.stop()


def follow_config(tmp: Path, endpoint: str) -> Path:
    path = tmp / "follow.toml"
    path.write_text(
        f'[replicate]\nendpoint = "{endpoint}"\nregion = "us-east-1"\n'
        "interval_s = 0.1\ntimeout_s = 2\n"
    )
    return path


def start_follower(workdir: Path, url: str, endpoint: str) -> Daemon:
    workdir.mkdir(exist_ok=True)
    args = ["--follow", url, "--config", str(follow_config(workdir, endpoint))]
    return start_daemon(workdir, args=args, env=CREDENTIALS)


def caught_up(f: Daemon, primary_head: int) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        st = f.call("daemon.status")
        ok = st["head"] == primary_head and st["follow"]["state"] == "following"
        return st["follow"] if ok else None

    return wait_until(check, f"the follower at seq {primary_head}")


def test_a_follower_serves_reads_subscriptions_and_refuses_writes(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    p_dir, f_dir = short_tmp / "p", short_tmp / "f"
    p_dir.mkdir()
    p = start(p_dir, url, s3.url)
    f: Daemon | None = None
    try:
        append(p, "ada", "agent.created")
        turns(p, "ada", 3, "a")
        wait_shipped(p)
        f = start_follower(f_dir, url, s3.url)  # empty: restored first, then follows
        assert head(f) == head(p)
        with f.connect() as sub:
            sub.call("subscribe", {"topics": ["records", "rewinds"]})
            first_new = head(p) + 1
            append(p, "bo", "agent.created")
            turns(p, "bo", 3, "b")
            p.call("rewind", {"seq": first_new + 3})
            turns(p, "ada", 2, "c")
            p.call("checkout", {"seq": first_new + 6})
            info = caught_up(f, head(p))
            assert info["lag_records"] == 0 and info["remote_head"] == head(p), info
            shown = ok(reynctl("--color", "never", "status", sock=f.socket))
            assert f"follows      {url}/ (read-only): following, 0 records behind" in shown
            notes = [sub.recv_json()["params"] for _ in range(head(p) - first_new + 3)]
            seen = [n["seq"] for n in notes if n["topic"] == "records"]
            assert seen == list(range(first_new, head(p) + 1))  # every record, in order
            resets = [
                (n["data"]["mode"], n["data"]["target"]) for n in notes if n["topic"] == "rewinds"
            ]
            assert resets == [("undo", first_new + 3), ("fork_switch", first_new + 6)]
        assert view(f) == view(p)
        assert f.call("state.diff", {"from_seq": 2, "to_seq": head(f)}) == p.call(
            "state.diff", {"from_seq": 2, "to_seq": head(p)}
        )
        writes: list[tuple[str, dict[str, Any]]] = [
            ("wal.append", {"agent": "ada", "kind": "agent.configured"}),
            ("rewind", {"seq": 1}),
            ("agents.create", {"name": "new"}),
            ("retention.set", {"wal_keep_records": 1}),
        ]
        for method, params in writes:
            err = error_of(f, method, params)
            assert err["code"] == -32020, (method, err)
            assert err["data"]["source"] == f"{url}/" and "read-only replica" in err["message"]
        assert head(f) == head(p)
    finally:
        p.stop()
        if f is not None:
            f.stop()


@pytest.mark.parametrize("records", [1, 5])  # as long as the replica, and longer
def test_a_follower_refuses_a_directory_with_another_history(
    short_tmp: Path, s3: MotoServer, url: str, records: int
) -> None:
    p_dir, f_dir = short_tmp / "p", short_tmp / "f"
    p_dir.mkdir()
    f_dir.mkdir()
    p = start(p_dir, url, s3.url)
    try:
        append(p, "ada", "agent.created")
        wait_shipped(p)
    finally:
        p.stop()
    other = start_daemon(f_dir)  # a history of its own
    append(other, "zed", "agent.created")
    for i in range(records - 1):
        append(other, "zed", "message.received", message_id=f"z{i}", text="z")
    other.stop()
    f = start_follower(f_dir, url, s3.url)
    try:
        info = wait_until(
            lambda: ((r := f.call("daemon.status")["follow"])["state"] == "diverged" and r) or None,
            "the follower to refuse",
        )
        assert "holds another history" in info["last_error"], info
        assert head(f) == records  # nothing was appended to it
        assert f.call("agents.list")["agents"][0]["name"] == "zed"  # nothing was overwritten
    finally:
        f.stop()


def test_a_clean_stop_ships_the_last_records(short_tmp: Path, s3: MotoServer, url: str) -> None:
    """A planned move (SIGTERM, restore elsewhere) loses nothing, whatever the interval."""
    d = start(short_tmp, url, s3.url, interval=3600)
    # The first round ran at start; the next is an hour away: nothing below ships before the stop.
    wait_until(lambda: replication(d)["state"] == "shipping" or None, "the claim")
    append(d, "ada", "agent.created")
    turns(d, "ada", 3, "a")
    tip = head(d)
    assert replication(d)["shipped"] < tip
    d.stop()
    assert '"replicate.flushed"' in d.stderr()
    done = restore(url, s3.url, short_tmp / "moved")
    assert done.returncode == 0, done.stderr
    assert f"restored seqs 1..{tip} " in done.stdout


def test_a_claim_reynd_did_not_write_is_a_clear_error(
    short_tmp: Path, s3: MotoServer, url: str
) -> None:
    prefix = url.split("/", 3)[3]
    s3.client().put_object(Bucket=BUCKET, Key=f"{prefix}/generations/00000001.json", Body=b"")
    done = restore(url, s3.url, short_tmp / "r")
    assert done.returncode == 2, done.stderr
    assert "generations/00000001.json is not a generation claim reynd wrote" in done.stderr
    started = refused_at_start(short_tmp, config(url, s3.url))
    assert started.returncode == 2 and "is not a generation claim" in started.stderr

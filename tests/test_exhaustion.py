"""The daemon's own resources running out under it: disk space, file descriptors, connections.

Against the real daemon, with the real resource exhausted: a small tmpfs
holds the state directory (root only: the test is skipped elsewhere, CI runs
as root), the daemon runs under a low RLIMIT_NOFILE (harness `nofile`), and
real clients hold its connection slots.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import workspace_config
from tests.harness import start_daemon
from tests.runtime_helpers import create_builtin, records, restart, send, wait_until

STORAGE_UNAVAILABLE = -32022


@pytest.fixture
def small_disk(short_tmp: Path) -> Iterator[Path]:
    """`short_tmp/state` on a 4 MiB tmpfs of its own (a disk that fills for real)."""
    state = short_tmp / "state"
    state.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(state)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (root only): {mounted.stderr.strip()}")
    try:
        yield state
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


def test_a_full_blob_store_fails_the_turn_answers_the_caller_and_keeps_serving(
    small_disk: Path, short_tmp: Path
) -> None:
    """Issue 22, item 3: the step's files cannot be stored before its commit.

    The waiting `agents.send` gets a clear error (not a dropped connection),
    the turn ends failed, the partial blob is gone, the daemon keeps serving,
    and a restart finds the agent idle, never ambiguous.
    """
    ws = short_tmp / "ws"  # on the big disk: only the blob store fills up
    ws.mkdir()
    d = start_daemon(short_tmp, state_dir=small_disk, config=workspace_config(ws))
    try:
        create_builtin(d, "ada")
        assert send(d, "ada", "before")["outcome"] == "completed"
        (ws / "big.bin").write_bytes(os.urandom(6 << 20))  # more than the disk holds

        with d.connect() as c:
            reply = c.request(
                "agents.send", {"agent": "ada", "text": "hi", "wait": True, "timeout": 30}
            )
        assert "error" in reply, reply
        err = reply["error"]
        assert err["code"] == STORAGE_UNAVAILABLE, err
        assert err["data"]["errno"] == "ENOSPC", err
        assert "No space left on device" in err["message"], err
        turn = err["data"]["turn_id"]
        assert err["data"]["message_seq"] == int(turn[1:])

        assert d.proc.poll() is None, "the daemon must keep serving"
        (ended,) = wait_until(
            lambda: records(d, kind="turn.ended", turn_id=turn), f"turn.ended of {turn}"
        )
        assert ended["outcome"] == "failed", ended
        assert "No space left on device" in ended["reply"]
        info = d.call("agents.get", {"agent": "ada"})
        assert info["status"] == "idle", info
        assert "No space left on device" in (info["last_error"] or ""), info
        assert not list((small_disk / "state" / "blobs").glob(".tmp-*")), "partial blob left"

        (ws / "big.bin").unlink()
        (ws / "small.txt").write_text("fits")
        assert send(d, "ada", "after")["outcome"] == "completed"
    finally:
        code = d.stop(expect=None)
    assert code == 0, d.stderr()[-4000:]
    d2 = restart(d, short_tmp)
    try:
        info = d2.call("agents.get", {"agent": "ada"})
        assert info["status"] == "idle" and info["ambiguous"] is None, info
    finally:
        d2.stop()

"""The default horizon in a real daemon: what GC keeps out of the box, and the budget.

A checkpoint two hours old is made for real, without sleeping: the daemon runs
under libfaketime two hours behind while it is written, and is restarted on
the true time (records the WAL holds at start are aged by the wall clock of the
start: tests/test_clock_steps.py shows a step while it runs ages nothing).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import create_builtin, error_of, log_lines, send
from tests.test_clock_steps import SteppedClock, clock, fill  # noqa: F401  (the fixture)
from tests.test_retention_daemon import rows

# Small segments and frequent snapshots: a few hundred records make many sealed
# segments and a recovery floor close to the tip. No keep key: the default horizon.
CONFIG = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 4096

[retention]
gc_interval_s = 0
"""

HOUR = 3600.0


def old_checkpoint(short_tmp: Path, clock: SteppedClock) -> tuple[Daemon, int]:  # noqa: F811
    """A daemon on the true time whose WAL holds a checkpoint written two hours ago."""
    clock.step("-2h")
    d = start_daemon(short_tmp, config=CONFIG, env=clock.env())
    try:
        create_builtin(d, "ada")
        old = int(send(d, "ada", "before lunch")["boundary_seq"])
        fill(d, "early", 60)
    finally:
        d.stop()
    clock.step("+0")
    d = start_daemon(short_tmp, state_dir=d.state_dir, socket_path=d.socket, env=clock.env())
    record = d.call("state.get", {"seq": old})
    assert record["seq"] == old
    fill(d, "late", 120)
    send(d, "ada", "after lunch")
    return d, old


def test_the_default_horizon_keeps_a_two_hour_old_checkpoint_until_the_budget_forces_it(
    short_tmp: Path,
    clock: SteppedClock,  # noqa: F811
) -> None:
    d, old = old_checkpoint(short_tmp, clock)
    try:
        info = d.call("retention.get")
        policy = info["policy"]
        assert (policy["horizon_checkpoints"], policy["horizon_age_s"]) == (1000, 7 * 86400.0)
        assert info["segments"] >= 8 and info["budget_forced"] is None
        assert 0 < info["horizon_budget_bytes"] <= 10 << 30

        # Out of the box: kept (both the 1,000 newest checkpoints and the 7 days cover it).
        gc = d.call("retention.gc")
        assert gc["floor"] <= old and gc["budget_forced"] is None, gc
        assert "inside the default horizon" in gc["reason"], gc
        assert d.call("state.get", {"seq": old})["seq"] == old

        # Counting only the newest checkpoint, the age alone keeps it: two hours < 7 days.
        d.call("retention.set", {"horizon_checkpoints": 1})
        gc = d.call("retention.gc")
        assert gc["floor"] <= old and gc["budget_forced"] is None, gc
        assert d.call("state.get", {"seq": old})["seq"] == old

        # A budget smaller than the WAL: the horizon gives way, and says so everywhere.
        wal_bytes = d.call("retention.get")["wal_bytes"]
        d.call("retention.set", {"budget_bytes": 8192})
        gc = d.call("retention.gc")
        forced = gc["budget_forced"]
        assert forced is not None and gc["floor"] > old, gc
        assert forced["dropped_through_seq"] == gc["floor"] - 1
        assert forced["budget_bytes"] == 8192 and forced["segments"] >= 1
        assert 0 < forced["bytes"] <= gc["bytes_dropped"] <= wal_bytes
        err = error_of(d, "state.get", {"seq": old})
        assert err["code"] == -32003, err
        (line,) = log_lines(d, "gc.budget_forced")
        assert line["level"] == "warning" and line["dropped_through_seq"] == gc["floor"] - 1
        assert "disk budget" in line["why"]
        info = d.call("retention.get")
        assert info["budget_forced"] == forced and info["horizon_budget_bytes"] == 8192
        shown = rows(_reynctl(d, "retention"))
        assert f"dropped seqs through {forced['dropped_through_seq']}" in shown["budget forced"]
        assert shown["budget"].startswith("8.0 KiB now"), shown
    finally:
        d.stop()


def _reynctl(d: Daemon, *args: str) -> str:
    from tests.test_reynctl_cli import ok, reynctl

    return ok(reynctl(*args, sock=d.socket))


def test_setting_a_keep_key_does_not_turn_the_default_horizon_off(daemon: Daemon) -> None:
    policy = daemon.call("retention.set", {"snapshot_keep": 8})["policy"]
    assert policy["snapshot_keep"] == 8 and policy["horizon_checkpoints"] == 1000
    assert policy["horizon_age_s"] == 7 * 86400.0


def _policy(d: Daemon) -> dict[str, Any]:
    result: dict[str, Any] = d.call("retention.get")["policy"]
    return result


@pytest.mark.parametrize(
    ("toml", "stored", "horizon"),
    [
        ("", {}, 1000),  # never set a policy: the new default
        ("[retention]\ngc_interval_s = 60\n", {}, 1000),  # chose when, not what
        ("[retention]\nwal_keep_records = 100\n", {}, 0),  # chose what: as before
        ("", {"retention.snapshot_keep": "8"}, 0),  # stored by an older reynd: as before
        ("[retention]\nhorizon_checkpoints = 5\nsnapshot_keep = 1\n", {}, 5),
    ],
)
def test_a_policy_set_before_the_default_horizon_keeps_its_meaning(
    short_tmp: Path, toml: str, stored: dict[str, str], horizon: int
) -> None:
    state = short_tmp / "state"
    if stored:  # config.db as an older reynd's retention.set left it
        d = start_daemon(short_tmp)
        d.stop()
        conn = sqlite3.connect(state / "state" / "config" / "config.db")
        conn.executemany("INSERT INTO settings VALUES (?, ?)", stored.items())
        conn.commit()
        conn.close()
    d = start_daemon(short_tmp, state_dir=state, config=toml)
    try:
        assert _policy(d)["horizon_checkpoints"] == horizon
        # Whatever it was, a later retention.set does not change it by the back door.
        assert d.call("retention.set", {"snapshot_keep": 3})["policy"]["horizon_checkpoints"] == (
            horizon
        )
    finally:
        d.stop()

"""The config generation store in a real daemon: agent configurations follow rewinds,
retention.set persists and does not (operator policy)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Daemon, run_daemon_to_exit, start_daemon
from tests.runtime_helpers import (
    agent,
    create_builtin,
    error_of,
    kill_daemon,
    records,
    restart,
    send,
    wait_until,
)


def keep(d: Daemon) -> int:
    return int(d.call("retention.get")["policy"]["snapshot_keep"])


def delay(d: Daemon, name: str = "a") -> tuple[float, float]:
    """Agent `name`'s builtin delay: in the WAL's state, and in config.db's mirror."""
    wal = float(agent(d, name)["options"].get("delay", 0.0))
    conn = sqlite3.connect(f"file:{config_db(d)}?mode=ro", uri=True)
    try:
        (options,) = conn.execute("SELECT options FROM agents WHERE name = ?", (name,)).fetchone()
    finally:
        conn.close()
    return wal, float(json.loads(options).get("delay", 0.0))


def mirrored(d: Daemon, value: float) -> None:
    """Wait until agent a's delay is `value` in the WAL's state and in the mirror."""
    wait_until(lambda: delay(d) == (value, value) or None, f"delay {value} mirrored")


def config_db(d: Daemon) -> Path:
    return d.state_dir / "state" / "config" / "config.db"


def index_lines(d: Daemon) -> list[list[str]]:
    text = (d.state_dir / "state" / "config" / "index.log").read_text()
    return [line.split()[1:] for line in text.splitlines()]


def gen_of(d: Daemon, seq: int) -> str:
    return [w[2] for w in index_lines(d) if w[0] == "gen" and int(w[1]) == seq][-1]


SLOW = 0.001  # agent a's delay after N


def history(d: Daemon) -> tuple[int, int]:
    """Agent a, turn one (boundary N), snapshot_keep 7 and a's delay SLOW, turn two (M)."""
    create_builtin(d, "a")
    n = send(d, "a", "one")["boundary_seq"]
    d.call("retention.set", {"snapshot_keep": 7})
    d.call("agents.configure", {"agent": "a", "options": {"delay": SLOW}})
    mirrored(d, SLOW)
    m = send(d, "a", "two")["boundary_seq"]
    assert keep(d) == 7
    return n, m


def test_rewind_and_checkout_carry_agents_but_not_the_operator_policy(daemon: Daemon) -> None:
    n, m = history(daemon)
    daemon.call("rewind", {"seq": n})
    assert delay(daemon) == (0.0, 0.0)  # configured after N: rewound, mirror too
    assert keep(daemon) == 7  # set after N, and still in force: operator policy
    daemon.call("checkout", {"seq": m})
    assert delay(daemon) == (SLOW, SLOW)  # the abandoned branch's configuration is back
    assert keep(daemon) == 7
    # A policy set on the rewound branch survives every later move, and restarts.
    daemon.call("retention.set", {"snapshot_keep": 11})
    tip = int(daemon.call("daemon.status")["head"])
    daemon.call("rewind", {"seq": n})
    assert keep(daemon) == 11 and delay(daemon) == (0.0, 0.0)
    daemon.call("checkout", {"seq": tip})
    assert keep(daemon) == 11 and delay(daemon) == (SLOW, SLOW)
    # Unchanged boundaries cost nothing: the index holds change points only (two
    # more turns add no entry), and there is one file per distinct content.
    before = [w for w in index_lines(daemon) if w[0] == "gen"]
    send(daemon, "a", "three")
    send(daemon, "a", "four")
    daemon.call("retention.set", {"snapshot_keep": 11})  # indexes the boundaries before it
    gens = [w for w in index_lines(daemon) if w[0] == "gen"]
    assert gens == before
    files = list((daemon.state_dir / "state" / "config" / "generations").glob("*.db"))
    assert len(files) == len({w[2] for w in gens})
    conn = sqlite3.connect(config_db(daemon))  # the mirror answers plain SQL
    assert conn.execute("SELECT name, executor, session FROM agents").fetchall() == [
        ("a", "builtin", "default")
    ]
    conn.close()


def test_runtime_settings_survive_a_restart_and_override_reynd_toml(short_tmp: Path) -> None:
    toml = "[retention]\nsnapshot_keep = 5\nwal_keep_records = 100\n"
    d = start_daemon(short_tmp, config=toml)
    try:
        assert keep(d) == 5
        d.call("retention.set", {"snapshot_keep": 9})
    finally:
        d.stop()
    d = start_daemon(short_tmp, state_dir=d.state_dir, socket_path=d.socket)
    try:
        policy: dict[str, Any] = d.call("retention.get")["policy"]
        assert policy["snapshot_keep"] == 9  # config.db over reynd.toml, key by key
        assert policy["wal_keep_records"] == 100  # never set at run time: reynd.toml's
        # A [retention] choosing what to keep, but no horizon key, means what it always did.
        assert policy["horizon_checkpoints"] == 0 and policy["horizon_age_s"] == 0
    finally:
        d.stop()


def test_a_crash_between_the_reset_record_and_the_restore(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, env={"REYN_CRASH_AT": "reset.durable"})
    try:
        n, m = history(d)
        with d.connect() as c, pytest.raises((EOFError, ConnectionError)):
            c.request("rewind", {"seq": n})
    finally:
        kill_daemon(d)
    (reset,) = records(d, kind="rewind")
    assert not any(w[0] == "reset" for w in index_lines(d))  # the restore never began
    d2 = restart(d, short_tmp)
    try:
        assert delay(d2) == (0.0, 0.0)  # as of N
        assert keep(d2) == 7  # the policy in force before the crash
        assert ["restored", str(reset["seq"])] in index_lines(d2)
        d2.call("checkout", {"seq": m})
        assert delay(d2) == (SLOW, SLOW) and keep(d2) == 7
    finally:
        d2.stop()


def test_a_damaged_generation_gets_a_clear_error_not_a_crash(short_tmp: Path) -> None:
    daemon = start_daemon(short_tmp)
    try:
        path = _damaged_checkout(daemon)
    finally:
        daemon.stop()
    # The unfinished restore is retried at start: the daemon refuses, naming the file.
    done = run_daemon_to_exit(short_tmp, state_dir=daemon.state_dir, socket_path=daemon.socket)
    assert done.returncode == 3
    assert str(path) in done.stderr and "Traceback" not in done.stderr
    path.unlink()  # the operator moves it away: the previous generation is used
    d2 = restart(daemon, short_tmp)
    try:
        # The mirror follows the WAL as of M; the operator policy was never at stake.
        assert delay(d2) == (SLOW, SLOW) and keep(d2) == 7
    finally:
        d2.stop()


def _damaged_checkout(daemon: Daemon) -> Path:
    n, m = history(daemon)
    daemon.call("rewind", {"seq": n})
    path = daemon.state_dir / "state" / "config" / "generations" / f"{gen_of(daemon, m)}.db"
    path.write_bytes(b"\0" * path.stat().st_size)
    err = error_of(daemon, "checkout", {"seq": m})
    assert err["code"] == -32018 and err["data"]["error"] == "config_damaged"
    assert str(path) in err["message"] and err["data"]["path"] == str(path)
    assert delay(daemon)[1] == 0.0 and keep(daemon) == 7  # config.db left as it was
    status = daemon.call("daemon.status")  # still serving, the reset itself stands
    assert status["head"] == records(daemon, kind="rewind")[-1]["seq"]
    assert "Traceback" not in daemon.stderr()
    return path

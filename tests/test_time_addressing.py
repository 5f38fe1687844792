"""Addressing by time and by count, against the real daemon: `at`, `back`, `before`/`after`.

The history is made by appending, and the times are the records' own `ts`,
read back from the WAL files: no test sleeps to make times distinct. Every
lookup is checked before and after a restart (the index is rebuilt from what
opening loads), and across branches (checkout --at goes where the tip was,
on whatever branch).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import NO_HORIZON, Client, Daemon, start_daemon
from tests.runtime_helpers import wal_records
from tests.test_clock_steps import SteppedClock, clock, stepped_daemon
from tests.test_reynctl_cli import ok, reynctl

__all__ = ["clock"]  # the fixture, used by the clock test below


class History:
    """Agent x, turns appended through wal.append; `ends[n]` the seq of turn n's end."""

    def __init__(self, d: Daemon) -> None:
        self.d = d
        self.ends: dict[int, int] = {}
        self._call("agent.created", executor="external")

    def _call(self, kind: str, **data: Any) -> int:
        return int(self.d.call("wal.append", {"agent": "x", "kind": kind, "data": data})["seq"])

    def turn(self, n: int) -> int:
        self._call("message.received", message_id=f"m{n}", text=f"q{n}")
        self._call("turn.started", turn_id=f"t{n}", message_id=f"m{n}")
        self.ends[n] = self._call("turn.ended", turn_id=f"t{n}", reply=f"a{n}")
        return self.ends[n]

    def ts(self) -> dict[int, float]:
        """Every record's time, read from the WAL files."""
        return {r["seq"]: r["ts"] for r in wal_records(self.d)}


def _error(c: Client, method: str, params: Any) -> dict[str, Any]:
    reply = c.request(method, params)
    assert "error" in reply, reply
    return dict(reply["error"])


@pytest.fixture
def branched(short_tmp: Path) -> Iterator[tuple[Daemon, History, dict[str, int]]]:
    """Turns 1..3, rewind to 1 (reset r1), turns 4, 5, checkout 3 (reset r2), turn 6."""
    d = start_daemon(short_tmp)
    try:
        h = History(d)
        for n in (1, 2, 3):
            h.turn(n)
        r1 = d.call("rewind", {"seq": h.ends[1]})["reset_seq"]
        h.turn(4)
        h.turn(5)
        r2 = d.call("checkout", {"seq": h.ends[3]})["reset_seq"]
        h.turn(6)
        yield d, h, {"r1": r1, "r2": r2}
    finally:
        d.stop()


def _check_lookups(d: Daemon, h: History, resets: dict[str, int]) -> None:
    ts, g = h.ts(), h.ends
    times = [ts[s] for s in sorted(ts)]
    assert times == sorted(times), "the test needs a clock that did not step"
    with d.connect() as c:

        def where(t: float) -> int:
            return int(c.call("state.get", {"at": t})["seq"])

        # Where the tip was, on whatever branch: g5 lies on the abandoned branch r1.
        assert where(ts[g[5]]) == g[5]
        assert c.call("state.get", {"at": ts[g[5]]})["active"] is False
        assert where(ts[g[2]]) == g[2]
        # Just after a reset record: the tip had its target's state.
        assert where(ts[resets["r1"]]) == g[1]
        assert where(ts[resets["r2"]]) == g[3]
        # Mid-turn (the first record of turn 6): the last checkpoint or move before it.
        assert where(ts[resets["r2"] + 1]) == g[3]
        assert where(ts[g[1]] - 1e-3) == 0  # before every checkpoint: genesis
        # generations.list by time: after g2's time and before g6's, every branch.
        page = c.call(
            "generations.list",
            {"after": ts[g[2]], "before": ts[g[6]], "all_branches": True},
        )
        assert [x["seq"] for x in page["generations"]] == [g[5], g[4], g[3]]
        page = c.call("generations.list", {"before": ts[g[3]]})
        assert [x["seq"] for x in page["generations"]] == [g[2], g[1]]
        page = c.call("generations.list", {"after": ts[g[3]]})
        assert [x["seq"] for x in page["generations"]] == [g[6]]  # active only


def test_time_lookups_across_branches_and_a_restart(
    branched: tuple[Daemon, History, dict[str, int]], short_tmp: Path
) -> None:
    d, h, resets = branched
    _check_lookups(d, h, resets)
    d.stop()
    d2 = start_daemon(short_tmp, state_dir=d.state_dir)
    try:
        h.d = d2
        _check_lookups(d2, h, resets)
        ts, g = h.ts(), h.ends
        # rewind --at: the newest checkpoint on the *active* branch at or before
        # g5's time is g3 (g4, g5 are on the abandoned branch r1).
        with d2.connect() as c, d2.connect() as listener:
            listener.call("subscribe", {"topics": ["rewinds"]})
            res = c.call("rewind", {"at": ts[g[5]]})
            note = listener.recv_json()["params"]["data"]
        assert (res["target"], res["resolved_from"], res["at_time"]) == (g[3], "at", ts[g[5]])
        # Subscribers are told how the target was addressed, as the caller is.
        assert (note["resolved_from"], note["at_time"]) == ("at", ts[g[5]]), note
        # checkout --at: where the tip was at g5's time, its branch live again.
        res = d2.call("checkout", {"at": ts[g[5]]})
        assert (res["target"], res["mode"], res["resolved_from"]) == (g[5], "fork_switch", "at")
        assert d2.call("generations.list", {"limit": 1})["generations"][0]["seq"] == g[5]
    finally:
        d2.stop()


def test_rewind_back_counts_checkpoints_on_the_active_branch(
    branched: tuple[Daemon, History, dict[str, int]],
) -> None:
    d, h, _ = branched
    g = h.ends
    with d.connect() as c:
        # Active: turns 1..3, then turn 6 (4 and 5 were abandoned).
        res = c.call("rewind", {"back": 1})
        assert (res["target"], res["resolved_from"]) == (g[3], "back")
        # The tip is now a reset record with g3's state: one back is g2, not g3 again.
        assert c.call("rewind", {"back": 1})["target"] == g[2]
        assert c.call("rewind", {"back": 2})["target"] == 0  # g1, then genesis
        err = _error(c, "rewind", {"back": 1})
        assert err["code"] == -32002 and "--back of at most 0" in err["message"], err


BAD = [
    ("rewind", {}, "exactly one of seq / tag / at / back (got none)"),
    ("rewind", {"seq": 1, "at": "10m"}, "exactly one of seq / tag / at / back (got seq, at)"),
    ("rewind", {"at": "10m", "back": 1}, "(got at, back)"),
    ("rewind", {"back": 0}, "back"),
    ("rewind", {"at": "yesterday"}, "duration ago (90s, 10m"),
    ("rewind", {"at": True}, "at"),
    ("checkout", {}, "exactly one of seq / tag / at (got none)"),
    ("checkout", {"at": "10 minutes"}, "is not a time"),
    ("checkout", {"back": 1}, "back"),
    ("state.get", {"seq": 1, "at": 5}, "(got seq, at)"),
    ("state.get", {"at": "soon"}, "is not a time"),
    # A date the clock cannot place: invalid params, never an internal error.
    ("state.get", {"at": "0001-01-01"}, "outside the times this clock holds"),
    ("rewind", {"at": "0001-01-01"}, "outside the times this clock holds"),
    ("checkout", {"at": "0001-01-01"}, "outside the times this clock holds"),
    ("generations.list", {"after": "0001-01-01"}, "outside the times this clock holds"),
    ("generations.list", {"before": "later"}, "field `before`"),
]


def test_bad_addresses_are_invalid_params(daemon: Daemon) -> None:
    with daemon.connect() as c:
        c.call("wal.append", {"agent": "x", "kind": "agent.created"})
        head = c.call("daemon.status")["head"]
        for method, params, says in BAD:
            err = _error(c, method, params)
            assert err["code"] == -32602 and says in err["message"], (method, params, err)
        assert c.call("daemon.status")["head"] == head


def test_a_clock_stepped_back_keeps_time_monotone(short_tmp: Path, clock: SteppedClock) -> None:
    """Checkpoints made after the clock stepped back an hour count as made at the
    newest time before the step (docs/concepts.md#addresses)."""
    with stepped_daemon(short_tmp, clock) as d:
        h = History(d)
        h.turn(1)
        clock.step("-1h")
        h.turn(2)
        h.turn(3)
        ts, g = h.ts(), h.ends
        assert ts[g[2]] < ts[g[1]] - 3000  # the step is in the records
        with d.connect() as c:
            # At g2's own (stepped) time nothing had happened yet, by the running maximum.
            assert c.call("state.get", {"at": ts[g[2]]})["seq"] == 0
            # At g1's time, turns 2 and 3 count as made then: the newest is g3.
            assert c.call("state.get", {"at": ts[g[1]]})["seq"] == g[3]
            page = c.call("generations.list", {"after": ts[g[1]] - 1e-3})
            assert [x["seq"] for x in page["generations"]] == [g[3], g[2], g[1]]
            # A duration counts back by the daemon's (stepped) clock.
            assert c.call("rewind", {"at": "30m"})["target"] == 0


def test_reynctl_by_time_and_back(branched: tuple[Daemon, History, dict[str, int]]) -> None:
    d, h, _ = branched
    ts, g = h.ts(), h.ends
    sock = d.socket
    shown = json.loads(ok(reynctl("show", "--at", repr(ts[g[5]]), "--json", sock=sock)))
    assert shown["seq"] == g[5]
    listed = ok(reynctl("generations", "--after", repr(ts[g[2]]), "--json", sock=sock))
    assert [x["seq"] for x in json.loads(listed)["generations"]] == [g[6], g[3]]
    moved = reynctl("rewind", "--back", "1", "--yes", sock=sock)
    assert f"rewound to seq {g[3]}" in ok(moved) and "checkpoints back" in moved.stdout
    moved = reynctl("checkout", "--at", repr(ts[g[4]]), "--yes", sock=sock)
    assert f"seq {g[4]}" in ok(moved) and "addressed by time" in moved.stdout
    # Now active: g4 (branch r1), then g1 below it: at g2's time, the newest active is g1.
    moved = reynctl("rewind", "--at", repr(ts[g[2]]), "--yes", "--json", sock=sock)
    assert json.loads(ok(moved))["target"] == g[1]


@pytest.mark.parametrize(
    "args",
    [
        ["rewind"],
        ["rewind", "3", "--at", "10m"],
        ["rewind", "--at", "10m", "--back", "2"],
        ["rewind", "--back", "0"],
        ["rewind", "--at", "yesterday"],
        ["checkout", "--at", "10 minutes", "--yes"],
        ["checkout", "--yes"],
        ["show", "3", "--at", "1h"],
        ["generations", "--before", "soon"],
        ["show", "--at", "0001-01-01"],
    ],
)
def test_reynctl_bad_addresses_exit_2(args: list[str], short_tmp: Path) -> None:
    proc = reynctl(*args, sock=short_tmp / "none.sock")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.stdout, proc.stderr)


def test_a_time_before_the_oldest_kept_checkpoint_is_below_floor(short_tmp: Path) -> None:
    config = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 4096\n"
    config += "[retention]\ngc_interval_s = 0\n"
    d = start_daemon(short_tmp, config=config)
    try:
        h = History(d)
        for n in range(1, 41):
            h.turn(n)
        ts, g = h.ts(), h.ends  # before the collection drops the oldest records
        d.call("retention.set", {"snapshot_keep": 1, "wal_keep_records": 30, **NO_HORIZON})
        floor = d.call("retention.gc")["floor"]
        kept = [s for s in g.values() if s >= floor]
        assert floor > g[1] and kept, (floor, g)
        for restarted in (False, True):
            if restarted:
                d.stop()
                d = start_daemon(short_tmp, state_dir=d.state_dir, config=config)
                h.d = d
            with d.connect() as c:
                for method in ("state.get", "rewind", "checkout"):
                    err = _error(c, method, {"at": ts[g[1]]})
                    assert err["code"] == -32003, err
                    assert f"the oldest is seq {kept[0]}" in err["message"], err
                    assert err["data"]["oldest_at"] == ts[kept[0]], err
                assert c.call("state.get", {"at": ts[kept[1]]})["seq"] == kept[1]
                # A time no calendar holds is still answered, naming it as a number.
                err = _error(c, "state.get", {"at": -1e300})
                assert err["code"] == -32003 and "Unix seconds" in err["message"], err
                err = _error(c, "rewind", {"back": 40})
                assert err["code"] == -32003 and "was collected" in err["message"], err
    finally:
        d.stop()

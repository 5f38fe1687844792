"""The wall clock stepping under a real daemon: uptime stays true, age-based GC keeps history.

The clock is stepped for the daemon alone with libfaketime (LD_PRELOAD, Debian's
`libfaketime`): its offset is read from a file on every call, so the test steps
the daemon's wall clock mid-run, forward or back, without touching the
machine's. The monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC), as
a real step (date -s, an NTP step) leaves it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness import Daemon, start_daemon

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
DAY = 86400.0


@dataclass
class SteppedClock:
    """The daemon's wall clock offset, changed by rewriting the file libfaketime reads."""

    path: Path

    def step(self, offset: str) -> None:
        """Set the offset from the true time: "+2d", "-1d", "+0"."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{offset}\n")
        tmp.replace(self.path)  # never a half-written offset

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "NO_FAKE_STAT": "1",  # file times stay the kernel's
        }


@pytest.fixture
def clock(short_tmp: Path) -> SteppedClock:
    # A missing part fails, saying what to install (.ci/run installs it): a skip would hide it.
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} is missing: apt-get install libfaketime")
    c = SteppedClock(short_tmp / "faketime")
    c.step("+0")
    return c


@contextmanager
def stepped_daemon(short_tmp: Path, clock: SteppedClock, config: str = "") -> Iterator[Daemon]:
    d = start_daemon(short_tmp, config=config, env=clock.env())
    try:
        yield d
    finally:
        d.stop()


def test_uptime_never_goes_negative_when_the_clock_steps_back(
    short_tmp: Path, clock: SteppedClock
) -> None:
    with stepped_daemon(short_tmp, clock) as d:
        begun = time.monotonic()
        before = d.call("daemon.status")["uptime_s"]
        for offset in ("-1d", "+2d", "-1d"):
            clock.step(offset)
            uptime = d.call("daemon.status")["uptime_s"]
            assert before <= uptime <= before + time.monotonic() - begun + 1, (offset, uptime)
            before = uptime
        # The daemon's wall clock did step (its records carry it): the test is not vacuous.
        with d.connect() as c:
            seq = c.call("wal.append", {"agent": "ada", "kind": "agent.created"})["seq"]
            (record,) = c.call("wal.read", {"agent": "ada"})["events"]
        assert record["seq"] == seq and record["ts"] < time.time() - DAY / 2, record


CONFIG = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 4096

[retention]
gc_interval_s = 0
wal_keep_age_s = 3600
"""


def fill(d: Daemon, agent: str, n: int) -> int:
    with d.connect() as c:
        c.call("wal.append", {"agent": agent, "kind": "agent.created"})
        for i in range(n):
            data = {"message_id": f"{agent}-{i}", "text": "x" * 200}
            c.call("wal.append", {"agent": agent, "kind": "message.received", "data": data})
        return int(c.call("daemon.status")["head"])


def test_a_clock_stepped_forward_does_not_age_seconds_old_history(
    short_tmp: Path, clock: SteppedClock
) -> None:
    """wal_keep_age_s = 1 h: two days on the wall clock, seconds on the monotonic one."""
    with stepped_daemon(short_tmp, clock, CONFIG) as d:
        head = fill(d, "ada", 100)
        assert d.call("retention.get")["segments"] >= 4  # GC would have segments to drop
        clock.step("+2d")
        fill(d, "bob", 5)  # records stamped with the stepped clock
        report = d.call("retention.gc")
        assert report["segments_dropped"] == 0, report
        assert d.call("retention.get")["floor"] == 1
        assert d.call("state.get", {"seq": 1})["seq"] == 1
        assert d.call("state.get", {"seq": head, "agent": "ada"})["agents"]["ada"]["inbox"]
        # Stepped back to the true time: still nothing is old enough.
        clock.step("+0")
        assert d.call("retention.gc")["segments_dropped"] == 0


def test_records_stamped_by_a_clock_stepped_back_are_not_old_once_it_is_corrected(
    short_tmp: Path, clock: SteppedClock
) -> None:
    """Written while the clock was two days behind, then the clock is put right: seconds old."""
    with stepped_daemon(short_tmp, clock, CONFIG) as d:
        clock.step("-2d")
        fill(d, "ada", 100)
        assert d.call("retention.get")["segments"] >= 4
        assert d.call("retention.gc")["segments_dropped"] == 0
        clock.step("+0")  # an NTP step puts the clock right: the records look two days old
        fill(d, "bob", 5)
        report = d.call("retention.gc")
        assert report["segments_dropped"] == 0, report
        assert d.call("state.get", {"seq": 1})["seq"] == 1

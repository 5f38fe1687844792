"""The log's timestamp: what structlog's TimeStamper(fmt="iso", utc=True) wrote, made cheaper."""

from __future__ import annotations

import datetime
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reynd.daemon import logs


def _structlog_format(ns: int) -> str:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    exact = epoch + datetime.timedelta(microseconds=ns // 1000)  # no float rounding
    return exact.isoformat().replace("+00:00", "Z")


@given(st.integers(min_value=0, max_value=4_102_444_800 * 10**9))  # up to 2100
def test_the_timestamp_reads_as_structlogs_iso_utc(ns: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time_ns", lambda: ns)
        assert logs.iso_utc_timestamp(None, "info", {})["timestamp"] == _structlog_format(ns)
        # Again within the same second: from the cached date and time of day.
        later = ns - ns % 10**9 + (ns % 10**9 + 1000) % 10**9
        patch.setattr(time, "time_ns", lambda: later)
        assert logs.iso_utc_timestamp(None, "info", {})["timestamp"] == _structlog_format(later)

"""LangGraph's own checkpointer conformance suite, run against ReyndSaver on a real daemon.

All eight capabilities must be detected and pass (the suite's FULL level).
The suite is an install of the `test` extra: without it this module is
skipped, which .ci/run never is (it installs `.[test]`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from reynctl.langgraph import ReyndSaver
from tests.harness import Daemon


def test_reynd_saver_passes_every_capability(daemon: Daemon) -> None:
    @checkpointer_test(name="ReyndSaver")
    async def reynd_saver() -> AsyncIterator[ReyndSaver]:
        saver = ReyndSaver(str(daemon.socket))
        try:
            yield saver
        finally:
            saver.close()

    report = asyncio.run(validate(reynd_saver, progress=ProgressCallbacks.verbose()))
    report.print_report()
    results = report.results
    assert {c.value for c in ALL_CAPABILITIES} <= results.keys()
    failed = {name: r.failures for name, r in results.items() if not r.detected or not r.passed}
    assert not failed, failed
    assert report.conformance_level() == "FULL"

"""Edit, reapply and plain moves interleaved, with a SIGKILL inside an atomic batch (issue 25).

Hypothesis picks a script of messages and moves (plain, with `then`, with
`reapply`, with both) and which batch record the crash point `wal.mid_batch`
kills the daemon at. After the restart the log never holds half a batch:
the move the crash cut left nothing at all (the head is where it was before
that call), every batch in the log is whole, and the daemon goes on.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reynd.storage.crashpoints import CRASH_ENV
from tests.harness import Daemon, short_tempdir, start_daemon
from tests.runtime_helpers import head, records, restart, send

# A step: a message (None), or a move back k checkpoints-or-so with its options.
MOVES = st.tuples(st.integers(1, 6), st.booleans(), st.booleans(), st.booleans())
SCRIPT = st.lists(st.one_of(st.none(), MOVES), min_size=2, max_size=10)


def _move(d: Daemon, step: tuple[int, bool, bool, bool], n: int) -> dict[str, Any]:
    back, edit, reapply, checkout = step
    params: dict[str, Any] = {"seq": max(1, head(d) - back)}
    if edit:
        params["then"] = {"agent": "x", "text": f"edit {n}"}
    if reapply:
        params["reapply"] = "messages"
    with d.connect() as c:
        reply: dict[str, Any] = c.request("checkout" if checkout else "rewind", params)
    return reply


def _whole_batches(d: Daemon) -> None:
    recs = records(d)
    by_seq = {r["seq"]: r for r in recs}
    for r in recs:
        more = r.get("more", 0)
        assert all(r["seq"] + k in by_seq for k in range(1, more + 1)), r
    assert not recs or recs[-1].get("more", 0) == 0


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(script=SCRIPT, kill_at=st.integers(1, 3))
def test_no_crash_leaves_half_a_batch(script: list[Any], kill_at: int) -> None:
    _run(script, kill_at)


def _run(script: list[Any], kill_at: int) -> bool:
    """Run `script` until the crash point kills the daemon; restart and check. Crashed?"""
    with short_tempdir() as tmp:
        d = start_daemon(tmp, env={CRASH_ENV: f"wal.mid_batch:{kill_at}"})
        try:
            d.call("wal.append", {"agent": "x", "kind": "agent.created", "data": {}})
            before = head(d)
            crashed = False
            for n, step in enumerate(script):
                before = head(d)
                if step is None:
                    send(d, "x", f"message {n}", wait=False)
                    continue
                try:
                    _move(d, step, n)
                except EOFError:
                    crashed = True
                    break
            if crashed:
                d.wait()
        finally:
            if d.proc.poll() is None:
                d.stop()
            else:
                d.proc.wait()
        d = restart(d, tmp)
        try:
            if crashed:
                assert head(d) == before  # the move the kill cut left nothing
            _whole_batches(d)
            assert send(d, "x", "after", wait=False)["seq"] == head(d)
        finally:
            d.stop()
    return crashed


@pytest.mark.parametrize("kill_at", [1, 2])
def test_an_edit_with_reapply_killed_inside_leaves_nothing(kill_at: int) -> None:
    """The example the property test is built around, always run."""
    assert _run([None, None, (2, True, True, False)], kill_at)

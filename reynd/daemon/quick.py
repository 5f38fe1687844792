"""The methods a connection's reader answers itself, when their params say it is quick.

The one table of them (rpc.Dispatcher.quick_call): a quick call waits for
nothing (no lock, no gate, no thread, no reconstruct), so running it inline
saves the hand-over to a request task.

And the brief ones, run inline only when they are the connection's only
call: they wait, for the write gate, their agent's lock and one sync, never
for a client or a turn. Their client waits for the reply, so the reader
loses nothing by not reading meanwhile; the hand-over and its scheduler
pass were a tenth of a durable append's CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reynd.daemon.state_api import at_tip

__all__ = ["BRIEF_CALLS", "QuickTest", "always_quick", "quick_calls"]

# Is a call with these (decoded) params quick?
QuickTest = Callable[[Any], bool]


def always_quick(params: object) -> bool:
    """The test of a method that is quick whatever its params."""
    return True


def quick_calls(head: Callable[[], int]) -> dict[str, QuickTest]:
    """Every quick method with its test; `head` reads the tip (state.get is quick there)."""
    return {
        "daemon.status": always_quick,
        "rpc.discover": always_quick,  # the transport's, a document encoded once
        # At the tip: the reply encoded once per head (TipReply), no reconstruct.
        "state.get": lambda p: at_tip(p, head()),
    }


BRIEF_CALLS: frozenset[str] = frozenset(("wal.append", "wal.append_batch"))
"""Methods that end within a sync: the reader runs one that is its connection's only call."""

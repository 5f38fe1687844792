"""The daemon's tables of methods, each derived from one declaration (issue 23).

Which methods a read-only replica refuses comes from `mutating` in
reynd/protocol/methods.py; which ones a connection's reader answers itself
comes from daemon/quick.py alone. Pinned here against the lists the daemon
typed by hand before, so a change of behaviour shows.
"""

from __future__ import annotations

from typing import Any

import pytest

from reynd.daemon.context import CallContext
from reynd.daemon.quick import quick_calls
from reynd.daemon.read_only import refuse_writes
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.methods import METHODS
from reynd.replication.objects import parse_url

# The transport's own methods (Server._own_handlers): never the App's to refuse.
TRANSPORT = {"subscribe", "unsubscribe", "daemon.shutdown", "rpc.discover"}
# What the App refused on a replica when the list was typed by hand.
HAND_TYPED_WRITES = {
    "wal.append",
    "wal.append_batch",
    "rewind",
    "checkout",
    "act_turn.rewind",
    "agents.create",
    "agents.configure",
    "agents.send",
    "agents.cancel",
    "agents.resolve",
    "interventions.answer",
    "retention.set",
    "retention.gc",
}
# The writes issue 24 added since: every one of them appends to the WAL.
LATER_WRITES = {"undo", "tags.set", "tags.delete"}


async def _served(params: Any, ctx: CallContext) -> str:
    return "served"


async def test_a_replica_refuses_exactly_the_mutating_methods_the_app_serves() -> None:
    source = parse_url("s3://bucket/primary/")
    app_methods = {name: _served for name in METHODS if name not in TRANSPORT}
    handlers = refuse_writes(app_methods, source)
    assert handlers.keys() == app_methods.keys()
    refused = {name for name, handler in handlers.items() if handler is not _served}
    assert refused == HAND_TYPED_WRITES | LATER_WRITES
    ctx = CallContext(connection_id=1, peer=None)
    with pytest.raises(errors.ReadOnlyReplica) as caught:
        await handlers["wal.append"](None, ctx)
    assert caught.value.data == {"source": "s3://bucket/primary/"}
    assert await handlers["state.get"](None, ctx) == "served"


def test_the_quick_methods_are_one_table_and_state_get_is_quick_at_the_tip_only() -> None:
    head = 7
    quick = quick_calls(lambda: head)
    assert set(quick) == {"daemon.status", "rpc.discover", "state.get"}
    assert quick["daemon.status"](m.StatusParams())
    at_tip = quick["state.get"]
    assert at_tip(m.StateParams()) and at_tip(m.StateParams(seq=7))
    assert not at_tip(m.StateParams(seq=6)) and not at_tip(m.StateParams(agent="a"))
    head = 8  # the tip moved: read at each call
    assert not at_tip(m.StateParams(seq=7)) and at_tip(m.StateParams(seq=8))

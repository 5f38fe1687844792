"""A read-only replica's handlers: every method that writes refuses, naming where writes go.

Which methods write is declared once, with each method (`mutating` in
reynd/protocol/methods.py); reads, subscriptions and as-of queries work.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from reynd.daemon.context import CallContext
from reynd.daemon.rpc import Handler
from reynd.protocol import errors
from reynd.protocol.methods import METHODS
from reynd.replication.objects import Location

__all__ = ["refuse_writes"]


def refuse_writes(handlers: Mapping[str, Handler], source: Location) -> dict[str, Handler]:
    """`handlers`, each mutating method's replaced by the read-only replica's refusal."""
    refuse = partial(_read_only, source)
    return {
        name: refuse if METHODS[name].mutating else handler for name, handler in handlers.items()
    }


async def _read_only(source: Location, params: object, ctx: CallContext) -> object:
    raise errors.ReadOnlyReplica(
        f"this daemon is a read-only replica of {source}: send writes to the daemon that "
        "ships there (reads, subscriptions and as-of queries work here)",
        {"source": str(source)},
    )

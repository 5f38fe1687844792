"""`wal.read`: one agent's events on the active lineage, for runtimes that keep their own view.

An external runtime that stores its data as events of an agent (the
LangGraph saver, reynctl.langgraph) reads them back with this method and
follows rewinds without re-reading everything: it passes the tip it last
synced to (`since`), and the answer says how much of what it holds is still
on the active lineage (`common`) and sends the agent's events above that.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from reynd.protocol import errors
from reynd.protocol.base import MethodDef, Params, Result
from reynd.protocol.limits import MAX_READ_RECORDS
from reynd.protocol.names import AgentRef

__all__ = ["DEFS", "WalReadParams", "WalReadResult"]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class WalReadParams(Params, kw_only=True):
    """`since`: the tip the reader last synced to (0, the default: it holds nothing).

    Events come oldest first, at most `limit` of them; when `more` is true,
    call again with `since` = the result's `upto`.
    """

    agent: AgentRef
    since: NonNegative = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_READ_RECORDS)] = 1000


class WalReadResult(Result, kw_only=True):
    """`common`: the highest seq on both lineage(`since`) and the active lineage.

    The reader drops what it holds above `common` (a rewind abandoned it),
    then applies `events`: the agent's records on the active lineage with
    `common` < seq <= `upto`, each as written in the WAL (`kind`, `seq`,
    `ts`, then its fields). Records below the WAL floor are gone (retention).
    An agent that does not exist at the tip has no events (a rewind to before
    its creation leaves none): no error.
    """

    head: int
    branch: int
    common: int
    upto: int
    events: list[dict[str, Any]]
    more: bool = False


DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "wal.read",
        WalReadParams,
        WalReadResult,
        "One agent's events on the active lineage since the tip a reader last synced to.",
        (errors.SeqOutOfRange,),
    ),
)

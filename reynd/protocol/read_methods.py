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

__all__ = [
    "DEFS",
    "MAX_HAVING",
    "NEEDLE_MAX",
    "NEEDLE_MIN",
    "WalGetParams",
    "WalGetResult",
    "WalReadParams",
    "WalReadResult",
]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
# `having`: at most this many strings, each at least this long (a short one matches
# too much to be worth a search; a long thread is searched once per string).
MAX_HAVING = 8
NEEDLE_MIN, NEEDLE_MAX = 4, 200
Needle = Annotated[str, msgspec.Meta(min_length=NEEDLE_MIN, max_length=NEEDLE_MAX)]


class WalReadParams(Params, kw_only=True):
    """`since`: the tip the reader last synced to (0, the default: it holds nothing).

    Events come oldest first, at most `limit` of them; when `more` is true,
    call again with `since` = the result's `upto`.
    """

    agent: AgentRef
    since: NonNegative = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_READ_RECORDS)] = 1000
    # Only the records that hold one of these strings as a JSON string (a key or a
    # value, anywhere in the record, e.g. an id): found by a search of the stored
    # bytes, so a few records of a long lineage cost what they hold plus a scan in C
    # of the rest. Empty: every record.
    having: Annotated[list[Needle], msgspec.Meta(max_length=MAX_HAVING)] = []
    # Only the records since the agent's turn `turn` in flight started (its
    # `turn.started` and after); none when that turn is not in flight. A reader
    # that keeps an object open as a turn (an external agent) skips what a close
    # hid without searching for it, and a long thread's earlier lives unread.
    # With `since` > 0, `common` is 0 when that life of the turn has ended since
    # (the turn is no longer in flight, or started again after `since`).
    turn: str | None = None
    # Also the records the found ones say they need, in `needed` (one round trip where a
    # reader would call wal.get twice): a record whose `input` lists `need` (seqs,
    # ascending, each but the first as the gap from the one before) brings those, and
    # one whose `input` names `need_of` (a seq) brings that record's own `need` too.
    # The convention of external agents' step records (reynctl.langgraph's puts).
    need: bool = False


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
    # With `need`: the records the events need that are the agent's, on the active lineage
    # and not among `events`, oldest first, each as in `events` (at most the read's limit;
    # a reader checks that it has what it needs).
    needed: list[dict[str, Any]] = []


class WalGetParams(Params, kw_only=True):
    """`seqs`: the records wanted, by seq (a reader that knows where they are)."""

    agent: AgentRef
    seqs: Annotated[
        list[Annotated[int, msgspec.Meta(ge=1)]], msgspec.Meta(max_length=MAX_READ_RECORDS)
    ]


class WalGetResult(Result, kw_only=True):
    """The agent's records among `seqs` that are on the active lineage, oldest first, each
    as `wal.read` returns it. A seq that is another agent's, off the active lineage (a
    rewind abandoned it) or below the WAL floor (retention) is left out: the reader
    checks that it has what it asked for.
    """

    head: int
    events: list[dict[str, Any]]


DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "wal.read",
        WalReadParams,
        WalReadResult,
        "One agent's events on the active lineage since the tip a reader last synced to.",
        (errors.SeqOutOfRange,),
    ),
    MethodDef(
        "wal.get",
        WalGetParams,
        WalGetResult,
        "One agent's events at the given seqs, those on the active lineage.",
        (errors.SeqOutOfRange,),
    ),
)

"""Moves of the tip: who made them and why, the reflog, undo (issue 24).

Every rewind, checkout, act-turn rewind and undo appends one reset record;
that record keeps the caller's reason and who called (the peer's uid and
pid, and the name its client gave with `session.hello`). `reflog.list`
reads those records back from the WAL, newest first; `undo` checks out
where the tip was before a move. Registered in methods.METHODS (undo there,
since it answers with RewindResult).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from reynd.protocol.agent_methods import AgentsSendParams
from reynd.protocol.base import MethodDef, Params, Result
from reynd.protocol.names import ClientName, Reason

__all__ = [
    "DEFS",
    "MAX_UNDO_STEPS",
    "MoveMode",
    "ReflogEntry",
    "ReflogParams",
    "ReflogResult",
    "ResetBy",
    "SessionHelloParams",
    "SessionHelloResult",
    "UndoParams",
]

MAX_UNDO_STEPS: Final = 1000  # how far back one undo may walk; a page of reflog.list holds as many

MoveMode = Literal["undo", "fork_switch", "act_turn"]
"""What a move did: back to a seq on the active branch (rewind, or a checkout
of one), onto an abandoned branch (checkout), or inside a turn (act_turn.rewind)."""


class ResetBy(Result, kw_only=True):
    """Who moved the tip: the peer's uid and pid, and the client's name if it gave one."""

    uid: int | None = None
    pid: int | None = None
    client: str = ""


class SessionHelloParams(Params, kw_only=True):
    """Name this connection's client; reset records it makes keep the name."""

    client: ClientName


class SessionHelloResult(Result, kw_only=True):
    client: str
    uid: int | None = None
    pid: int | None = None


class UndoParams(Params, kw_only=True):
    """Check out where the tip was before the `steps`-th newest move (1: the last one).

    `then`: deliver a message right after the reset record, in its atomic batch,
    as rewind's `then` (issue 25). `dry_run`: say which move it would undo and
    what that changes, as rewind's; nothing is written or cancelled."""

    steps: Annotated[int, msgspec.Meta(ge=1, le=MAX_UNDO_STEPS)] = 1
    reason: Reason = ""
    then: AgentsSendParams | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.dry_run and self.then is not None:
            raise ValueError(
                "field `then` conflicts with `dry_run`: a dry run previews the move alone; "
                "preview without `then`, then make the move with it"
            )


class ReflogParams(Params, kw_only=True):
    """Newest first; `cursor` is a `next_cursor` from the page before."""

    cursor: Annotated[int, msgspec.Meta(ge=0)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 50


class ReflogEntry(Result, kw_only=True):
    """One move of the tip: its reset record.

    `collected`: the record lies below the retention floor; only its seq,
    `supersedes`, `target` and `mode` are still known (from `state/retained`):
    `op` then reads "rewind" whatever wrote it, `ts` 0.
    """

    seq: int
    supersedes: int
    target: int
    op: Literal["rewind", "checkout", "act_turn"] = "rewind"
    mode: MoveMode = "undo"
    ts: float = 0.0
    agent: str | None = None
    reason: str = ""
    by: ResetBy | None = None
    cancelled: list[list[str]] = []
    collected: bool = False


class ReflogResult(Result, kw_only=True):
    entries: list[ReflogEntry]
    next_cursor: int | None = None


DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "session.hello",
        SessionHelloParams,
        SessionHelloResult,
        "Name this connection's client program; reset records keep it as who moved the tip.",
    ),
    MethodDef(
        "reflog.list",
        ReflogParams,
        ReflogResult,
        "Every move of the tip (reset records in the WAL), newest first, with paging.",
    ),
)

"""The reflog: every move of the tip, told from its reset record (issue 24).

Pure code, no I/O. A reset record R always supersedes R - 1 (the record just
before it, `Store.reset_batch`), so where the tip was before a move is known
even for a record retention collected: only its seq and target are kept then.
"""

from __future__ import annotations

from reynd.core.lineage import Lineage
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol.moves import MoveMode, ReflogEntry, ResetBy

__all__ = ["by_of", "collected_entry", "entry_of", "mode_of", "undo_target"]


def mode_of(lineage: Lineage, seq: int, target: int, op: str) -> MoveMode:
    """What reset record `seq` did: its target was on the tip's lineage (undo) or not."""
    if op == "act_turn":
        return "act_turn"
    return "undo" if lineage.on_lineage(target, seq - 1) else "fork_switch"


def by_of(record: ev.Rewind) -> ResetBy | None:
    """Who wrote the record; None for a record older than issue 24 (it did not say)."""
    if record.uid is None and record.pid is None and not record.client:
        return None
    return ResetBy(uid=record.uid, pid=record.pid, client=record.client)


def entry_of(lineage: Lineage, record: ev.Rewind) -> ReflogEntry:
    """The reflog entry of a reset record read from the WAL."""
    return ReflogEntry(
        seq=record.seq,
        supersedes=record.supersedes,
        target=record.target_n,
        op=record.mode,
        mode=mode_of(lineage, record.seq, record.target_n, record.mode),
        ts=record.ts,
        agent=record.agent,
        reason=record.reason,
        by=by_of(record),
        cancelled=[list(pair) for pair in record.cancelled],
    )


def collected_entry(lineage: Lineage, seq: int, target: int) -> ReflogEntry:
    """The entry of a reset record below the retention floor: only seq and target remain."""
    mode = mode_of(lineage, seq, target, "rewind")
    return ReflogEntry(seq=seq, supersedes=seq - 1, target=target, mode=mode, collected=True)


def undo_target(lineage: Lineage, steps: int) -> tuple[int, int]:
    """(the reset record undone, where the tip was before it) for `undo --steps`.

    The steps-th newest reset record R: the tip was R - 1 before it. Raises
    NothingToDo when there are fewer moves than that.
    """
    newest = lineage.newest_resets(None, steps)
    if len(newest) < steps:
        moves = len(newest)
        raise errors.NothingToDo(
            f"nothing to undo {steps} moves back: the tip has moved {moves} times "
            "(see `reynctl reflog`)",
            {"steps": steps, "moves": moves},
        )
    reset, _ = newest[-1]
    return reset, reset - 1

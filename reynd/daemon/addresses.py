"""Addresses of a seq other than the seq itself: a tag, a time (`at`), a count back (`back`).

The times are parsed by reynd.protocol.timespec (durations count back from
this daemon's clock, the one that stamps the records) and looked up in the
store's time index (core/timeline.py): a bisect, never a scan. A rewind or
checkout resolves its address in the coordinator, one reset at a time, so
"the newest checkpoint at T" is the newest as of the tip that reset moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from reynd.core.tags import resolve
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.timespec import TimeSpec, TimeSpecError, format_time, resolve_time
from reynd.storage.store import Store

__all__ = ["Address", "Addresses", "dangling"]


@dataclass(frozen=True, slots=True)
class Address:
    """A target to resolve when the move runs, and how it was named."""

    resolve: Callable[[], int]
    how: str
    at_time: float | None = None

    def stamp(self, result: m.RewindResult) -> m.RewindResult:
        result.resolved_from = self.how
        result.at_time = self.at_time
        return result


class Addresses:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    def time(self, value: TimeSpec, field: str = "at") -> float:
        """`value` as Unix seconds, or invalid_params saying which forms a time takes."""
        try:
            return resolve_time(value, self._clock())
        except TimeSpecError as exc:
            raise errors.InvalidParams(
                f"Invalid params (field `{field}`): {exc}", {"field": field, "reason": str(exc)}
            ) from None

    # -- moves ------------------------------------------------------------------

    def rewind(self, p: m.RewindParams) -> Address:
        """The target of a rewind: its seq, or the newest active checkpoint at `at`,
        or `back` checkpoints back on the active branch."""
        if p.at is not None:
            t = self.time(p.at)
            return Address(lambda: self._moved(self.checkpoint_at(t), t), "at", t)
        if p.back is not None:
            back = p.back
            return Address(lambda: self.back(back), "back")
        return self._given(p.seq, p.tag)

    def checkout(self, p: m.CheckoutParams) -> Address:
        """The target of a checkout: its seq, or where the tip was at `at`."""
        if p.at is not None:
            t = self.time(p.at)
            return Address(lambda: self._moved(self.tip_at(t), t), "at", t)
        return self._given(p.seq, p.tag)

    def _given(self, seq: int | None, tag: str | None) -> Address:
        """A seq, or the tag naming it (looked up when the move runs: a tag may move)."""
        if tag is not None:
            name = tag
            return Address(lambda: self.tagged(name), "tag")
        assert seq is not None  # the params hold exactly one address
        given = seq
        return Address(lambda: given, "seq")

    # -- lookups ----------------------------------------------------------------

    def tagged(self, name: str) -> int:
        """The seq tag `name` names: tag_not_found, or below_floor when it dangles."""
        store = self._store
        target = resolve(store.tags, name).target
        if dangling(store, target):
            raise errors.BelowFloor(
                f"tag {name!r} names seq {target}, whose history retention collected "
                f"(the floor is {store.floor}): the tag dangles; `reynctl tag --delete {name}` "
                "removes it",
                {"tag": name, "seq": target, "floor": store.floor},
            )
        return target

    def seq_or_tag(self, seq: int | None, tag: str | None) -> int:
        """A read's seq, given directly or by its tag (the params hold exactly one)."""
        if tag is not None:
            return self.tagged(tag)
        assert seq is not None
        return seq

    def tip_at(self, t: float) -> int:
        """The seq whose state the tip had at time `t`, on whatever branch."""
        seq = self._store.timeline.tip_at(t)
        return self._found(seq, t)

    def checkpoint_at(self, t: float) -> int:
        """The newest checkpoint on the active branch at or before time `t`."""
        store = self._store
        seq = store.timeline.checkpoint_at(t, store.lineage.active_below)
        return self._found(seq, t)

    def back(self, n: int) -> int:
        """`n` checkpoints back on the active branch from the tip's own state."""
        store = self._store
        start = self._state_seq(store.head)
        count = 0
        for entry, _, _ in store.generations(cursor=start):
            count += 1
            if count == n:
                return entry.seq
        floor = store.floor
        collected = floor > 1  # a log's first record is seq 1
        genesis = not collected and start > 0  # the checkpoint before every other
        if genesis and count == n - 1:
            return 0
        kept = count + genesis
        cls = errors.BelowFloor if collected else errors.SeqOutOfRange
        raise cls(
            f"the active branch holds only {kept} checkpoint(s) below seq {start}"
            + (f" (history below seq {floor} was collected)" if collected else "")
            + f": use a --back of at most {kept}",
            {"back": n, "available": kept, "floor": floor},
        )

    def _found(self, seq: int | None, t: float) -> int:
        if seq is not None:
            return seq
        store = self._store
        oldest = store.timeline.oldest()
        when = format_time(t)
        if oldest is None:
            raise errors.BelowFloor(
                f"no checkpoint at or before {when} is kept: history below seq "
                f"{store.floor} was collected and no later checkpoint exists",
                {"at": t, "floor": store.floor},
            )
        seq, oldest_t = oldest
        raise errors.BelowFloor(
            f"no checkpoint at or before {when} is kept: the oldest is seq {seq} "
            f"at {format_time(oldest_t)} (history below seq {store.floor} was collected)",
            {"at": t, "floor": store.floor, "oldest_seq": seq, "oldest_at": oldest_t},
        )

    def _moved(self, seq: int, t: float) -> int:
        """`seq`, unless the tip already has its state (a move there would change nothing)."""
        if seq != self._store.head and seq == self._state_seq(self._store.head):
            raise errors.NothingToDo(
                f"the tip already has the state of seq {seq}, the one at {format_time(t)}",
                {"seq": seq, "at": t},
            )
        return seq

    def _state_seq(self, seq: int) -> int:
        """The seq whose state `seq` has: a reset record's target (followed), the record
        before a tag record (tags change no state), else itself."""
        lineage, tags = self._store.lineage, self._store.tags
        while seq:
            if lineage.is_reset(seq):
                seq = lineage.target_of(seq)
            elif tags.is_record(seq):
                # Never a branch's first record (that is its reset record): the one
                # before it is on the same branch.
                seq -= 1
            else:
                break
        return seq


def dangling(store: Store, target: int) -> bool:
    """The seq can no longer be rebuilt: below the floor, and no coarse snapshot there."""
    if target >= store.floor:
        return False
    try:
        store.plan(target)
    except errors.BelowFloor:
        return True
    return False

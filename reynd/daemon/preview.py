"""A move's preview (issue 25): what it would change, and what it cannot undo.

The records of the branch a move leaves (lineage(head) above its common
ancestor with the target) and of the one it lands on are read from the WAL
on a worker thread and summed by reynd/core/effects.py. A dry run writes
nothing and cancels nothing; a real move computes its `effects` the same
way, under the write gate, before its reset record is appended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence, Set
from typing import Final

import trio

from reynd.core.effects import effects_of, turns_and_agents
from reynd.core.lineage import Interval
from reynd.protocol import events as ev
from reynd.protocol import methods as m
from reynd.protocol.events import Event
from reynd.protocol.preview import MAX_LISTED, Effects, MovePreview
from reynd.storage.store import Store

__all__ = ["MOVE_READ_MAX", "Files", "Preview", "records_in"]

# The workspace paths a restore to a seq would write or remove (None: workspace rewind off).
# The workspace's side of a dry run: the paths a restore would change, and those changed
# outside reynd that would refuse it (Resets.restoring).
Files = Callable[[int], Awaitable[tuple[list[str], list[str]] | None]]


def records_in(
    store: Store, intervals: Iterable[Interval], kinds: Set[str] | None = None
) -> Iterator[Event]:
    """The records of `intervals` (ascending), in seq order, of `kinds` if given; blocking.

    What retention collected is gone (a checkout forking below the floor): skipped.
    """
    wal = store.wal
    first = wal.first_seq
    for lo, hi in intervals:
        if hi >= first:
            yield from wal.read(max(lo, first), hi, kinds)


def _kinds(*types: type[Event]) -> frozenset[str]:
    return frozenset(str(t.__struct_config__.tag) for t in types)


# The records the sums read; the others are skipped undecoded (a long abandoned
# branch is mostly messages and directives: a real move reads it too).
# What a real move reads of the branch it leaves for its `effects`, at most: a
# search of the bytes costs about a millisecond per MiB, and a rewind's latency
# must not grow with the length of the future it abandons (bench.scaling). A
# dry run reads it all: it was asked for.
MOVE_READ_MAX: Final = 8 << 20
EFFECT_KINDS: Final = _kinds(ev.StepStarted, ev.StepCommitted, ev.TurnEnded)
PREVIEW_KINDS: Final = EFFECT_KINDS | _kinds(ev.TurnStarted, ev.AgentCreated)


class Preview:
    """What a move to a target would do, read from the log as it stands."""

    def __init__(
        self,
        store: Store,
        in_flight: Callable[[], list[m.CancelledChain]],
        files: Files | None = None,
    ) -> None:
        """`in_flight`: the turns a move would cancel now; `files`: the workspace's."""
        self._store = store
        self._in_flight = in_flight
        self._files = files

    async def effects(self, target: int) -> Effects | None:
        """The effects of the steps on the branch a move to `target` abandons; None
        when that branch is longer than MOVE_READ_MAX bytes of log (a dry run says)."""
        leaving = self._store.lineage.leaving(target)
        wal = self._store.wal
        first = wal.first_seq
        size = sum(wal.bytes_between(max(lo, first), hi) for lo, hi in leaving if hi >= first)
        if size > MOVE_READ_MAX:
            return None
        return await trio.to_thread.run_sync(self._effects, leaving)

    def _effects(self, leaving: Sequence[Interval]) -> Effects:
        return effects_of(records_in(self._store, leaving, EFFECT_KINDS))

    async def dry_run(self, target: int) -> tuple[MovePreview, Effects, list[m.CancelledChain]]:
        """The preview of a move to `target`, its effects, and the turns it would cancel."""
        lineage = self._store.lineage
        leaving, arriving = lineage.leaving(target), lineage.arriving(target)
        cancelled = self._in_flight()
        preview, effects = await trio.to_thread.run_sync(self._read, leaving, arriving)
        if self._files is not None:
            files = await self._files(target)
            if files is not None:
                changing, unrecorded = files
                preview.files, preview.file_count = changing[:MAX_LISTED], len(changing)
                if unrecorded:
                    preview.unrecorded = unrecorded[:MAX_LISTED]
                    preview.unrecorded_count = len(unrecorded)
        return preview, effects, cancelled

    def _read(
        self, leaving: Sequence[Interval], arriving: Sequence[Interval]
    ) -> tuple[MovePreview, Effects]:
        left = list(records_in(self._store, leaving, PREVIEW_KINDS))
        gone, gone_count, gone_agents = turns_and_agents(left)
        back, back_count, back_agents = turns_and_agents(
            records_in(self._store, arriving, PREVIEW_KINDS)
        )
        preview = MovePreview(
            abandoned_turns=gone,
            abandoned_turn_count=gone_count,
            restored_turns=back,
            restored_turn_count=back_count,
            abandoned_agents=gone_agents,
            restored_agents=back_agents,
        )
        return preview, effects_of(left)

"""The state as of any retained seq, rebuilt from the nearest state at hand; the tip stays.

Planned on the event loop (the lineage and the snapshot list change there),
executed there too when small, else on a worker thread; a damaged snapshot
falls back to an older one (Store.fallback_plan). The read gate is held
throughout: GC never deletes a file a read is using.

A page that steps through checkpoints near the tip reads a new seq at each
step, and each would decode the nearest snapshot (megabytes) and replay up to
a snapshot interval of records. So states are kept in memory, by seq: forks
taken every `MARK_EVERY` records, of the tip as it moves (the commit hook
`committed`) and of each replay on its way, and the last states read and
snapshots decoded. The state as of a seq never changes
(the log only grows), so a kept state is exact for its seq forever; a read
replays onto a fork of the nearest one on the target's lineage (fork shares
every message, so it costs a list copy), and only after the log's own plan
was made, so a read the log refuses (out of range, below the floor) is still
refused. States handed out are shared: no reader changes them (as the tip's).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TypeVar

import trio

from reynd.core.reconstruct import ReplayPlan, plan_from_kept
from reynd.core.reduce import fork
from reynd.daemon.coordinator import Gate
from reynd.protocol.events import Event
from reynd.protocol.state import RuntimeState
from reynd.storage.errors import CorruptionError
from reynd.storage.store import Store

__all__ = ["AsOf", "ReadAsOf"]

# A read of the state as of a seq (the tip when None): AsOf.read.
ReadAsOf = Callable[[int | None], Awaitable[RuntimeState]]
T = TypeVar("T")

_CHEAP_REPLAY = 128  # records
_CHEAP_SNAPSHOT = 64 * 1024  # bytes
MARK_EVERY = 512  # records between two kept forks on the way: a read replays fewer
MARK_KEEP = 64  # forks kept at most (the lowest seqs go first)
MARK_ITEMS = 4_000_000  # and at most this many messages in them all (a fork is a list copy)
READ_KEEP = 4  # states read or snapshots decoded, kept (the least recently used goes)
# The tip is forked in the commit path (on the event loop, before the committer replies):
# O(agents + messages). Past this many agents the tip is not forked; reads replay from
# snapshots and the forks taken on their way, as before the forks existed.
MARK_AGENTS = 256


class AsOf:
    """Reconstructs past states for reads."""

    def __init__(self, store: Store, reads: Gate, *, every: int = MARK_EVERY) -> None:
        self._store = store
        self._reads = reads
        self._every = every
        # Forks of the state as of their seq, taken every `every` records: of the tip as
        # it moves (`committed`) and of each read's replay on its way to the target.
        self._marks: dict[int, RuntimeState] = {}
        self._items: dict[int, int] = {}  # each mark's `_items`, counted once
        self._last_mark = 0  # of the tip
        self._recent: OrderedDict[int, RuntimeState] = OrderedDict()  # least recent first
        self._building: dict[int, trio.Event] = {}  # reads in flight, by seq: one build each

    def committed(self, events: Sequence[Event]) -> None:
        """Commit hook: keep a fork of the tip every `every` records."""
        store = self._store
        head = store.head
        if head - self._last_mark >= self._every and store.state.seq == head:
            self._last_mark = head
            if len(store.state.agents) <= MARK_AGENTS:
                self._mark({head: fork(store.state)})

    def _mark(self, forks: dict[int, RuntimeState]) -> None:
        marks, counted = self._marks, self._items
        for seq, state in forks.items():
            marks[seq], counted[seq] = state, _items(state)
        items = sum(counted.values())
        for seq in sorted(marks):
            if len(marks) <= MARK_KEEP and items <= MARK_ITEMS:
                break
            del marks[seq]
            items -= counted.pop(seq)

    @property
    def kept(self) -> list[int]:
        """The seqs whose states are kept, sorted."""
        return sorted(self._marks.keys() | self._recent.keys())

    async def read(self, seq: int | None) -> RuntimeState:
        """The state as of `seq` (the tip when None), rebuilt off the event loop if costly."""
        store = self._store
        if seq is None or seq == store.head:
            return store.state
        async with self._reads.shared():
            while True:
                plan = store.plan(seq)  # first: raises what the log refuses
                state = self._kept(seq)
                if state is not None:
                    return state
                building = self._building.get(seq)
                if building is None:
                    break
                await building.wait()  # the same read in flight: its result is kept
            self._building[seq] = done = trio.Event()
            try:
                state = await self._build(plan)
            finally:
                del self._building[seq]
                done.set()
            self._keep(seq, state)
            return state

    def _kept(self, seq: int) -> RuntimeState | None:
        state = self._marks.get(seq)
        if state is None:
            state = self._recent.get(seq)
            if state is not None:
                self._recent.move_to_end(seq)
        return state

    def _keep(self, seq: int, state: RuntimeState) -> None:
        self._recent[seq] = state
        self._recent.move_to_end(seq)
        while len(self._recent) > READ_KEEP:
            self._recent.popitem(last=False)

    async def _build(self, plan: ReplayPlan) -> RuntimeState:
        store = self._store
        while True:
            base: RuntimeState | None = None
            nearer = plan_from_kept(store.lineage, plan, self.kept)
            if nearer is not None:
                plan, base = nearer, self._kept(nearer.snapshot)
            size = store.snapshots.sizes.get(plan.snapshot, 0) if base is None else 0
            marks: dict[int, RuntimeState] = {}
            try:
                loaded, state = await _off_loop(
                    plan, size, partial(self._replay, plan, base, marks)
                )
            except CorruptionError as exc:
                plan = store.fallback_plan(plan, exc)
                continue
            self._mark(marks)
            if loaded is not None:  # a later read near it forks it instead of decoding again
                self._keep(plan.snapshot, loaded)
            return state

    def _replay(
        self, plan: ReplayPlan, base: RuntimeState | None, marks: dict[int, RuntimeState]
    ) -> tuple[RuntimeState | None, RuntimeState]:
        """The state as of the plan's target, from `base` (the state as of the plan's
        snapshot, at hand) or else from the snapshot decoded (returned too: None when
        `base` was given or the plan starts at genesis); `marks` gets forks on the way."""
        loaded = None
        if base is None and plan.snapshot:
            loaded = base = self._store.snapshots.load(plan.snapshot)
        last = plan.snapshot

        def passing(state: RuntimeState) -> None:
            nonlocal last
            if state.seq - last >= self._every and state.seq != plan.target:
                last = state.seq
                marks[last] = fork(state)

        return loaded, self._store.execute(plan, base, passing)


def _items(state: RuntimeState) -> int:
    """What a fork of `state` copies, about: its messages."""
    return sum(len(agent.history) for agent in state.agents.values())


async def _off_loop(plan: ReplayPlan, snapshot_size: int, build: Callable[[], T]) -> T:
    """`build()` on the event loop when the plan is cheap, else on a worker thread."""
    if plan.replay_count <= _CHEAP_REPLAY and snapshot_size <= _CHEAP_SNAPSHOT:
        return build()  # well under a millisecond: less than the thread hop itself
    return await trio.to_thread.run_sync(build)

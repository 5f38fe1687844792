"""One lock per key (an agent), as cheap as a dict lookup while the key is free.

wal.append holds its agent's lock across the sync, so that a second append
of that agent is checked against a state the first already changed. A
trio.Lock per agent did it, at the price of its parking lot's bookkeeping
on every acquire and release, and a dict entry for every agent ever
written. Here a free key has no entry; a held one has the queue of the
tasks waiting for it, each handed the lock in turn (FIFO), so the entry
lives exactly as long as someone holds it.
"""

from __future__ import annotations

import collections

import trio

__all__ = ["KeyedLock"]


class KeyedLock:
    """Mutual exclusion per key, first come first served; not reentrant."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        # key -> the tasks waiting for it (empty: held, and nobody waits)
        self._held: dict[str, collections.deque[trio.lowlevel.Task]] = {}

    def __contains__(self, key: str) -> bool:
        """Someone holds `key`."""
        return key in self._held

    async def acquire(self, key: str) -> None:
        """Hold `key`: at once when it is free (no scheduler pass), else in turn.

        A cancelled caller stops here, holding nothing, whether it waited or not.
        """
        waiting = self._held.get(key)
        if waiting is None:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._held[key] = collections.deque()
            return
        task = trio.lowlevel.current_task()
        waiting.append(task)

        def abort(_: object) -> trio.lowlevel.Abort:
            waiting.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)  # woken by release: the key is ours

    def release(self, key: str) -> None:
        """Hand `key` to the first task waiting for it, or free it."""
        waiting = self._held[key]
        if waiting:
            trio.lowlevel.reschedule(waiting.popleft())
        else:
            del self._held[key]

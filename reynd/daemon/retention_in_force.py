"""The retention policy in force: one holder the parts that read it share, and its change event.

reynd.toml's [retention] is in force at start; `retention.set` changes it
through the config store (durable there first, then `use`). The GC schedule
waits on `changed` to re-arm; the collector and `retention.get` read
`current` when they need it, so no part keeps a copy that could go stale.
"""

from __future__ import annotations

import trio

from reynd.core.retention import RetentionPolicy

__all__ = ["RetentionInForce"]


class RetentionInForce:
    """The policy retention applies now (trio thread only)."""

    __slots__ = ("_changed", "current")

    def __init__(self, policy: RetentionPolicy) -> None:
        self.current = policy
        self._changed = trio.Event()

    def use(self, policy: RetentionPolicy) -> None:
        """Put `policy` in force and wake whoever waits for a change (the config store calls it)."""
        self.current = policy
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        """Return at the next `use`."""
        await self._changed.wait()

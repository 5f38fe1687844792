"""Side effects of a commit (or a reset), each registered by name and run on its own.

The committer calls its `on_commit` once a batch is durable and committed
(docs/durability.md rule 1): the appends are answered with their seqs
whatever follows. So what reacts to a commit (notifications, the substrates'
captures, the audit log, the config mirror, the runners, the snapshot
schedule, the shipper) must not be able to take that answer back: each hook
runs in the order registered, and one that raises is logged with its name
while the others still run. A hook runs on the committer's leader, between
two scheduler passes: it must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import structlog

__all__ = ["Hooks"]

log = structlog.get_logger("reynd.hooks")

T = TypeVar("T")


class Hooks(Generic[T]):
    """Named callbacks of one occasion (`what`), called in order, each failure its own."""

    __slots__ = ("_hooks", "_what")

    def __init__(self, what: str) -> None:
        self._what = what
        self._hooks: list[tuple[str, Callable[[T], None]]] = []

    def add(self, name: str, hook: Callable[[T], None]) -> None:
        """Run `hook` after the ones added before it."""
        self._hooks.append((name, hook))

    @property
    def names(self) -> list[str]:
        """The hooks' names, in the order they run."""
        return [name for name, _ in self._hooks]

    def __call__(self, subject: T) -> None:
        """Call every hook with `subject`; never raises (a failure is logged, the rest run)."""
        for name, hook in self._hooks:
            try:
                hook(subject)
            except Exception:
                log.exception("hook.failed", on=self._what, hook=name)

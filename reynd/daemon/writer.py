"""The daemon's path to the WAL for the records it is given: the committer, with the workspace.

With workspace rewind on, a step's commit or a boundary takes the
workspace's changes with it: a `workspace.files` record just before it, in
the same batch (Workspace.record). Every such append shares the write gate
(docs/design.md, Gates), so no reset record slips in between a check against
the tip and the append it guards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from reynd.daemon.committer import Committer
from reynd.daemon.coordinator import Gate
from reynd.protocol.events import Event, StepCommitted, boundary_kind
from reynd.workspace import Workspace

__all__ = ["Commit", "Writer", "records_files"]


class Commit(Protocol):
    """Append durably, the caller holding the write gate; the events with their seqs."""

    async def __call__(self, events: Sequence[Event], *, atomic: bool = False) -> list[Event]: ...


def records_files(event: Event) -> bool:
    """True for the records the workspace's changes go with: a step's commit, a boundary."""
    return isinstance(event, StepCommitted) or boundary_kind(event) is not None


class Writer:
    """Appends through the committer, with the workspace's changes when they are due."""

    def __init__(self, committer: Committer, gate: Gate, workspace: Workspace | None) -> None:
        self._committer = committer
        self._gate = gate
        self._workspace = workspace

    async def append(self, events: Sequence[Event], *, files: bool = True) -> list[Event]:
        """The runtime's path to the WAL (runtime/agent.py, Append): takes the write gate.

        `files=False`: without the workspace's changes, which stay pending for
        the next record (the end of a turn whose files could not be stored).
        """
        async with self._gate.shared():
            if not files:
                return await self._committer.append(events)
            return await self.commit(events)

    async def commit(self, events: Sequence[Event], *, atomic: bool = False) -> list[Event]:
        """Append `events` durably, the caller holding the write gate (a Commit).

        `atomic`: recovery keeps all of the batch or none, the workspace's
        file record included. Returns `events` with their seqs.
        """
        if self._workspace is not None and any(records_files(e) for e in events):
            return await self._workspace.record(self._committer, events, atomic=atomic)
        return await self._committer.append(events, atomic=atomic)

"""Extension points for the substrates that move with the runtime state.

The config generation store and the workspace blob store are tied to the
WAL at boundary seqs (a generation) and follow every rewind and checkout.
They plug in here instead of into the coordinator's code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from reynd.protocol.events import Event

__all__ = ["Substrate"]


class Substrate(Protocol):
    """Something that has a state per generation and is restored on reset.

    - `start(head)`: once at start-up, after storage recovery: bring the
      substrate in line with the tip (a crash may have hit between a reset
      record and the substrate's restore).
    - `before_reset(target, force, files)`: may refuse the reset (raise a
      ReyndError, e.g. WorkspaceDirty) before anything is written; the
      chains in flight are still running. `files`: the seq whose files the
      workspace takes (issue 25's scope): `target` by default, None when
      they stay as they are (only runtime), another seq when only the
      workspace is restored (the reset record then targets the tip itself).
    - `reset_records(target, files)`: the chains in flight are cancelled:
      records to append in the reset record's batch, just before it (the
      workspace's unrecorded changes; the reset record then supersedes the
      last of them), and right after it (a workspace-only restore's files).
    - `after_reset(target, reset_seq)`: restore the substrate as of `target`;
      runs after the reset record is durable and the runtime state rebuilt,
      while writes are still held.
    - `on_generation(seq)`: a boundary record at `seq` is durable: capture.
      Called in seq order, one at a time.
    """

    async def start(self, head: int) -> None: ...

    async def before_reset(self, target: int, force: bool, files: int | None) -> None: ...

    async def reset_records(
        self, target: int, files: int | None
    ) -> tuple[Sequence[Event], Sequence[Event]]: ...

    async def after_reset(self, target: int, reset_seq: int) -> None: ...

    async def on_generation(self, seq: int) -> None: ...

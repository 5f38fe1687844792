"""`reynd serve --follow URL`: a read-only replica that pulls what a primary ships.

Every `interval_s` the follower lists the prefix, plans the newest
generation's history as a restore would, and appends the records past its
own head to its local WAL byte for byte (same seqs, same timestamps),
through the committer like any write: readers and subscribers see them
exactly as on the primary. A reset record is applied with the state as of
its target rebuilt first, as the coordinator does. Nothing else writes: the
daemon refuses every writing method (read_only_replica) and runs no agent.

On the first pull, the record at the local head is compared with the
replica's: a directory that holds another history is not followed.
"""

from __future__ import annotations

import time
from typing import Final, Literal

import structlog
import trio

from reynd.daemon.committer import Committer
from reynd.protocol import methods as m
from reynd.protocol.events import Rewind
from reynd.replication import layout
from reynd.replication.config import ReplicateConfig
from reynd.replication.objects import Bucket, Location, Missing, Refused, Unavailable
from reynd.replication.restore import RestoreError, read_listing, records_of
from reynd.storage.errors import CorruptionError
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.recovery import decode_body
from reynd.storage.store import Store

__all__ = ["Follower"]

log = structlog.get_logger("reynd.follow")

_BACKOFF_MAX: Final = 30.0

State = Literal["starting", "following", "retrying", "diverged"]


class Follower:
    """Keeps a local store a copy of a replica prefix; owned by the App in follow mode."""

    def __init__(
        self, config: ReplicateConfig, location: Location, store: Store, committer: Committer
    ) -> None:
        self.config = config
        self.location = location
        self._store = store
        self._committer = committer
        self._bucket: Bucket | None = None
        self.state: State = "starting"
        self.generation: int | None = None
        self.remote_head = 0
        self.last_pulled_at: float | None = None
        self.last_error: str | None = None
        self._verified = store.head == 0

    async def run(self) -> None:
        """Pull every interval until cancelled; failures back off, a diverged copy stops."""
        delay = self.config.interval_s
        while self.state != "diverged":
            started = trio.current_time()
            try:
                await self._pull()
            except Missing:
                continue  # compacted since the listing: list again
            except (Unavailable, Refused, RestoreError, layout.GapError, CorruptionError) as exc:
                self.state, self.last_error = "retrying", str(exc)
                delay = min(max(delay * 2, 1.0), _BACKOFF_MAX)
                log.warning(
                    "follow.failed", url=str(self.location), error=str(exc), retry_in_s=delay
                )
                await trio.sleep(delay)
                continue
            delay = self.config.interval_s
            await trio.sleep_until(started + delay)

    async def _pull(self) -> None:
        if self._bucket is None:
            self._bucket = await trio.to_thread.run_sync(self._make_bucket)
        bucket = self._bucket
        listing = await trio.to_thread.run_sync(read_listing, bucket)
        plan = listing.plan()
        self.generation, self.remote_head = plan.generation, plan.head
        store = self._store
        if store.head and store.head < plan.floor - 1:
            raise RestoreError(
                f"{self.location} starts at seq {plan.floor}, past this copy's head "
                f"{store.head}: follow into an empty directory"
            )
        for piece in plan.wal:
            head = store.head
            if piece.hi < head or (piece.hi == head and self._verified):
                continue
            key = piece.obj.key
            data = await trio.to_thread.run_sync(bucket.get, key)
            records = records_of(data, key, piece.obj.first)
            if not self._verified and piece.lo <= head:
                if not await self._same_at_head(data, records):
                    return
                self._verified = True
            frames = [
                data[a:b] for seq, a, b in records if max(piece.lo, head + 1) <= seq <= piece.hi
            ]
            await self._apply(frames)
        self._verified = True
        self.state, self.last_error = "following", None
        self.last_pulled_at = time.time()

    def _make_bucket(self) -> Bucket:
        c = self.config
        return Bucket(self.location, endpoint=c.endpoint, region=c.region, timeout_s=c.timeout_s)

    async def _same_at_head(self, data: bytes, records: list[tuple[int, int, int]]) -> bool:
        head = self._store.head
        (theirs,) = [data[a:b] for seq, a, b in records if seq == head]
        (extent,) = self._store.wal.extents(head, head, 0)
        ours = await trio.to_thread.run_sync(extent.read)
        if ours == theirs:
            return True
        self.state = "diverged"
        self.last_error = (
            f"seq {head} here differs from seq {head} in {self.location}: this directory "
            "holds another history; follow into an empty directory"
        )
        log.critical("follow.diverged", url=str(self.location), error=self.last_error)
        return False

    async def _apply(self, frames: list[bytes]) -> None:
        """Append `frames` in order; each reset record alone, with its target's state rebuilt."""
        store = self._store
        run: list[bytes] = []
        for frame in frames:
            event = _event_of(frame, store)
            if not isinstance(event, Rewind):
                run.append(frame)
                continue
            if run:
                await self._committer.append_replicated(run, None)
                run = []
            rebuilt = await trio.to_thread.run_sync(store.rebuild, event.target_n)
            await self._committer.append_replicated([frame], rebuilt)
        if run:
            await self._committer.append_replicated(run, None)

    def info(self) -> m.FollowInfo:
        head = self._store.head
        return m.FollowInfo(
            url=str(self.location),
            state=self.state,
            generation=self.generation,
            remote_head=self.remote_head,
            lag_records=max(0, self.remote_head - head),
            last_pulled_at=self.last_pulled_at,
            last_error=self.last_error,
            interval_s=self.config.interval_s,
        )


def _event_of(frame: bytes, store: Store) -> object:
    try:
        body, _ = next_frame(frame, 0)
    except FrameInvalid:
        return None  # stage_replicated refuses it with its reason
    try:
        return decode_body(body, store.wal.dir, 0, None)
    except CorruptionError:
        return None  # stage_replicated refuses it with its reason

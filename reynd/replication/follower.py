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
from collections.abc import Callable
from typing import Final, Literal

import structlog
import trio

from reynd.protocol import methods as m
from reynd.protocol.events import Rewind
from reynd.replication import layout
from reynd.replication.config import ReplicateConfig
from reynd.replication.identity import (
    Identity,
    Progress,
    load_identity,
    save_identity,
    save_progress,
)
from reynd.replication.objects import Bucket, Location, Missing, Refused, Unavailable
from reynd.replication.restore import RestoreError, read_listing, records_of
from reynd.storage.appender import ReplicaAppender
from reynd.storage.errors import CorruptionError, StorageError
from reynd.storage.framing import FrameInvalid, next_frame
from reynd.storage.recovery import decode_body
from reynd.storage.store import Store

__all__ = ["Follower"]

log = structlog.get_logger("reynd.follow")

_BACKOFF_MAX: Final = 30.0
_MISSES: Final = 3  # objects vanishing after a listing: list again this many times at once

State = Literal["starting", "following", "retrying", "diverged", "gap"]


class Follower:
    """Keeps a local store a copy of a replica prefix; owned by the App in follow mode."""

    def __init__(
        self,
        config: ReplicateConfig,
        location: Location,
        store: Store,
        committer: ReplicaAppender,
        on_reset: Callable[[Rewind, bool], None],
    ) -> None:
        self.config = config
        self.location = location
        self._store = store
        self._committer = committer
        self._on_reset = on_reset  # (the reset record, whether its target was active)
        self._bucket: Bucket | None = None
        self.state: State = "starting"
        self.generation: int | None = None
        self.remote_head = 0
        self.last_pulled_at: float | None = None
        self.last_error: str | None = None
        self._verified_in: int | None = None  # the generation the head was last compared in
        self._misses = 0

    async def run(self) -> None:
        """Pull every interval until cancelled; failures back off, a diverged copy stops."""
        delay = self.config.interval_s
        while self.state != "diverged":
            started = trio.current_time()
            try:
                await self._pull()
            except Missing as exc:
                # Compacted or collected since the listing: list again at once, a few times.
                self._misses += 1
                if self._misses <= _MISSES:
                    continue
                self._failed(Unavailable(f"{exc} keeps vanishing after the listing"))
            except layout.GapError as exc:
                # Seqs a generation the newest one continues should hold are gone.
                self.state, self.last_error = "gap", f"{self.location}: {exc}"
            except (Unavailable, Refused, RestoreError, StorageError) as exc:
                self._failed(exc)
            else:
                self._misses = 0
                delay = self.config.interval_s
                await trio.sleep_until(started + delay)
                continue
            delay = min(max(delay * 2, 1.0), _BACKOFF_MAX)
            log.warning("follow.failed", url=str(self.location), error=self.last_error)
            await trio.sleep(delay)

    def _failed(self, exc: Exception) -> None:
        self.state, self.last_error = "retrying", str(exc)

    async def _pull(self) -> None:
        if self._bucket is None:
            self._bucket = await trio.to_thread.run_sync(self._make_bucket)
        bucket = self._bucket
        listing = await trio.to_thread.run_sync(read_listing, bucket)
        plan = listing.plan(allow_gap=True)  # up to a gap, which is reported below
        self.generation, self.remote_head = plan.generation, plan.shipped
        store = self._store
        if store.head < plan.floor - 1:
            raise RestoreError(
                f"{self.location} starts at seq {plan.floor}, past this copy's head "
                f"{store.head}: follow into an empty directory (it is restored first)"
            )
        if self._verified_in != plan.generation and not await self._same_history(plan):
            return
        for piece in plan.wal:
            head = store.head
            if piece.hi <= head:
                continue
            key = piece.obj.key
            data = await trio.to_thread.run_sync(bucket.get, key)
            records = records_of(data, key, piece.obj.first)
            frames = [
                data[a:b] for seq, a, b in records if max(piece.lo, head + 1) <= seq <= piece.hi
            ]
            await self._apply(frames)
        await trio.to_thread.run_sync(self._remember, plan.generation)
        self.last_pulled_at = time.time()
        if plan.gap is None:
            self.state, self.last_error = "following", None
            return
        missing = layout.gap_text(plan.gap, plan.generation, plan.shipped)
        error = (
            f"{self.location}: {missing}; this copy stops at seq {plan.gap[0] - 1} until "
            "they are back (or the primary ships a new generation)"
        )
        if self.state != "gap" or self.last_error != error:
            log.error("follow.gap", url=str(self.location), error=error)
        self.state, self.last_error = "gap", error

    def _make_bucket(self) -> Bucket:
        c = self.config
        return Bucket(self.location, endpoint=c.endpoint, region=c.region, timeout_s=c.timeout_s)

    async def _same_history(self, plan: layout.RestorePlan) -> bool:
        """Compare this copy with the replica where both have records; False: diverged.

        Each time the replica's newest generation changes (a restart, a
        takeover, a root generation after a repair): the record at this copy's
        head, or at the replica's end if this copy is longer (then this copy
        holds records the replica never had).
        """
        store = self._store
        point = min(store.head, plan.head)
        if point >= plan.floor:
            (piece,) = [p for p in plan.wal if p.lo <= point <= p.hi]
            assert self._bucket is not None
            data = await trio.to_thread.run_sync(self._bucket.get, piece.obj.key)
            theirs = [
                data[a:b]
                for seq, a, b in records_of(data, piece.obj.key, piece.obj.first)
                if seq == point
            ]
            (extent,) = store.wal.extents(point, point, 0)
            ours = await trio.to_thread.run_sync(extent.read)
            if theirs != [ours] or store.head > plan.head:
                self.state = "diverged"
                self.last_error = (
                    f"this directory holds another history than {self.location} "
                    f"(compared at seq {point}; here head {store.head}, there {plan.head}): "
                    "follow into an empty directory"
                )
                log.critical("follow.diverged", url=str(self.location), error=self.last_error)
                return False
        self._verified_in = plan.generation
        return True

    def _remember(self, generation: int) -> None:
        """What promoting this copy needs: the generation it holds, and how far (see Shipper)."""
        state_dir = self._store.root / "state"
        url = str(self.location)
        identity = load_identity(state_dir)
        if (identity.adopted_url, identity.adopted_generation) != (url, generation):
            save_identity(
                state_dir,
                Identity(
                    store_id=identity.store_id, adopted_url=url, adopted_generation=generation
                ),
            )
        save_progress(state_dir, Progress(url=url, generation=generation, shipped=self._store.head))

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
            active = store.lineage.is_active(event.target_n)
            (applied,) = await self._committer.append_replicated([frame], rebuilt)
            assert isinstance(applied, Rewind)
            self._on_reset(applied, active)
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

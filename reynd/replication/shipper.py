"""The daemon's shipper: durable WAL records and snapshots out to object storage.

At start it claims a new generation of the prefix (create-once, so two
daemons can never both hold one), continuing the previous one when that was
its own and its progress hint says how far it got, else shipping everything
from the floor. Then, every `interval_s`, it ships what became durable since
(the exact framed bytes of the segments, split at segment ends), the
snapshots written since, and once a segment is sealed it replaces that
segment's tail chunks by one whole-segment object.

Local durability never waits for it: appends are acknowledged after the
local fsync as always. A store that is down, slow or failing only grows the
backlog (in daemon.status and the log) until it answers again. Retention
keeps every segment holding an unshipped record (`keep_from`).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from functools import partial
from typing import Final, Literal

import msgspec
import structlog
import trio

from reynd.protocol import methods as m
from reynd.replication import layout
from reynd.replication.config import ReplicateConfig
from reynd.replication.identity import (
    Identity,
    Progress,
    load_identity,
    load_progress,
    save_progress,
)
from reynd.replication.objects import Bucket, Exists, Location, Refused, Unavailable
from reynd.replication.restore import read_claim, read_listing
from reynd.storage.errors import StorageError
from reynd.storage.retained import decode_retained
from reynd.storage.store import Store

__all__ = ["ReplicaRefused", "Shipper"]

log = structlog.get_logger("reynd.replicate")

CHUNK_MAX: Final = 16 * 1024 * 1024  # bytes of WAL per tail object
_BACKOFF_MAX: Final = 30.0
IDLE_CHECK_S: Final = 30.0  # an idle shipper still notices a newer claim this often
SNAPSHOT_SPACING_S: Final = 60.0  # the newest snapshot is shipped at most this often

State = Literal["starting", "shipping", "retrying", "superseded", "refused"]


class ReplicaRefused(Exception):
    """The prefix cannot be ours (another state directory writes it, bad credentials, no bucket)."""


class Shipper:
    """Ships one state directory's history to one prefix. Owned by the App."""

    def __init__(
        self,
        config: ReplicateConfig,
        location: Location,
        store: Store,
    ) -> None:
        self.config = config
        self.location = location
        self._store = store
        self._state_dir = store.root / "state"
        self._bucket: Bucket
        self._identity: Identity
        self.state: State = "starting"
        self.generation: int | None = None
        self._base = 0
        self.shipped = 0  # every seq up to this one is stored remotely
        self._root = False  # this generation ships from scratch (retained file, old snapshots)
        self._remote_floor = 0  # the floor of the retained file this generation shipped
        self._coarse: frozenset[int] = frozenset()  # local snapshots below it, when shipped
        self._chunks: list[layout.WalObject] = []  # this generation's tail objects
        self._snapshots: set[int] = set()
        self._snapshot_shipped_at = -math.inf
        self.last_error: str | None = None
        self.last_shipped_at: float | None = None
        self._wake = trio.Event()
        self._marker: str | None = None  # the last `shipped` marker written

    @property
    def keep_from(self) -> int | None:
        """The lowest seq retention must keep: the first one not known shipped.

        None once superseded: this daemon ships no more, so holding its
        history back would only fill the disk.
        """
        if self.state == "superseded":
            return None
        if self.generation is None:
            progress = self._progress()
            return progress.shipped + 1 if progress else 1
        return self.shipped + 1

    # -- start-up --------------------------------------------------------------------

    async def open(self) -> None:
        """Reach the store and claim a generation, or say why not.

        ReplicaRefused (the daemon does not start) when an operator must act:
        credentials, permissions, no bucket, the prefix is another state
        directory's. A store that does not answer is not a reason to stop:
        the claim is retried by `run`.
        """
        self._identity = await trio.to_thread.run_sync(load_identity, self._state_dir)
        try:
            c = self.config
            self._bucket = await trio.to_thread.run_sync(
                partial(
                    Bucket,
                    self.location,
                    endpoint=c.endpoint,
                    region=c.region,
                    timeout_s=c.timeout_s,
                )
            )
            await trio.to_thread.run_sync(self._bucket.check)
            await self._claim()
        except Refused as exc:
            raise ReplicaRefused(str(exc)) from None
        except Unavailable as exc:
            self._failed(exc)
            log.warning("replicate.unavailable_at_start", url=str(self.location), error=str(exc))

    def _progress(self) -> Progress | None:
        progress = load_progress(self._state_dir)
        if progress is None or progress.url != str(self.location):
            return None
        return progress

    async def _claim(self) -> None:
        store = self._store
        latest, claim = await trio.to_thread.run_sync(self._latest_claim)
        ours = claim is None or claim.store_id == self._identity.store_id
        adopted = (
            claim is not None
            and self._identity.adopted_url == str(self.location)
            and self._identity.adopted_generation == latest
        )
        if not ours and not adopted:
            assert claim is not None
            raise Refused(
                f"{self.location} is replicated by another state directory (store "
                f"{claim.store_id} on {claim.host}, pid {claim.pid}, generation "
                f"{claim.generation} since {_when(claim.created)}): point [replicate] url at "
                f"another prefix, or restore this one elsewhere with `reynd restore`"
            )
        progress = self._progress()
        continues: int | None = None
        base = store.floor
        if (
            latest is not None
            and progress is not None
            and progress.generation == latest
            and store.floor <= progress.shipped + 1 <= store.head + 1
        ):
            continues, base = latest, progress.shipped + 1
        generation = (latest or 0) + 1
        new = layout.Claim(
            generation=generation,
            store_id=self._identity.store_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            created=time.time(),
            base_seq=base,
            continues=continues,
        )
        try:
            await trio.to_thread.run_sync(
                self._bucket.put_new, layout.claim_key(generation), msgspec.json.encode(new)
            )
        except Exists:
            raise Refused(
                f"another daemon claimed generation {generation} of {self.location} at the "
                "same moment: two state directories must not replicate to one prefix"
            ) from None
        self.generation, self._base, self.shipped = generation, base, base - 1
        self._root = continues is None
        # At once: a restart before the first round must continue this
        # generation, not start a root one that hides it.
        await self._save_progress()
        self.state = "shipping"
        log.info(
            "replicate.claimed",
            url=str(self.location),
            generation=generation,
            base_seq=base,
            continues=continues,
        )

    def _latest_claim(self) -> tuple[int | None, layout.Claim | None]:
        gens = [
            g for k in self._bucket.list_keys(layout.CLAIMS) if (g := layout.parse_claim_key(k))
        ]
        if not gens:
            return None, None
        for latest in sorted(gens, reverse=True):
            claim = read_claim(self._bucket, latest)  # Refused if not one of ours
            if claim is not None:
                return latest, claim
        return None, None

    # -- the loop ----------------------------------------------------------------------

    def poke(self) -> None:
        """Something new is durable; the loop still ships at most every interval."""
        self._wake.set()

    async def run(self) -> None:
        """Ship every interval until cancelled; failures back off and never stop the daemon."""
        delay = self.config.interval_s
        while True:
            started = trio.current_time()
            try:
                going = await self._cycle()
            except (Unavailable, Refused) as exc:
                self._failed(exc)
                delay = min(max(delay * 2, 1.0), _BACKOFF_MAX)
                log.warning(
                    "replicate.failed",
                    url=str(self.location),
                    error=str(exc),
                    backlog_records=self._store.head - self.shipped,
                    retry_in_s=delay,
                )
                await trio.sleep(delay)
                continue
            delay = self.config.interval_s
            if not going:
                return
            # At most one cycle per interval; sleep until there is something new.
            await trio.sleep_until(started + self.config.interval_s)
            if self._store.head == self.shipped:
                # Idle: look for a newer claim now and then all the same.
                with trio.move_on_after(IDLE_CHECK_S):
                    await self._wake.wait()
            self._wake = trio.Event()

    def _failed(self, exc: Exception) -> None:
        self.state = "refused" if isinstance(exc, Refused) else "retrying"
        self.last_error = str(exc)

    async def _cycle(self) -> bool:
        """One round of shipping; False once another daemon claimed a newer generation."""
        if self.generation is None:
            await self._claim()
        assert self.generation is not None
        bucket = self._bucket
        if await trio.to_thread.run_sync(bucket.exists, layout.claim_key(self.generation + 1)):
            self.state = "superseded"
            self.last_error = (
                f"generation {self.generation + 1} of {self.location} was claimed by another "
                "daemon: this one no longer ships (restart it pointed at another prefix)"
            )
            log.critical("replicate.superseded", url=str(self.location), error=self.last_error)
            return False
        store = self._store
        head = store.head
        if head > self.shipped:
            for extent in store.wal.extents(self.shipped + 1, head, CHUNK_MAX):
                data = await trio.to_thread.run_sync(extent.read)
                obj = layout.WalObject(self.generation, extent.first, extent.last)
                await self._put(obj.key, data)
                self._chunks.append(obj)
                self.shipped = extent.last
                await self._save_progress()
            await self._mark_shipped()
            self.last_shipped_at = time.time()
        self.state, self.last_error = "shipping", None
        # The WAL is shipped: what follows only makes restores faster or the
        # prefix smaller, and its failures never hold the WAL back.
        try:
            coarse = frozenset(x for x in store.snapshots.seqs if x < store.floor)
            if store.floor > self._remote_floor or coarse != self._coarse:
                await self._follow_retention()
            await self._ship_snapshots()
            await self._compact()
        except (Unavailable, Refused, StorageError) as exc:
            self.last_error = f"snapshots or remote retention (retried next round): {exc}"
            log.warning("replicate.upkeep_failed", url=str(self.location), error=str(exc))
        return True

    async def _mark_shipped(self) -> None:
        """Say in the prefix how far it was shipped (after the objects it covers).

        A restore or a follower then knows what a gap is, even when the newest
        objects are the ones gone. The one before is deleted (the newest wins
        anyway: a crash in between only leaves one more empty object).
        """
        assert self.generation is not None
        key = layout.shipped_key(self.generation, self.shipped)
        await self._put(key, b"")
        if self._marker is not None and self._marker != key:
            with contextlib.suppress(Unavailable):
                await trio.to_thread.run_sync(self._bucket.delete, [self._marker])
        self._marker = key

    async def _save_progress(self) -> None:
        assert self.generation is not None
        progress = Progress(
            url=str(self.location), generation=self.generation, shipped=self.shipped
        )
        await trio.to_thread.run_sync(save_progress, self._state_dir, progress)

    async def flush(self, timeout_s: float) -> None:
        """At a clean stop: one last round, so a planned move loses nothing acknowledged."""
        if self.state in ("superseded", "refused") or self.generation is None:
            return
        with trio.move_on_after(timeout_s) as scope:
            try:
                await self._cycle()
            except (Unavailable, Refused) as exc:
                self._failed(exc)
        left = self._store.head - self.shipped
        if scope.cancelled_caught or left:
            log.warning("replicate.unshipped_at_stop", url=str(self.location), records=left)
        else:
            log.info("replicate.flushed", url=str(self.location), shipped=self.shipped)

    async def _put(self, key: str, data: bytes) -> None:
        # Only this generation's holder writes under it, and its objects are
        # determined by their name: Exists means an earlier attempt that timed out landed.
        with contextlib.suppress(Exists):
            await trio.to_thread.run_sync(self._bucket.put_new, key, data)

    async def _ship_snapshots(self) -> None:
        """The snapshots a restore needs: few, as the WAL above them is shipped anyway.

        A root generation first ships every snapshot below its base (the WAL
        there was collected: they are the only way in). Above it, only the
        newest snapshot, at most every SNAPSHOT_SPACING_S: it bounds what a
        restore replays without shipping every snapshot a busy daemon cuts.
        """
        assert self.generation is not None
        seqs = [
            s
            for s in self._store.snapshots.seqs
            if s <= self.shipped and s not in self._snapshots and (self._root or s >= self._base)
        ]
        wanted = [s for s in seqs if s < self._base]
        newer = [s for s in seqs if s >= self._base]
        now = trio.current_time()
        if newer and now - self._snapshot_shipped_at >= SNAPSHOT_SPACING_S:
            wanted.append(newer[-1])
        for seq in wanted:
            try:
                data = await trio.to_thread.run_sync(self._store.snapshots.path(seq).read_bytes)
            except FileNotFoundError:
                continue  # collected meanwhile
            await self._put(layout.snapshot_key(self.generation, seq), data)
            self._snapshots.add(seq)
            if seq >= self._base:
                self._snapshot_shipped_at = now

    async def _follow_retention(self) -> None:
        """Mirror local retention: what it dropped here goes from the prefix too.

        In an order a crash may stop anywhere: the snapshots below the floor
        (the entry into what is kept), then the retained file named by its
        floor (restores start there from now on), and only then the deletion
        of WAL objects wholly below it, of older retained files, and of the
        snapshots below it that retention dropped here.
        """
        assert self.generation is not None
        store, bucket = self._store, self._bucket
        try:
            retained = await trio.to_thread.run_sync((self._state_dir / "retained").read_bytes)
        except FileNotFoundError:
            retained = b""
        # The floor from the very bytes shipped: a collection may rewrite the file meanwhile.
        floor = decode_retained(retained, self._state_dir).floor if retained else 1
        local = set(store.snapshots.seqs)
        if floor == 1:
            self._coarse, self._remote_floor = frozenset(), 1
            return
        if floor - 1 not in local:
            return  # a collection is between its retained file and its entry snapshot
        self._coarse = frozenset(x for x in local if x < floor)
        for seq in sorted(s for s in local if s < floor and s not in self._snapshots):
            try:
                data = await trio.to_thread.run_sync(store.snapshots.path(seq).read_bytes)
            except FileNotFoundError:
                continue  # a coarse snapshot retention dropped meanwhile
            await self._put(layout.snapshot_key(self.generation, seq), data)
            self._snapshots.add(seq)
        await self._put(layout.retained_key(self.generation, floor), retained)
        listing = await trio.to_thread.run_sync(read_listing, bucket)
        chain = _chain(listing.claims, self.generation)
        doomed = [o.key for o in listing.wal if o.generation in chain and o.last < floor]
        doomed += [
            layout.retained_key(g, f) for g, f in listing.retained if g in chain and f < floor
        ]
        doomed += [
            layout.snapshot_key(g, seq)
            for g, seq in listing.snapshots
            if g in chain and seq < floor and seq not in local
        ]
        await trio.to_thread.run_sync(bucket.delete, doomed)
        self._chunks = [c for c in self._chunks if c.last >= floor]
        self._remote_floor = floor
        if doomed:
            log.info(
                "replicate.collected", url=str(self.location), floor=floor, objects=len(doomed)
            )

    async def _compact(self) -> None:
        """One object per sealed segment instead of its tail chunks (fewer objects to restore)."""
        assert self.generation is not None
        segments = self._store.wal.segments[:-1]  # the last one is still written
        for seg in segments:
            if seg.first_seq < self._base or seg.last_seq > self.shipped:
                continue
            inside = [c for c in self._chunks if seg.first_seq <= c.first <= seg.last_seq]
            if len(inside) < 2:
                continue
            whole = layout.WalObject(self.generation, seg.first_seq, seg.last_seq)
            try:
                data = await trio.to_thread.run_sync(seg.path.read_bytes)
            except FileNotFoundError:
                continue
            if len(data) < seg.size:
                continue  # not what the index says: leave the chunks
            await self._put(whole.key, data[: seg.size])
            await trio.to_thread.run_sync(self._bucket.delete, [c.key for c in inside])
            self._chunks = [c for c in self._chunks if c not in inside]

    # -- status --------------------------------------------------------------------------

    def info(self) -> m.ReplicationInfo:
        store = self._store
        backlog = max(0, store.head - self.shipped)
        lo = max(self.shipped + 1, store.floor)
        return m.ReplicationInfo(
            url=str(self.location),
            state=self.state,
            generation=self.generation,
            shipped=self.shipped,
            floor=self._remote_floor,
            backlog_records=backlog,
            backlog_bytes=store.wal.bytes_between(lo, store.head) if backlog else 0,
            last_shipped_at=self.last_shipped_at,
            last_error=self.last_error,
            interval_s=self.config.interval_s,
        )


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if math.isfinite(ts) else "?"


def _chain(claims: dict[int, layout.Claim], newest: int) -> set[int]:
    """The generations a restore of `newest` reads."""
    out: set[int] = set()
    gen: int | None = newest
    while gen is not None and gen in claims and gen not in out:
        out.add(gen)
        gen = claims[gen].continues
    return out

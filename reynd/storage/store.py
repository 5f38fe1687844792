"""The storage core: WAL + snapshots + lineage + catalog, for one state directory.

Plain synchronous code with no event loop. Every append takes one sequence
of steps (batch.py: stage, write, sync, commit): the daemon's group commit
stages on the loop and runs each batch's sync in the kernel or on a worker
thread; tests and tools call the one-shot methods (`append`, `rewind`,
`checkout`) that take every step in a row.

Layout under the state directory (`.reyn/`, all of it in docs/format.md):

    state/LOCK                one daemon at a time (flock)
    state/wal/*.jsonl         the log (wal.py)
    state/snapshots/*.snap    full snapshots (snapshots.py)
    state/retained            what retention dropped: floor, reset records (retained.py)
    state/wal/extent          the log's acknowledged extent: segments, watermark (extent.py)
    state/index/*.idx         what a scan of each segment rebuilds, written down
                              (segindex.py, indexfiles.py): start-up reads it instead

Directories 0700, files 0600, whatever the umask (fsutil); an existing root
with wider permissions is narrowed to owner-only on open.
"""

from __future__ import annotations

import contextlib
import logging
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import msgspec

from reynd.core.catalog import Catalog, Entry
from reynd.core.lineage import Lineage
from reynd.core.reconstruct import ReplayPlan, plan_reconstruct
from reynd.core.reduce import apply, fork
from reynd.core.seqs import SeqList
from reynd.core.tags import Tags
from reynd.core.timeline import Timeline
from reynd.protocol import errors
from reynd.protocol.events import Event, GenerationKind, Rewind, boundary_kind, kind_of
from reynd.protocol.limits import MAX_DEPTH, nesting_exceeds
from reynd.protocol.state import RuntimeState
from reynd.storage import crashpoints
from reynd.storage.batch import Batch, Rebuilt, Staged
from reynd.storage.damage import clear_mark, read_mark
from reynd.storage.errors import CorruptionError
from reynd.storage.extent import ExtentLost, LogExtent, Loss, find_loss, gather
from reynd.storage.framing import FrameInvalid, encode_frame, next_frame
from reynd.storage.fsutil import fsync_dir, make_dirs, restrict_dir
from reynd.storage.indexfiles import INDEX_DIR, IndexFiles
from reynd.storage.lock import hold_lock
from reynd.storage.options import StorageOptions
from reynd.storage.rebuild import Rebuild, index_event
from reynd.storage.recovery import RecoveryReport, decode_body
from reynd.storage.retained import Retained, load_retained
from reynd.storage.segindex import Chunk
from reynd.storage.snapshots import SnapshotStore, pack_state
from reynd.storage.wal import Placement, Wal

__all__ = [
    "NO_NOTE",
    "AcceptLoss",
    "PendingIndex",
    "Reset",
    "ResetMode",
    "ResetNote",
    "ResetOp",
    "Store",
]

log = logging.getLogger(__name__)

ResetMode = Literal["undo", "fork_switch"]
# The operation that writes a reset record (its `mode`): only a checkout may
# switch to an abandoned branch.
ResetOp = Literal["rewind", "checkout", "act_turn"]

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class AcceptLoss:
    """An operator's decision (`reynd repair`) to open a log that lacks acknowledged seqs.

    The loss is recorded in the extent file, through at least `through`,
    before the store opens; the caller then fills it with `lost` records.
    """

    reason: str
    through: int = 0  # the loss reaches at least this seq (what the caller saw)
    through_why: str = ""  # what shows `through` was issued


@dataclass(frozen=True, slots=True)
class Reset:
    """A move of the tip to `target` by `op`, validated (`Store.prepare_reset`); nothing written.

    `mode`: "undo" when `target` is active, "fork_switch" when a checkout
    switches to an abandoned branch.
    """

    target: int
    op: ResetOp
    agent: str | None
    mode: ResetMode


@dataclass(frozen=True, slots=True)
class ResetNote:
    """What a reset record says besides its move: why, who, what it cancelled (issue 24)."""

    reason: str = ""
    uid: int | None = None
    pid: int | None = None
    client: str = ""
    cancelled: tuple[tuple[str, str], ...] = ()


NO_NOTE: Final = ResetNote()


@dataclass(frozen=True, slots=True)
class PendingIndex:
    """Index chunks captured from the in-memory indexes, to be written (`Store.write_index`)."""

    chunks: tuple[tuple[Path, Chunk], ...]  # (segment, chunk)

    @property
    def records(self) -> int:
        return sum(len(chunk.offsets) for _, chunk in self.chunks)


class Store:
    """Everything durable about agent runs in one state directory."""

    def __init__(
        self, root: Path, options: StorageOptions, clock: Callable[[], float] | None = None
    ) -> None:
        self.root = root
        # The time stamped on each record (`ts`); tests pass a fixed one so
        # that record sizes, and with them segment and snapshot cuts, repeat.
        self._clock = clock
        self.options = options
        self.lineage = Lineage()
        self.catalog = Catalog()
        self.file_ops = SeqList()  # seqs of workspace.files records (workspace rewind)
        self.timeline = Timeline()  # checkpoints and reset records by time
        self.tags = Tags()  # names for seqs (issue 24): operator metadata, never rewound
        self.state = RuntimeState()
        self.recovery = RecoveryReport()
        self.wal: Wal
        self.snapshots: SnapshotStore
        self._next_seq = 1
        self._exit = contextlib.ExitStack()
        # Bytes of WAL on the active lineage above the nearest snapshot: what a
        # restart would replay. Drives when the next snapshot is cut.
        self._since_snapshot = 0
        self._snapshot_base = 0
        # After a state that could not be encoded: no new try before this distance.
        self._snapshot_retry_at = 0.0
        # Bytes of WAL (any branch) that no index chunk describes yet: what a
        # restart would scan record by record. Drives when the index is written.
        self._unindexed = 0
        self.retained = Retained()
        self.index: IndexFiles
        self.accepted: Loss | None = None  # the loss an AcceptLoss open recorded

    # -- open / close ----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: Path,
        options: StorageOptions | None = None,
        *,
        clock: Callable[[], float] | None = None,
        accept_loss: AcceptLoss | None = None,
    ) -> Store:
        """Lock, recover (cut a torn tail, verify every record) and rebuild the tip's state.

        A log that holds less than the state directory proves was acknowledged
        (extent.py) raises ExtentLost, unless `accept_loss` (reynd repair).

        The records a segment index describes are taken from it instead of
        being decoded one by one (indexfiles.py); every later record is
        verified. Crash recovery is reconstruct(head) along the active
        lineage: after a reset record is durable, the abandoned future never
        comes back.
        """
        store = cls(root, options or StorageOptions(), clock)
        try:
            store._open(accept_loss)
        except BaseException:
            store._exit.close()
            raise
        return store

    def _open(self, accept_loss: AcceptLoss | None = None) -> None:
        created = not self.root.exists()
        if not created:
            self._restrict_root()
        state_dir = self.root / "state"
        state_created = make_dirs(state_dir)
        # Each new directory's entry lives in its parent: sync both levels.
        if state_created:
            fsync_dir(self.root)
        if created:
            fsync_dir(self.root.parent)
        self._exit.enter_context(hold_lock(self.root))
        self.snapshots = SnapshotStore.open(state_dir / "snapshots")

        self.retained = load_retained(state_dir)

        rebuild = Rebuild(self.retained, state_dir / "wal")
        self.index = IndexFiles(state_dir / INDEX_DIR)
        damage = read_mark(state_dir)
        if damage is not None:
            # A running daemon found a corrupt record the indexes had vouched
            # for: trust none, verify every record (raises if it is still there).
            log.warning("a previous run found damage, every record is verified: %s", damage)
            self.index.drop_all()
        # Before the WAL opens: it removes the index of a segment that is gone.
        evidence = gather(state_dir)
        self.wal, self.recovery = Wal.open(
            state_dir / "wal",
            self.options.segment_bytes,
            rebuild.record,
            index=self.index,
            on_chunk=rebuild.chunk if damage is None else None,
        )
        self._exit.callback(self.wal.close)
        rebuild.check_end(self.wal.head)
        self._check_extent(find_loss(self.wal.head, evidence), evidence.extent, accept_loss)
        if damage is not None:
            clear_mark(state_dir)
            log.warning("every record verified, none damaged: the damage mark is removed")
        self.lineage, self.catalog = rebuild.lineage, rebuild.catalog
        self.file_ops = rebuild.file_ops
        self.tags = rebuild.tags
        self._unindexed = sum(
            s.size - (s.offsets[s.indexed] if s.indexed < len(s.offsets) else s.size)
            for s in self.wal.segments
        )
        self._next_seq = self.wal.head + 1
        self.timeline = self._build_timeline()
        self.forget_below_floor()
        for seq in [s for s in self.snapshots.seqs if s > self.wal.head]:
            # Only possible when a torn tail was cut: a snapshot is written after
            # the records it covers are durable, but a later crash can still
            # have lost nothing else. Keep it aside rather than trust it.
            self.snapshots.discard(seq, f"covers seq {seq}, beyond the log's head")
        plan, self.state = self._reconstruct_with_fallback(self.wal.head)
        self._since_snapshot = self._replay_bytes(plan)
        self._snapshot_base = plan.snapshot

    def _check_extent(
        self, loss: Loss | None, extent: LogExtent | None, accept: AcceptLoss | None
    ) -> None:
        """Refuse a log short of its proven extent, or record the loss the operator accepts."""
        on_disk = extent is not None
        required = False  # the file must record this open's decision (an accepted loss)
        extent = extent or LogExtent()
        if accept is not None and (loss is not None or accept.through > self.wal.head):
            head = self.wal.head
            first = loss.first if loss is not None else head + 1
            last = max(loss.last if loss is not None else head, accept.through)
            why = loss.why if loss is not None and loss.last >= accept.through else ""
            loss = Loss(head, first, last, loss.missing if loss else (), why or accept.through_why)
            extent = LogExtent(
                segments=extent.segments,
                issued=max(extent.issued, last),  # durable before the first lost record is
                lost=[*extent.lost, (first, last, accept.reason)],
            )
            on_disk, required = False, True
            self.accepted = loss
        elif loss is not None:
            raise ExtentLost(loss, self.root)
        self.wal.track_extent(extent, on_disk=on_disk, required=required)

    def _restrict_root(self) -> None:
        # Made by an older reynd, or by hand, under the umask: 0700 here is
        # what keeps every file below private, whatever its own mode.
        try:
            old = restrict_dir(self.root)
        except OSError as exc:
            log.warning("cannot make the state directory %s private: %s", self.root, exc)
            return
        if old is not None:
            log.warning(
                "state directory %s was mode %04o: now %04o (owner only)",
                self.root,
                old,
                old & ~0o077,
            )

    def close(self, *, record_head: bool = False) -> None:
        """Sync and close the log, release the lock.

        `record_head`: a clean stop (nothing in flight): the extent file records
        the head, so that a later loss of the newest segment names every seq.
        """
        if record_head:
            self.wal.record_head()
        self._exit.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build_timeline(self) -> Timeline:
        """The time index from what opening loaded: the catalog's times, and one read
        of each reset record at or above the floor (the segment index keeps no
        times; those below the floor cannot be reached anyway)."""
        floor = self.floor
        resets = [(r, t) for r, t in self.lineage.resets if r >= floor]
        times = [next(iter(self.wal.read(r, r))).ts for r, _ in resets]
        seqs, gen_times = self.catalog.times()
        return Timeline.build(
            seqs, gen_times, [(r, t, ts) for (r, t), ts in zip(resets, times, strict=True)]
        )

    def forget_below_floor(self) -> None:
        """Drop the index entries of records below the floor (collected, or about to be)."""
        self.catalog.drop_below(self.floor)
        self.file_ops.drop_below(self.floor)
        self.timeline.drop_below(self.floor)

    # -- properties -----------------------------------------------------------------

    @property
    def head(self) -> int:
        """The tip: the highest durable seq."""
        return self.lineage.head

    @property
    def next_seq(self) -> int:
        """The seq the next staged record gets (head + 1 when nothing is in flight)."""
        return self._next_seq

    @property
    def floor(self) -> int:
        """The lowest seq that can be read, rewound to or checked out (coarse points aside).

        The retained file's floor once a collection got that far: a crash
        part-way through the deletions leaves older segments whose seqs may no
        longer rebuild (their entry snapshots were never written); they are
        below the floor and the next collection deletes them.
        """
        return max(self.wal.first_seq, self.retained.floor)

    # -- appending -----------------------------------------------------------------

    def stage(
        self, events: Sequence[Event], rebuilt: Rebuilt | None = None, *, atomic: bool = False
    ) -> Staged:
        """Assign seqs and timestamps and encode; nothing is visible or durable yet.

        `rebuilt` is the state a reset record among `events` leads to (see
        `rebuild`); without it, `commit` rebuilds that state itself. `atomic`:
        the events form one batch that recovery keeps whole or drops whole
        (each record says how many of the batch follow it, `more`). Raises
        LimitExceeded, with nothing staged and no seq used, for a record that
        nests deeper than MAX_DEPTH: once acknowledged, a record must stay
        readable by every component, at every start.
        """
        now = time.time() if self._clock is None else self._clock()
        out: list[Event] = []
        frames: list[tuple[int, bytes]] = []
        last = self._next_seq + len(events) - 1
        for seq, event in enumerate(events, start=self._next_seq):
            more = last - seq if atomic else 0
            stamped = msgspec.structs.replace(event, seq=seq, ts=now, more=more)
            record = _encoder.encode(stamped)
            if nesting_exceeds(record):
                raise errors.LimitExceeded(
                    f"a {kind_of(stamped)!r} record would nest more than {MAX_DEPTH} levels deep",
                    {"limit_name": "max_depth", "limit": MAX_DEPTH},
                )
            out.append(stamped)
            frames.append((seq, encode_frame(record)))
        self._next_seq += len(out)
        return Staged(tuple(out), tuple(frames), rebuilt)

    def stage_replicated(self, frames: Sequence[bytes], rebuilt: Rebuilt | None = None) -> Staged:
        """Stage records another daemon wrote, exactly as framed (same seq, same ts).

        A follower's path: each frame must hold one intact record whose seq is
        the next one; CorruptionError otherwise, with nothing staged.
        """
        out: list[Event] = []
        staged: list[tuple[int, bytes]] = []
        seq = self._next_seq
        for frame in frames:
            try:
                body, end = next_frame(frame, 0)
            except FrameInvalid as exc:
                raise CorruptionError(self.wal.dir, 0, seq, f"replicated record: {exc}") from None
            event = decode_body(body, self.wal.dir, 0, seq)
            if end != len(frame) or event.seq != seq:
                raise CorruptionError(
                    self.wal.dir, 0, seq, f"replicated record holds seq {event.seq}, not {seq}"
                )
            out.append(event)
            staged.append((seq, frame))
            seq += 1
        self._next_seq = seq
        return Staged(tuple(out), tuple(staged), rebuilt)

    def commit(self, staged: Staged, placements: list[Placement]) -> None:
        """Make a durable batch visible: index it and apply it to the tip's state.

        A reset record moves the head and swaps in the state as of its target
        in one step: no reader ever sees the new head with the old state.
        """
        self.wal.publish(placements, staged.events[0].ts if staged.events else 0.0)
        for event, (_, frame) in zip(staged.events, staged.frames, strict=True):
            self._index(event)
            self._unindexed += len(frame)
            if isinstance(event, Rewind):
                self._become(event, staged.rebuilt)
            else:
                apply(self.state, event)
                self._since_snapshot += len(frame)

    def batch(self, staged: list[Staged]) -> Batch:
        """Staged appends to write, sync and commit together, in seq order (batch.py)."""
        return Batch(self.wal, self.commit, staged)

    def append(
        self, events: Sequence[Event], rebuilt: Rebuilt | None = None, *, atomic: bool = False
    ) -> list[Event]:
        """Append durably (returns after fsync) and apply: the one-shot path (see `stage`)."""
        batch = self.batch([self.stage(events, rebuilt, atomic=atomic)])
        batch.write_and_sync()
        return batch.commit()

    def _index(self, event: Event) -> None:
        index_event(self.lineage, self.catalog, self.file_ops, event, self.tags)
        if isinstance(event, Rewind):
            self.timeline.add(event.seq, event.ts, event.target_n)
        elif boundary_kind(event) is not None:
            self.timeline.add(event.seq, event.ts)

    # -- rewind / checkout ---------------------------------------------------------------

    def prepare_reset(self, target: int, op: ResetOp = "rewind", agent: str | None = None) -> Reset:
        """Validate a move of the tip to `target` by `op`; nothing is written.

        Raises SeqOutOfRange, NothingToDo, BelowFloor, or NotActive for an
        abandoned `target` unless `op` is a checkout (a rewind says: use checkout).
        """
        head = self.head
        if not 0 <= target <= head:
            raise errors.SeqOutOfRange(
                f"seq {target} is outside 0..{head} (the tip)", {"seq": target, "head": head}
            )
        if target == head:
            raise errors.NothingToDo(f"seq {target} is already the tip", {"seq": target})
        # Below the retention floor first: `use checkout` would be no help there.
        self.plan(target)
        active = self.lineage.is_active(target)
        if op != "checkout" and not active:
            raise errors.NotActive(
                f"seq {target} is not on the active branch (it was abandoned by a rewind); "
                f"use `checkout {target}` to switch to its branch",
                {"seq": target, "branch": self.lineage.branch_of(target)},
            )
        return Reset(target, op, agent, "undo" if active else "fork_switch")

    def reset_batch(
        self, reset: Reset, before: Sequence[Event] = (), note: ResetNote = NO_NOTE
    ) -> list[Event]:
        """`before`, then the reset record, complete: to be staged at once, as one append.

        The record supersedes the seq just before it, so `before` (what the
        substrates record first) stays on the branch the reset leaves. That
        seq is counted from the next one to stage: no checkpoint may come
        between this call and the staging (the coordinator holds the write
        gate alone besides).
        """
        record = Rewind(
            target_n=reset.target,
            supersedes=self._next_seq + len(before) - 1,
            mode=reset.op,
            agent=reset.agent,
            reason=note.reason,
            uid=note.uid,
            pid=note.pid,
            client=note.client,
            cancelled=note.cancelled,
        )
        return [*before, record]

    def rebuild(self, target: int) -> Rebuilt:
        """The state as of `target`, for the reset record that will make it the tip's.

        Built before that record is written (it only reads files, so it may
        run on a worker thread): history up to `target` never changes, and
        `commit` can then move the head and the state at once.
        """
        plan, state = self._reconstruct_with_fallback(target)
        return Rebuilt(target, plan, state)

    def _become(self, reset: Rewind, rebuilt: Rebuilt | None) -> None:
        """Make the state as of the durable reset record's target the tip's."""
        crashpoints.hit("reset.durable")
        if rebuilt is None or rebuilt.target != reset.target_n:
            rebuilt = self.rebuild(reset.target_n)
        state = rebuilt.state
        state.seq = reset.seq
        self.state = state
        self._since_snapshot = self._replay_bytes(rebuilt.plan)
        self._snapshot_base = rebuilt.plan.snapshot
        self._snapshot_retry_at = 0.0  # another state: it may encode

    def rewind(self, target: int) -> Rewind:
        """Undo to an active seq below the tip (one-shot path)."""
        return self._reset(self.prepare_reset(target))

    def checkout(self, target: int) -> tuple[ResetMode, Rewind]:
        """Undo (active target) or fork-switch (abandoned target) (one-shot path)."""
        reset = self.prepare_reset(target, "checkout")
        return reset.mode, self._reset(reset)

    def _reset(self, reset: Reset) -> Rewind:
        rebuilt = self.rebuild(reset.target)
        (durable,) = self.append(self.reset_batch(reset), rebuilt)
        assert isinstance(durable, Rewind)
        return durable

    # -- reconstruct ---------------------------------------------------------------------

    def plan(self, target: int) -> ReplayPlan:
        """The pure plan for state_as_of(target)."""
        return plan_reconstruct(self.lineage, target, self.snapshots.seqs, self.floor)

    def execute(
        self,
        plan: ReplayPlan,
        base: RuntimeState | None = None,
        passing: Callable[[RuntimeState], None] | None = None,
    ) -> RuntimeState:
        """Carry out a plan; only reads files, so it may run on a worker thread.

        `base`: the state as of `plan.snapshot` already at hand (a decoded snapshot or
        one kept in memory, reynd/daemon/as_of.py): the plan replays onto a fork of
        it, which leaves `base` as it was. `passing`, if given, sees the state as of
        each seq replayed (after its record), and must not change it.
        """
        if base is not None:
            state = fork(base)
        else:
            state = self.snapshots.load(plan.snapshot) if plan.snapshot else RuntimeState()
        for lo, hi in plan.ranges:
            for event in self.wal.read(lo, hi):
                apply(state, event)
                if passing is not None:
                    passing(state)
        state.seq = plan.target
        return state

    def state_as_of(self, target: int) -> RuntimeState:
        """The state as of any retained seq, active or abandoned; the tip does not move."""
        return self._reconstruct_with_fallback(target)[1]

    def _reconstruct_with_fallback(self, target: int) -> tuple[ReplayPlan, RuntimeState]:
        plan = self.plan(target)
        while True:
            try:
                return plan, self.execute(plan)
            except CorruptionError as exc:
                plan = self.fallback_plan(plan, exc)

    def fallback_plan(self, plan: ReplayPlan, exc: CorruptionError) -> ReplayPlan:
        """The plan to try once `execute(plan)` raised `exc`; `exc` itself when no other helps.

        A damaged snapshot of the plan is set aside and the target planned again
        from an older one (docs/durability.md rule 9); damage anywhere else (a
        record) is raised. Every reconstruct's caller loops on this, where
        `execute` runs (the daemon runs a costly one on a worker thread).
        """
        if plan.snapshot == 0 or exc.path != self.snapshots.path(plan.snapshot):
            raise exc
        self.snapshots.discard(plan.snapshot, exc.reason)
        return self.plan(plan.target)

    def _replay_bytes(self, plan: ReplayPlan) -> int:
        return sum(self.wal.bytes_between(lo, hi) for lo, hi in plan.ranges)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_due(self) -> bool:
        """True once a restart would replay more WAL than the policy allows."""
        return self._since_snapshot >= max(self._snapshot_limit(), self._snapshot_retry_at)

    def _snapshot_limit(self) -> float:
        # Counted from the state's msgpack, not the compressed file: counted from
        # the file, snapshots came two to three times as often, and GC's floor
        # with them (a backup under load restarted on every move). The base was
        # written or loaded here (the rebuild loads it), so it is known.
        known = self.snapshots.packed
        base = known.get(self._snapshot_base) or self.snapshots.sizes.get(self._snapshot_base, 0)
        return max(self.options.snapshot_min_bytes, self.options.snapshot_ratio * base)

    def snapshot_failed(self) -> None:
        """The tip's state raised UnencodableState: try again once the distance doubled.

        It stays unencodable until a record replaces the value or a reset
        leaves it behind. Each try encodes the whole state and logs, so tries
        grow apart: a logarithmic number of them, however long that lasts.
        """
        since = self._since_snapshot
        self._snapshot_retry_at = max(2.0 * since, since + self._snapshot_limit())

    def pack_snapshot(self) -> tuple[int, bytes, int]:
        """The tip's state as msgpack now: (seq, bytes for `snapshots.publish`, replay bytes it
        will cover). Sealing (compressing) is left to a worker thread."""
        return self.state.seq, pack_state(self.state), self._since_snapshot

    def snapshot_written(self, seq: int, size: int, covered: int, packed: int) -> None:
        """Index a snapshot written by `snapshots.write` (owner thread); `packed`
        is the length of its state's msgpack."""
        self.snapshots.add(seq, size, packed)
        if self.lineage.on_lineage(seq, self.head):
            self._since_snapshot = max(0, self._since_snapshot - covered)
            self._snapshot_base = seq
            self._snapshot_retry_at = 0.0

    def snapshot_now(self) -> int:
        """Write a snapshot of the tip's state, then the index, synchronously; returns its seq."""
        seq, packed, covered = self.pack_snapshot()
        size = self.snapshots.publish(seq, packed)
        self.snapshot_written(seq, size, covered, len(packed))
        self.index_now()
        return seq

    # -- the segment index ---------------------------------------------------------------

    def index_due(self) -> bool:
        """True once a restart would scan more WAL than the snapshot policy lets it replay."""
        return self._unindexed >= self._snapshot_limit()

    def capture_index(self) -> PendingIndex:
        """Chunks for every durable record no index chunk describes yet (owner thread).

        Copies of the in-memory indexes: `write_index` may then run on any thread.
        """
        out: list[tuple[Path, Chunk]] = []
        for seg in self.wal.segments:
            n = len(seg.offsets)
            if seg.indexed >= n:
                continue
            lo, hi = seg.first_seq + seg.indexed, seg.last_seq
            chunk = Chunk(
                lo,
                seg.offsets[seg.indexed : n],
                seg.size,
                0,  # the checksum is read back from the segment when written
                seg.last_ts,
                tuple(self.lineage.resets_between(lo, hi)),
                self.catalog.columns(lo, hi),
                array("Q", self.file_ops.between(lo, hi)),
                tuple(self.tags.between(lo, hi)),
            )
            out.append((seg.path, chunk))
        self._unindexed = 0
        return PendingIndex(tuple(out))

    def write_index(self, pending: PendingIndex) -> list[int]:
        """Append the captured chunks to the index files (any thread); the segments written.

        A failure is logged, never raised: the WAL does not depend on the
        index, and a segment whose index could not be written is scanned at
        the next start (its index is removed, and rebuilt by a later write).
        """
        done: list[int] = []
        for segment, chunk in pending.chunks:
            first_seq = int(segment.stem)
            try:
                self.index.append(segment, chunk)
            except (OSError, CorruptionError) as exc:
                log.warning("segment index of %s not written: %s", segment, exc)
                self.index.drop(first_seq)
                continue
            done.append(first_seq)
        return done

    def index_written(self, pending: PendingIndex, done: Sequence[int]) -> None:
        """Note what `write_index` wrote (owner thread); segments it did not are indexed anew."""
        by_first = {seg.first_seq: seg for seg in self.wal.segments}
        ok = set(done)
        for segment, chunk in pending.chunks:
            seg = by_first.get(int(segment.stem))
            if seg is None:
                continue  # collected by retention meanwhile (its index went with it)
            seg.indexed = chunk.last - seg.first_seq + 1 if seg.first_seq in ok else 0

    def index_now(self) -> None:
        """Capture, write and note the index in a row (the one-shot path)."""
        pending = self.capture_index()
        self.index_written(pending, self.write_index(pending))

    # -- queries ------------------------------------------------------------------------

    def generations(
        self,
        *,
        agent: str | None = None,
        kind: GenerationKind | None = None,
        all_branches: bool = False,
        cursor: int | None = None,
        at_least: int = 0,
        lineage: int | None = None,
    ) -> Iterator[tuple[Entry, bool, int]]:
        """Generations newest first, below `cursor` and at or above `at_least`:
        (entry, active, branch); on lineage(`lineage`) instead of the active one when given.

        Active only: walks the active lineage's intervals and bisects the
        catalog in each, so a page costs its own length plus the reset records
        on the way, however many abandoned generations lie in between.
        """
        if all_branches:
            for entry in self.catalog.newest_first(
                below=cursor, at_least=at_least, agent=agent, kind=kind
            ):
                active = self.lineage.is_active(entry.seq)
                yield entry, active, self.lineage.branch_of(entry.seq)
            return
        top = self.head if lineage is None else lineage
        for lo, hi in self.lineage.iter_intervals(top):
            if cursor is not None and lo >= cursor:
                continue
            if hi < at_least:
                return
            below = hi + 1 if cursor is None else min(hi + 1, cursor)
            for entry in self.catalog.newest_first(
                below=below, at_least=max(lo, at_least), agent=agent, kind=kind
            ):
                active = lineage is None or self.lineage.is_active(entry.seq)
                yield entry, active, self.lineage.branch_of(entry.seq)

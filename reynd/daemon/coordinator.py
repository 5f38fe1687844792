"""Rewinds and checkouts: queued to one task and run strictly one at a time.

A rewind (a) closes the write gate and waits for in-flight appends, (b)
builds the state as of the target on a worker thread (and what follows the
reset record, `then`, which may still refuse), (c) cancels in-flight
chains, (d) appends the reset record (after what the substrates record
first: the workspace's changes nothing recorded yet) and waits for its fsync (its commit moves
the head and swaps in that state in one step), (e) lets the substrates
restore, reopens the gate and notifies subscribers. Reads keep being answered
throughout: they never take the gate, and they see either the old tip with
its state or the reset record with the new one, never a mix. If (b) fails,
nothing was cancelled; if (d) fails, the tip has not moved: the runners (c)
stopped start again, and the caller gets the error. Between (b) and (c) it
sums what the branch it leaves did outside reynd (the result's `effects`).
A dry run (issue 25) is queued the same way, so it sees the tip no move is
changing, but takes no gate: it only validates and reads, and cancels nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar, cast

import structlog
import trio

from reynd.core.reflog import by_of, undo_target
from reynd.daemon.addresses import Address
from reynd.daemon.committer import Committer
from reynd.daemon.hooks import Substrate
from reynd.daemon.preview import Preview
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.events import Event, Rewind
from reynd.storage.batch import Rebuilt
from reynd.storage.store import NO_NOTE, Reset, ResetNote, ResetOp, Store

__all__ = ["Coordinator", "Gate"]

log = structlog.get_logger("reynd.rewind")


class Gate:
    """Shared or exclusive. For writes: appends share it, a rewind holds it alone.

    Appenders that validate against the tip (fencing, `check`) do it inside
    the shared section, so no reset record can slip in between their check
    and their append. No lock on the shared path: trio runs one task at a
    time, so the check and the count cannot interleave with another task.
    """

    def __init__(self) -> None:
        self._writers = 0
        self._closed = False
        self._reopened = trio.Event()
        self._drained = trio.Event()
        self._exclusive = trio.Lock()

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        await self.enter_shared()
        try:
            yield
        finally:
            self.leave_shared()

    async def enter_shared(self) -> None:
        """`shared` without its context manager (pair with `leave_shared`), for the hot path.

        No scheduler pass while the gate is open: an async generator's
        context manager costs an append more than the rest of its fencing.
        """
        while self._closed:
            await self._reopened.wait()
        self._writers += 1

    def leave_shared(self) -> None:
        self._writers -= 1
        if self._writers == 0:
            self._drained.set()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._exclusive:
            self._closed = True
            self._reopened = trio.Event()
            try:
                while self._writers:
                    self._drained = trio.Event()
                    await self._drained.wait()
                yield
            finally:
                self._closed = False
                self._reopened.set()


CancelAll = Callable[[], Awaitable[list[m.CancelledChain]]]
# A reset's target: a seq, or an address (a tag, a time, a count back) resolved
# once the reset runs; its result says how the target was addressed.
Target = int | Address


class Then(Protocol):
    """Records to append right after the reset record, in its atomic batch (issue 25)."""

    async def records(self, rebuilt: Rebuilt) -> Sequence[Event]:
        """Made for the state as of the target; may refuse, before anything is written."""
        ...

    def stamp(self, result: m.RewindResult) -> None:
        """Say in `result` where they went, before subscribers hear of the reset."""


T = TypeVar("T")


@dataclass(slots=True)
class _Job:
    work: Callable[[], Awaitable[Any]]
    reply: trio.MemorySendChannel[tuple[bool, Any]]


class Coordinator:
    """Owns every reset of the tip, and every other job that must not overlap one (GC)."""

    def __init__(
        self,
        store: Store,
        committer: Committer,
        gate: Gate,
        cancel_all: CancelAll,
        on_reset: Callable[[m.RewindResult], None],
        *,
        on_abort: Callable[[], None],
        preview: Preview,
    ) -> None:
        self._store = store
        self._committer = committer
        self._gate = gate
        self._cancel_all = cancel_all
        self._on_reset = on_reset
        self._on_abort = on_abort  # runners cancelled, then no reset: start them again
        self._preview = preview
        self._send, self._receive = trio.open_memory_channel[_Job](64)
        self.substrates: list[Substrate] = []
        self.restores_files = False  # one of them is the workspace (workspace rewind is on)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for job in self._receive:
            try:
                outcome: tuple[bool, Any] = (True, await job.work())
            except Exception as exc:  # reported to the caller, which re-raises it
                outcome = (False, exc)
            # A caller that went away is fine: the job's effect stands regardless.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                job.reply.send_nowait(outcome)

    async def serialized(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` in the coordinator task, after every job queued before it."""
        send, receive = trio.open_memory_channel[tuple[bool, Any]](1)
        await self._send.send(_Job(work, send))
        async with receive:
            ok, value = await receive.receive()
        if not ok:
            raise value
        return cast(T, value)

    async def request(
        self,
        op: ResetOp,
        seq: Target,
        agent: str | None = None,
        *,
        force: bool = False,
        note: ResetNote = NO_NOTE,
        then: Then | None = None,
        dry_run: bool = False,
        only: m.Only | None = None,
    ) -> m.RewindResult:
        """Queue a rewind, checkout or act-turn rewind and wait for its outcome.

        `seq` may be a function that names it (a tag, a time, a count back): it
        is called when this reset runs, against the tip this reset moves.
        `then`: records to append right after the reset record, whole with it
        or not at all (their seqs follow `reset_seq`). `dry_run`: validate and
        say what the move would do; nothing is written or cancelled. `only`: what
        is restored (issue 25); "workspace" writes a reset record to the tip
        itself and the files as of `seq` right after it, so that the move
        is in the reflog and `undo` (checkout reset - 1) brings the files back."""
        if only == "workspace" and not self.restores_files:
            raise errors.InvalidParams(
                "only=workspace restores the workspace's files, but workspace rewind is off "
                "for this daemon: turn it on ([workspace] enabled = true) or drop `only`",
                {"only": only},
            )
        if dry_run:
            return await self.serialized(partial(self._dry_run, op, seq, agent, note))
        work = partial(self._reset, op, seq, agent, force, note, then=then, only=only)
        return await self.serialized(work)

    async def _dry_run(
        self, op: ResetOp, seq: Target, agent: str | None, note: ResetNote
    ) -> m.RewindResult:
        started = time.perf_counter()
        address, seq = (seq, seq.resolve()) if isinstance(seq, Address) else (None, seq)
        reset = self._store.prepare_reset(seq, op, agent)
        preview, effects, cancelled = await self._preview.dry_run(seq)
        would_be = self._store.next_seq  # without the records the substrates may add first
        result = m.RewindResult(
            mode=reset.mode,
            reset_seq=would_be,
            target=seq,
            branch=would_be,
            cancelled=cancelled,
            duration_ms=(time.perf_counter() - started) * 1000,
            reason=note.reason,
            effects=effects,
            dry_run=True,
            preview=preview,
        )
        if address is not None:
            address.stamp(result)
        return result

    async def undo(
        self, steps: int, note: ResetNote, then: Then | None = None, *, dry_run: bool = False
    ) -> m.RewindResult:
        """Check out where the tip was before the `steps`-th newest move.

        Resolved inside the coordinator's task, so no other move can come
        between reading the reflog and the checkout: two clients that undo at
        once undo two moves, each its own. `then`, `dry_run`: as for `request`.
        """
        return await self.serialized(partial(self._undo, steps, note, then, dry_run))

    async def _undo(
        self, steps: int, note: ResetNote, then: Then | None, dry_run: bool
    ) -> m.RewindResult:
        reset, target = undo_target(self._store.lineage, steps)
        if not note.reason:
            note = dataclasses.replace(note, reason=f"undo of reset {reset}")
        if dry_run:
            return await self._dry_run("checkout", target, None, note)
        return await self._reset("checkout", target, None, False, note, then=then)

    async def _reset(
        self,
        op: ResetOp,
        seq: Target,
        agent: str | None,
        force: bool,
        note: ResetNote,
        *,
        then: Then | None = None,
        only: m.Only | None = None,
    ) -> m.RewindResult:
        started = time.perf_counter()
        async with self._gate.exclusive():
            address, seq = (seq, seq.resolve()) if isinstance(seq, Address) else (None, seq)
            reset = self._store.prepare_reset(seq, op, agent)
            reset, files, note = _scoped(reset, self._store.head, only, note)
            for substrate in self.substrates:
                # May refuse: nothing written yet.
                await substrate.before_reset(reset.target, force, files)
            # Built before any turn is cancelled: history up to the target never
            # changes, and `then` may refuse with no turn cancelled for nothing.
            rebuilt = await trio.to_thread.run_sync(self._store.rebuild, reset.target)
            follow = [] if then is None else list(await then.records(rebuilt))
            # Read before the reset record: the branch it leaves, as the tip holds it now.
            effects = await self._preview.effects(reset.target)
            cancelled = await self._cancel_all()
            pairs = tuple((c.agent, c.turn_id) for c in cancelled)
            note = dataclasses.replace(note, cancelled=pairs)
            try:
                extra: list[Event] = []
                after: list[Event] = []
                for substrate in self.substrates:
                    before_it, after_it = await substrate.reset_records(reset.target, files)
                    extra.extend(before_it)
                    after.extend(after_it)
                # Built and staged in one step: the reset record supersedes
                # the last record before it (what the substrates recorded
                # stays on the branch it leaves).
                batch = self._store.reset_batch(reset, extra, note)
                # `then`'s message is reset_seq + 1 (follow.py stamps it so): records
                # after the reset come only with only=workspace, which refuses `then`.
                assert not (after and follow), "then with records after the reset record"
                # With records after it, atomic: after a crash, recovery keeps
                # the reset record and what follows it both, or neither (issue 25).
                written = await self._committer.append(
                    [*batch, *after, *follow], rebuilt, atomic=bool(after or follow)
                )
                durable = written[len(batch) - 1]
            except Exception as exc:
                # No reset record was acknowledged: the tip stands, and its
                # agents run on. Not when the WAL failed or the daemon stops:
                # a runner must not re-run a step it could not record.
                restart = self._committer.failure is None and not self._committer.stopping
                log.warning(f"{op}.failed", target=seq, error=repr(exc), runners_restarted=restart)
                if restart:
                    self._on_abort()
                raise
            assert isinstance(durable, Rewind)
            failure: Exception | None = None
            for substrate in self.substrates:
                try:
                    await substrate.after_reset(reset.target, durable.seq)
                except Exception as exc:  # the reset stands: finish it, then report
                    failure = failure or exc
            result = m.RewindResult(
                mode=reset.mode,
                reset_seq=durable.seq,
                target=reset.target,
                branch=self._store.lineage.branch_of(durable.seq),
                cancelled=cancelled,
                duration_ms=(time.perf_counter() - started) * 1000,
                reason=durable.reason,
                by=by_of(durable),
                effects=effects,
                only=only,
                files_as_of=seq if only == "workspace" else None,
            )
            if address is not None:
                address.stamp(result)  # before the hooks: `rewinds` subscribers see it too
            if then is not None:
                then.stamp(result)
        log.info(
            op,
            target=seq,
            reset_seq=result.reset_seq,
            mode=reset.mode,
            cancelled=len(cancelled),
            reason=note.reason,
            duration_ms=round(result.duration_ms, 3),
        )
        self._on_reset(result)
        if failure is not None:
            raise failure
        return result


def _scoped(
    reset: Reset, head: int, only: m.Only | None, note: ResetNote
) -> tuple[Reset, int | None, ResetNote]:
    """The reset record to write for `only`, the seq whose files the workspace takes, the note.

    Only "workspace": the runtime stays, so the reset record targets the tip
    itself; its reason (unless given) says which files (the reflog shows it).
    """
    if only == "runtime":
        return reset, None, note
    if only is None:
        return reset, reset.target, note
    files = reset.target
    if not note.reason:
        note = dataclasses.replace(note, reason=f"workspace files as of seq {files}")
    return dataclasses.replace(reset, target=head, mode="undo"), files, note

"""The external agents of one kind as one writer sees them: reads, and the one write path.

A thread here is one framework object (a LangGraph thread, an SDK session),
kept as one agent. A read (`read`) brings the writer's view of it up to the
daemon's tip; that tip is what its next write is fenced on (`based_on`), so
a writer that a rewind left behind is refused (StaleBranch) until it reads
again. Every write goes through `submit`: an `Op` builds its records against
the view, ops submitted while a batch is in flight share the next one, and a
batch is one `wal.append_batch` (all or nothing, one fsync), opened by the
records that make the agent writable when one of its ops needs them.

One retry rule, for every write: a batch refused because the view was out of
date (`_STALE_VIEW`: another writer created the agent or closed the thread, a
rewind removed it) is built again against a fresh read and sent once more.
Any other refusal fails the batch's ops, StaleBranch included: a rewind moved
the thread, and only a read puts the writer on the new branch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, NamedTuple, TypeVar

from reynctl.client import Client, connect
from reynctl.external.kind import Kind
from reynctl.external.records import Build, Event, batches, opening
from reynctl.external.view import AgentView
from reynd.protocol import errors, limits
from reynd.protocol import methods as m

__all__ = ["Found", "Op", "Thread", "ThreadStore"]

V = TypeVar("V", bound=AgentView)

# Records per wal.read (its most): a cold read is a few round trips.
READ_PAGE: Final = limits.MAX_READ_RECORDS
# Refusals that mean the view was out of date: read it again and retry once.
_STALE_VIEW: Final = (errors.AgentExists, errors.UnknownAgent, errors.InvalidEvent)


@dataclass(slots=True)
class Op:
    """A write waiting for a batch: the records `build` returns against the thread's view.

    `opens`: the thread is opened first when it is not (a put); an op that
    does not (a tombstone, the end of the thread) is built only against what
    is there, and goes in a batch of its own.
    """

    tid: str
    build: Build
    opens: bool = True
    done: bool = False
    error: BaseException | None = None


@dataclass(slots=True)
class Thread(Generic[V]):
    """What the writer knows of one thread: its records as read, the tip they are exact at."""

    view: V
    upto: int = 0  # the tip the view was read (or written) at: the next write's based_on
    stale: bool = True  # it may lack records (never read; a write failed or raced): read first


class Found(NamedTuple):
    """What `ThreadStore.find` found of a thread."""

    name: str  # the thread's agent
    events: list[dict[str, Any]]
    upto: int  # the tip they are exact at
    branch: int  # the active branch then (a rewind or checkout since makes another)
    needed: list[dict[str, Any]]  # the records they say they need (`need`)


class ThreadStore(Generic[V]):
    """One connection to the daemon and what it knows of the threads of `kind`; thread-safe.

    `view`: makes the empty view of a thread. `lock` serializes the reads and
    the writes (and the writer's own state with them); it is reentrant, so an
    operation holding it may submit.
    """

    def __init__(
        self,
        kind: Kind,
        view: Callable[[], V],
        socket: str | None,
        *,
        timeout: float | None,
        phases: bool,
    ) -> None:
        self.kind = kind
        self._view = view
        self._socket = socket
        self._timeout = timeout
        self._phases = phases
        self._client: Client | None = None
        self.lock = threading.RLock()
        self._threads: dict[str, Thread[V]] = {}  # by agent name
        self._queued: list[Op] = []  # writes waiting for the next batch
        self._queued_lock = threading.Lock()

    def conn(self) -> Client:
        """The connection to the daemon, opened on first use."""
        if self._client is None:
            # reconnect: the daemon closes a connection idle past idle_timeout_s (an
            # app waiting on a human): the next call dials again instead of failing.
            self._client = connect(
                self._socket,
                timeout=self._timeout,
                reconnect=True,
                name=f"reynd-{self.kind.session}",
            )
        return self._client

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self.lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- reads -----------------------------------------------------------------------------

    def read(self, tid: str) -> tuple[str, Thread[V]]:
        """The thread's agent name and view, brought up to the tip (one wal.read when nothing
        changed; a rewind that cut records off is replayed without them)."""
        name = self.kind.agent_name(tid)
        thread = self._threads.get(name)
        if thread is None:
            thread = self._threads[name] = Thread(self._view())
        while True:
            page = self.conn().read(agent=name, since=thread.upto, limit=READ_PAGE)
            if page.common < thread.upto:
                thread.view.rebuild(page.common)
            for event in page.events:
                thread.view.apply(event)
            thread.upto = page.upto
            if not page.more:
                break
        thread.stale = False
        return name, thread

    def holds(self, tid: str) -> bool:
        """Whether the writer holds a view of the thread (read or written since it started)."""
        return self.kind.agent_name(tid) in self._threads

    def find(
        self,
        tid: str,
        having: list[str],
        *,
        since: int = 0,
        opened: bool = False,
        need: bool = False,
    ) -> Found | None:
        """The thread's records above `since` that hold one of `having` as a JSON string
        (wal.read's `having`); None when `since` is no longer on the active lineage (a
        rewind). `opened`: only those since the thread last opened (wal.read's `turn`;
        none when it is closed; None when it closed or opened again between two pages).
        `need`: with the records they say they need (wal.read's `need`), in the same
        round trip. What the writer holds is left as it is."""
        name = self.kind.agent_name(tid)
        turn = self.kind.turn if opened else None
        out: list[dict[str, Any]] = []
        needed: list[dict[str, Any]] = []
        while True:
            page = self.conn().read(
                agent=name, since=since, limit=READ_PAGE, having=having, turn=turn, need=need
            )
            if page.common < since:
                return None
            out.extend(page.events)
            needed.extend(page.needed)
            since = page.upto
            if not page.more:
                return Found(name, out, page.upto, page.branch, needed)

    def get(self, name: str, seqs: list[int]) -> list[dict[str, Any]]:
        """The agent's records at `seqs` that are on the active lineage (wal.get)."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(seqs), READ_PAGE):
            out.extend(self.conn().get(agent=name, seqs=seqs[i : i + READ_PAGE]).events)
        return out

    def threads(self) -> list[str]:
        """Every thread the daemon holds, by thread id."""
        key = self.kind.id_option
        agents = self.conn().agents(session=self.kind.session).agents
        return sorted(str(a.options[key]) for a in agents if key in a.options)

    # -- the write path ------------------------------------------------------------------------

    def submit(self, op: Op) -> None:
        """Write `op`, sharing a batch with the writes other threads submitted meanwhile
        (LangGraph writes in the background: a task's put_writes and the step's put often
        wait on each other). Returns once durable; raises what failed it."""
        with self._queued_lock:
            self._queued.append(op)
        with self.lock:
            if not op.done:
                with self._queued_lock:
                    ops, self._queued = self._queued, []
                try:
                    for tid in dict.fromkeys(o.tid for o in ops):
                        for group in _groups([o for o in ops if o.tid == tid]):
                            self._write(tid, group)
                finally:
                    for o in ops:  # interrupted (KeyboardInterrupt...): none may pass for written
                        if not o.done:
                            o.error, o.done = RuntimeError("the write was interrupted"), True
        if op.error is not None:
            raise op.error

    def _write(self, tid: str, ops: Sequence[Op]) -> None:
        """One batch for `ops` on thread `tid`, retried once by the module's rule. Each op is
        marked done, with the error that failed it if any (never raised here: every caller
        raises its own)."""
        try:
            for attempt in (0, 1):
                name, thread = self._fresh(tid) if attempt == 0 else self.read(tid)
                events = self._build(tid, name, thread.view, ops)
                try:
                    self._append(name, thread, events)
                    break
                except _STALE_VIEW:
                    if attempt:
                        raise
        except BaseException as exc:
            for op in ops:
                op.error = op.error or exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for op in ops:
                op.done = True

    def _fresh(self, tid: str) -> tuple[str, Thread[V]]:
        """The view to write against: read again only when it may lack records."""
        name = self.kind.agent_name(tid)
        thread = self._threads.get(name)
        if thread is None or thread.stale:
            return self.read(tid)
        return name, thread

    def _build(self, tid: str, name: str, view: V, ops: Sequence[Op]) -> list[Event]:
        events = opening(self.kind, tid, view, phases=self._phases) if ops[0].opens else []
        for op in ops:
            op.error = None
            try:
                events.extend(op.build(name, view))
            except Exception as exc:  # its own fault (a value serde refuses): its alone
                op.error = exc
        return events

    def _append(self, name: str, thread: Thread[V], events: Sequence[Event]) -> None:
        """Append `events` to the thread's agent, fenced on the tip its view is exact at."""
        for chunk in batches(events):
            batch = [m.BatchEvent(kind=kind, data=data) for kind, data in chunk]
            try:
                seqs = self.conn().append_batch(agent=name, events=batch, based_on=thread.upto)
            except BaseException:
                thread.stale = True  # refused, or not known to have landed: read before writing
                raise
            # A batch's seqs are consecutive: right after the view's tip, nothing
            # else was appended in between and the view stays exact.
            if seqs.seqs[0] == thread.upto + 1 and not thread.stale:
                for seq, (kind, data) in zip(seqs.seqs, chunk, strict=True):
                    thread.view.apply({"kind": kind, "seq": seq, "agent": name, **data})
                thread.upto = seqs.seqs[-1]
            else:
                thread.stale = True


def _groups(ops: list[Op]) -> list[list[Op]]:
    """The batches of one thread's ops, in order: the ops that open it together; any other
    alone (it changes what the thread is, so the ops after it are built against that)."""
    groups: list[list[Op]] = []
    for op in ops:
        if op.opens and groups and groups[-1][0].opens:
            groups[-1].append(op)
        else:
            groups.append([op])
    return groups

"""ReyndSaver: LangGraph checkpoints, writes and metadata kept in reynd.

One LangGraph thread is one external reynd agent (`names.agent_name`); what
its records hold is described in `view`. Reads go through `wal.read`, which
answers on the active lineage: after `reynctl rewind` or `checkout`, the
next `get_state` of a graph sees the thread as of the target seq, and every
append (one wal.append_batch per operation: one round trip, one fsync) is
fenced (`based_on`) on the tip the saver last read, so a run that
a rewind abandoned cannot write on past it (StaleBranch).
"""

from __future__ import annotations

import asyncio
import builtins
import random
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import msgspec
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from reynctl.client import Client, connect
from reynctl.langgraph.checkpoints import MAX_DEPTH as MAX_CP_DEPTH
from reynctl.langgraph.checkpoints import Decoded, apply_diff, diff
from reynctl.langgraph.names import SESSION, agent_name
from reynctl.langgraph.values import Previous, decode, empty, encode, previous_of
from reynctl.langgraph.view import TURN, Saved, ThreadView, pack, unpack
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.names import CONTROL_CHARS, IDENT_MAX

__all__ = ["ReyndSaver"]

# A value larger than this (packed) goes in `part` records of its own: one
# request may not exceed the daemon's max_message_bytes (1 MiB by default).
PART: Final = 256 * 1024
Event = tuple[str, dict[str, Any]]
Build = Callable[[str, ThreadView], "list[Event]"]
MAX_BATCH: Final = 1000  # events per wal.append_batch (the daemon's max_append_events)
BATCH_BYTES: Final = 3 * PART  # per request, within the daemon's max_message_bytes (1 MiB)
READ_PAGE: Final = 10_000  # records per wal.read (its most): a cold read is a few round trips
RECENT: Final = 8  # list values kept decoded after a read (a chain of deltas can start there)
CONTROL: Final = re.compile(f"[{CONTROL_CHARS}]")  # refused in an identifier
# Refusals that mean our view of the thread is out of date: read it again and retry once.
_RETRY = (errors.AgentExists, errors.UnknownAgent, errors.InvalidEvent)


@dataclass(slots=True)
class _Op:
    """A write waiting for a batch."""

    tid: str
    build: Build
    done: bool = False
    error: BaseException | None = None


class ReyndSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that stores threads in a running reynd daemon.

    `socket`: the daemon's socket, found as reynctl finds it when None
    (--socket, $REYN_SOCKET, reynd.toml, the user path, the system path).
    Sync and async methods; the async ones run the blocking client in a
    worker thread. One connection, one call at a time (a lock).
    `generations`: mark each checkpoint as a reynd generation (a `phase`:
    `reynctl generations`, `rewind` to it, the TUI's timeline); one more
    small record per checkpoint, in the same request.
    """

    def __init__(
        self,
        socket: str | None = None,
        *,
        serde: SerializerProtocol | None = None,
        timeout: float | None = 30.0,
        generations: bool = True,
    ) -> None:
        super().__init__(serde=serde)
        self._phases = generations
        self._socket = socket
        self._timeout = timeout
        self._client: Client | None = None
        self._lock = threading.RLock()
        self._views: dict[str, ThreadView] = {}
        self._synced: dict[str, int] = {}  # agent -> the tip its view was read at
        self._dirty: set[str] = set()  # views that missed records: read before writing
        self._prev: dict[tuple[str, str, str], Previous] = {}  # delta bases per channel
        self._cps: dict[tuple[str, str], Decoded] = {}  # diff bases: the last checkpoint per ns
        self._queued: builtins.list[_Op] = []  # writes waiting for the next batch
        self._queued_lock = threading.Lock()
        self._recent: OrderedDict[tuple[str, str, str, Any], builtins.list[Any]] = OrderedDict()

    # -- connection ----------------------------------------------------------------------

    def _conn(self) -> Client:
        if self._client is None:
            # reconnect: the daemon closes a connection idle past idle_timeout_s (an
            # app waiting on a human): the next call dials again instead of failing.
            self._client = connect(self._socket, timeout=self._timeout, reconnect=True)
        return self._client

    def close(self) -> None:
        """Close the connection to the daemon (a later call opens a new one)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> ReyndSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading the thread --------------------------------------------------------------

    def _sync(self, tid: str) -> tuple[str, ThreadView]:
        """The thread's view, brought up to the tip (one wal.read when nothing changed)."""
        name = agent_name(tid)
        view = self._views.setdefault(name, ThreadView())
        while True:
            since = self._synced.get(name, 0)
            page = self._conn().read(agent=name, since=since, limit=READ_PAGE)
            if page.common < since:
                view.rebuild(page.common)
                self._forget(name)
            for event in page.events:
                view.apply(event)
            self._synced[name] = page.upto
            if not page.more:
                break
        self._dirty.discard(name)
        return name, view

    def _forget(self, name: str) -> None:
        """Drop the thread's delta and diff bases (a rewind or a delete may have removed them)."""
        self._prev = {k: v for k, v in self._prev.items() if k[0] != name}
        self._cps = {k: v for k, v in self._cps.items() if k[0] != name}
        for key in [k for k in self._recent if k[0] == name]:
            del self._recent[key]

    def _fresh(self, tid: str) -> tuple[str, ThreadView]:
        """The view to write against: read again only when it may have missed records."""
        name = agent_name(tid)
        if name in self._views and name not in self._dirty:
            return name, self._views[name]
        return self._sync(tid)

    def _threads(self) -> list[str]:
        """Every thread reynd holds, by thread id."""
        agents = self._conn().agents(session=SESSION).agents
        return sorted(str(a.options["thread_id"]) for a in agents if "thread_id" in a.options)

    # -- writing -------------------------------------------------------------------------

    def _append(self, name: str, events: Sequence[Event]) -> None:
        """Append `events` to the thread's agent: one wal.append_batch (all or nothing, one
        fsync), fenced on the tip the view was read at."""
        view = self._views[name]
        synced = self._synced.get(name, 0)
        for chunk in _batches(events):
            batch = [m.BatchEvent(kind=kind, data=data) for kind, data in chunk]
            try:
                seqs = self._conn().append_batch(agent=name, events=batch, based_on=synced).seqs
            except errors.ReyndError:
                self._dirty.add(name)
                raise
            # A batch's seqs are consecutive: right after the view's tip, nothing
            # else was appended in between and the view stays exact.
            if seqs[0] == synced + 1 and name not in self._dirty:
                for seq, (kind, data) in zip(seqs, chunk, strict=True):
                    view.apply({"kind": kind, "seq": seq, "agent": name, **data})
                self._synced[name] = synced = seqs[-1]
            else:
                self._dirty.add(name)

    def _submit(self, tid: str, build: Build) -> None:
        """Write what `build(name, view)` returns, sharing one batch with the writes that
        other threads submitted meanwhile (LangGraph writes in the background: a task's
        put_writes and the step's put often wait on each other). Returns once durable."""
        op = _Op(tid, build)
        with self._queued_lock:
            self._queued.append(op)
        with self._lock:
            if not op.done:
                with self._queued_lock:
                    ops, self._queued = self._queued, []
                try:
                    for thread in dict.fromkeys(o.tid for o in ops):
                        self._flush(thread, [o for o in ops if o.tid == thread])
                finally:
                    for o in ops:  # interrupted (KeyboardInterrupt...): none may pass for written
                        if not o.done:
                            o.error, o.done = RuntimeError("the write was interrupted"), True
        if op.error is not None:
            raise op.error

    def _flush(self, tid: str, ops: builtins.list[_Op]) -> None:
        """One batch for the operations `ops` on thread `tid`: each is marked done, with
        the error that failed it if any (never raised here: every caller raises its own)."""
        try:
            for attempt in (0, 1):
                name, view = self._fresh(tid) if attempt == 0 else self._sync(tid)
                events = _opening(tid, view, phases=self._phases)
                for op in ops:
                    op.error = None
                    try:
                        events.extend(op.build(name, view))
                    except Exception as exc:  # its own fault (a value serde refuses): its alone
                        op.error = exc
                try:
                    self._append(name, events)
                    break
                except _RETRY:
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

    def _write(self, tid: str, build: Build) -> None:
        """Append what `build(name, view)` returns, opening the thread first if need be.

        A refusal that says the view was out of date (another writer, a
        rewind that removed the agent) is retried once against a fresh read.
        """
        for attempt in (0, 1):
            name, view = self._fresh(tid) if attempt == 0 else self._sync(tid)
            events = [*_opening(tid, view, phases=self._phases), *build(name, view)]
            try:
                self._append(name, events)
                return
            except _RETRY:
                if attempt:
                    raise

    def _step(self, data: dict[str, Any]) -> Event:
        return ("step.started", {"turn_id": TURN, "step": 0, "input": data})

    def _put_events(
        self,
        name: str,
        view: ThreadView,
        *,
        ns: str,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        parent: str | None,
        new_versions: ChannelVersions,
    ) -> list[Event]:
        c: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = c.pop("channel_values")
        blobs: dict[str, dict[str, Any]] = {}
        parts: list[Event] = []
        for ch, version in new_versions.items():
            if ch not in values:
                blobs[ch] = empty(version)
                continue
            key = (name, ns, ch)
            prev = self._prev.get(key)
            has_base = prev is not None and (ns, ch, prev.version) in view.blobs
            enc = encode(self.serde, version, values[ch], prev, has_base)
            if enc.previous is None:
                self._prev.pop(key, None)
            else:
                self._prev[key] = enc.previous
            record = enc.record
            if len(record["b"]) > PART:
                ref = f"{checkpoint['id']}/{ns}/{ch}"
                data = record.pop("b")
                for i in range(0, len(data), PART):
                    parts.append(self._step({"lg": "part", "ref": ref, "b": data[i : i + PART]}))
                record["ref"] = ref
            blobs[ch] = record
        md_type, md_data = self.serde.dumps_typed(metadata)
        payload: dict[str, Any] = {
            "lg": "put",
            "ns": ns,
            "id": checkpoint["id"],
            "parent": parent,
            "md": [md_type, pack(md_data)],
            "run": metadata.get("run_id"),
            "blobs": blobs,
        }
        last = self._cps.get((name, ns))
        d = None
        if (
            last is not None
            and last.id == parent
            and last.depth < MAX_CP_DEPTH
            and (ns, parent) in view.stored
        ):
            d = diff(last.value, c)
        if last is not None and d is not None:
            payload["cpd"] = [parent, d]
            depth = last.depth + 1
        else:
            cp_type, cp_data = self.serde.dumps_typed(c)
            payload["cp"] = [cp_type, pack(cp_data)]
            depth = 0
        self._cps[(name, ns)] = Decoded(c["id"], _copied(c), depth)
        events = [*parts, self._step(payload)]
        if self._phases:
            events.append(("skill.phase", {"run_id": TURN, "phase": _phase(ns, metadata)}))
        return events

    # -- the sync API ----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (its thread's latest when it names none)."""
        conf = config["configurable"]
        tid, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        with self._lock:
            name, view = self._sync(tid)
            cid = get_checkpoint_id(config)
            saved = view.checkpoints.get(ns, {}).get(cid) if cid else view.latest(ns)
            if saved is None:
                return None
            return self._tuple(name, tid, view, saved, remember=cid is None)

    def _tuple(
        self, name: str, tid: str, view: ThreadView, saved: Saved, *, remember: bool = False
    ) -> CheckpointTuple:
        checkpoint, depth = self._checkpoint(name, view, saved)
        if remember:
            self._cps[(name, saved.ns)] = Decoded(saved.id, _copied(checkpoint), depth)
        values: dict[str, Any] = {}
        for ch, version in checkpoint["channel_versions"].items():
            key = (saved.ns, ch, version)
            present, value = decode(self.serde, view.blobs, key, self._known(name, saved.ns, ch))
            if present and isinstance(value, list):
                self._remember_value((name, saved.ns, ch, version), value)
            if present:
                values[ch] = value
                if remember and (prev := previous_of(view.blobs, key, value)) is not None:
                    self._prev[(name, saved.ns, ch)] = prev
        metadata = self.serde.loads_typed((saved.metadata[0], unpack(saved.metadata[1])))
        writes = [
            (w.task_id, w.channel, self.serde.loads_typed((w.value[0], unpack(w.value[1]))))
            for w in view.pending(saved.ns, saved.id)
        ]
        return CheckpointTuple(
            config=_config(tid, saved.ns, saved.id),
            checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
            metadata=metadata,
            parent_config=_config(tid, saved.ns, saved.parent) if saved.parent else None,
            pending_writes=writes,
        )

    def _known(self, name: str, ns: str, ch: str) -> dict[Any, builtins.list[Any]]:
        """Versions of a channel held decoded: the delta base, and recent reads."""
        known = {
            v: items for (n, s, c, v), items in self._recent.items() if (n, s, c) == (name, ns, ch)
        }
        prev = self._prev.get((name, ns, ch))
        if prev is not None:
            known[prev.version] = prev.items
        return known

    def _remember_value(self, key: tuple[str, str, str, Any], value: builtins.list[Any]) -> None:
        self._recent[key] = list(value)
        self._recent.move_to_end(key)
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)

    def _checkpoint(self, name: str, view: ThreadView, saved: Saved) -> tuple[dict[str, Any], int]:
        """The checkpoint dict of `saved` (a fresh copy) and the diffs that lead to it."""
        chain: builtins.list[Saved] = []
        cur = saved
        while True:
            last = self._cps.get((name, cur.ns))
            if last is not None and last.id == cur.id:
                value, depth = last.value, last.depth
                break
            if not cur.is_diff:
                value = self.serde.loads_typed((cur.checkpoint[0], unpack(cur.checkpoint[1])))
                depth = 0
                break
            chain.append(cur)
            base = view.stored.get((cur.ns, cur.checkpoint[0]))
            if base is None:  # a diff is only written against a stored parent
                raise RuntimeError(f"checkpoint {cur.id}: its base {cur.checkpoint[0]} is missing")
            cur = base
        for step in reversed(chain):
            value = apply_diff(value, step.checkpoint[1])
        return _copied(value), depth + len(chain)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, of one thread (or all), filtered by metadata and `before`."""
        with self._lock:
            out = self._list(config, filter, before, limit)
        yield from out

    def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[CheckpointTuple]:
        conf = config["configurable"] if config else {}
        tids = [str(conf["thread_id"])] if "thread_id" in conf else self._threads()
        ns = conf.get("checkpoint_ns")
        cid = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        out: builtins.list[CheckpointTuple] = []
        for tid in tids:
            name, view = self._sync(tid)
            for saved in view.newest_first(None if ns is None else str(ns)):
                if limit is not None and len(out) >= limit:
                    return out
                if cid and saved.id != cid:
                    continue
                if before_id and saved.id >= before_id:
                    continue
                if filter:
                    md = self.serde.loads_typed((saved.metadata[0], unpack(saved.metadata[1])))
                    if not all(md.get(k) == v for k, v in filter.items()):
                        continue
                out.append(self._tuple(name, tid, view, saved))
        return out

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: one record with the channel versions that changed."""
        conf = config["configurable"]
        tid, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        parent = conf.get("checkpoint_id")
        md = get_checkpoint_metadata(config, metadata)
        self._submit(
            tid,
            lambda name, view: self._put_events(
                name,
                view,
                ns=ns,
                checkpoint=checkpoint,
                metadata=md,
                parent=parent,
                new_versions=new_versions,
            ),
        )
        return _config(tid, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint `config` names."""
        conf = config["configurable"]
        tid, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        encoded = []
        for idx, (channel, value) in enumerate(writes):
            type_, data = self.serde.dumps_typed(value)
            encoded.append([idx, channel, type_, pack(data)])
        payload = {
            "lg": "writes",
            "ns": ns,
            "id": conf["checkpoint_id"],
            "task": task_id,
            "path": task_path,
            "w": encoded,
        }
        self._submit(tid, lambda name, view: [self._step(payload)])

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread: an appended tombstone (turn.ended); retention GC frees its bytes."""
        with self._lock:
            self._close_thread(str(thread_id), "deleted")

    def _close_thread(self, tid: str, label: str) -> None:
        name, view = self._sync(tid)
        if view.open:
            self._append(name, _ending(view, label))
        self._forget(name)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop the checkpoints (and their writes) of these runs, in every thread: tombstones."""
        runs = sorted(set(run_ids))
        if not runs:
            return
        with self._lock:
            for tid in self._threads():
                name, view = self._sync(tid)
                if view.open and view.run_ids() & set(runs):
                    self._append(name, [self._step({"lg": "drop_runs", "runs": runs})])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread into another (records replayed as-is)."""
        with self._lock:
            _, src = self._sync(str(source_thread_id))
            copied = [self._step(dict(e["input"])) for e in _since_opened(src)]
            if copied:
                self._write(str(target_thread_id), lambda name, view: copied)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`delete`: as delete_thread. `keep_latest`: start the thread afresh with only the
        latest checkpoint of each namespace (values written whole) and its writes; the
        records before it are then left to retention GC."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use keep_latest or delete")
        with self._lock:
            for raw in thread_ids:
                tid = str(raw)
                if strategy == "delete":
                    self._close_thread(tid, "deleted")
                    continue
                name, view = self._sync(tid)
                kept = [s for ns in view.checkpoints if (s := view.latest(ns)) is not None]
                if not kept:
                    continue
                fresh = [self._rewrite(name, tid, view, saved) for saved in kept]
                self._close_thread(tid, "pruned")
                for events in fresh:
                    self._write(tid, _constant(events))

    def _rewrite(self, name: str, tid: str, view: ThreadView, saved: Saved) -> builtins.list[Event]:
        """The records that put `saved` again, every value whole, with its pending writes."""
        tup = self._tuple(name, tid, view, saved)
        checkpoint = tup.checkpoint
        stored = checkpoint["channel_versions"].items()
        versions = {ch: v for ch, v in stored if (saved.ns, ch, v) in view.blobs}
        self._forget(name)
        events = self._put_events(
            name,
            ThreadView(),  # no delta bases: every value is written whole
            ns=saved.ns,
            checkpoint=checkpoint,
            metadata=tup.metadata,
            parent=saved.parent,
            new_versions=versions,
        )
        # The metadata as it was stored (get_checkpoint_metadata already applied).
        writes = view.writes.get((saved.ns, saved.id), {})
        by_task: dict[tuple[str, str], list[list[Any]]] = {}
        for (task, idx), w in writes.items():
            by_task.setdefault((task, w.task_path), []).append([idx, w.channel, *w.value])
        for (task, path), ws in by_task.items():
            data = {"lg": "writes", "ns": saved.ns, "id": saved.id, "task": task, "path": path}
            events.append(self._step({**data, "w": ws}))
        return events

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A count, then a random part so that a fork from a past checkpoint never reuses a
        stored version (as InMemorySaver's); zero-padded so that versions sort as strings.
        Shorter than InMemorySaver's (every checkpoint repeats every channel's version)."""
        # An int when the thread was written by a saver that counts plainly.
        raw: Any = current
        current_v = int(raw.split(".")[0]) if isinstance(raw, str) else int(raw or 0)
        return f"{current_v + 1:012}.{random.getrandbits(32):08x}"

    # -- the async API: the same calls in a worker thread -----------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def run() -> builtins.list[CheckpointTuple]:
            with self._lock:
                return self._list(config, filter, before, limit)

        for tup in await asyncio.to_thread(run):
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _config(tid: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _constant(events: list[Event]) -> Build:
    return lambda name, view: events


def _batches(events: Sequence[Event]) -> Iterator[Sequence[Event]]:
    """`events` in requests the daemon takes: at most MAX_BATCH events and BATCH_BYTES.

    Only a put with values split in `part` records needs more than one; its
    parts then go first, and a crash between the two leaves only unused parts.
    """
    start, size = 0, 0
    for i, (_, data) in enumerate(events):
        n = len(msgspec.json.encode(data))
        if i > start and (i - start >= MAX_BATCH or size + n > BATCH_BYTES):
            yield events[start:i]
            start, size = i, 0
        size += n
    if start < len(events):
        yield events[start:]


def _copied(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A copy LangGraph may change in place (it does, to the nested version maps) safely."""
    out = dict(checkpoint)
    if isinstance(out.get("channel_versions"), dict):
        out["channel_versions"] = dict(out["channel_versions"])
    if isinstance(out.get("versions_seen"), dict):
        out["versions_seen"] = {k: dict(v) for k, v in out["versions_seen"].items()}
    return out


def _phase(ns: str, metadata: CheckpointMetadata) -> str:
    """The generation label of a checkpoint: `loop step 3` (and its namespace, if any)."""
    text = f"{metadata.get('source', 'checkpoint')} step {metadata.get('step', '?')}"
    if ns:
        text += f" in {ns}"
    return re.sub(CONTROL, "?", text)[:IDENT_MAX]


def _opening(tid: str, view: ThreadView, *, phases: bool) -> list[Event]:
    """The records that make the thread writable: its agent, then its open turn."""
    events: list[Event] = []
    if not view.exists:
        events.append(("agent.created", {"session": SESSION, "options": {"thread_id": tid}}))
    if not view.open:
        text = f"LangGraph thread {tid}"
        events.append(("message.received", {"message_id": TURN, "text": text}))
        events.append(("turn.started", {"turn_id": TURN, "message_id": TURN}))
    if phases and not (view.open and view.phases):
        events.append(("skill.started", {"run_id": TURN, "skill": "langgraph"}))
    return events


def _ending(view: ThreadView, label: str) -> list[Event]:
    """The records that close the thread: its skill run (which also holds the floor), its turn."""
    events: list[Event] = []
    if view.phases:
        events.append(("skill.ended", {"run_id": TURN, "outcome": label}))
    events.append(("turn.ended", {"turn_id": TURN, "outcome": "aborted", "label": label}))
    return events


def _since_opened(view: ThreadView) -> list[dict[str, Any]]:
    """The thread's step records since its turn last started (what is live)."""
    out: list[dict[str, Any]] = []
    for event in view.events:
        if event["kind"] == "turn.started" and event.get("turn_id") == TURN:
            out = []
        elif event["kind"] == "step.started" and event.get("turn_id") == TURN:
            out.append(event)
    return out

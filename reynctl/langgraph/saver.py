"""ReyndSaver: LangGraph checkpoints, writes and metadata kept in reynd.

One LangGraph thread is one external reynd agent (`names.agent_name`); what
its records hold is described in `view`, how they are read and written in
`store`. Reads go through `wal.read`, which answers on the active lineage:
after `reynctl rewind` or `checkout`, the next `get_state` of a graph sees the
thread as of the target seq, and every write (one wal.append_batch: one round
trip, one fsync) is fenced (`based_on`) on the tip the saver last read, so a
run that a rewind abandoned cannot write on past it (StaleBranch).

The saver's own state is in two parts that never mix. What its writes keep
(`_written`: the last checkpoint and channel values it wrote per namespace,
the bases of the next put's diff and deltas) no read changes. What reads
handed LangGraph (`_handed`: the latest checkpoint and its values, which a
run that starts by reading goes on from; `_recent`: values decoded) no write
changes. A put stores a value as a delta of whichever of the two it extends,
checked against the thread's records as the saver knows them: a base that a
rewind took away is never used, so a read that finds a rewind drops nothing.
Closing a thread (delete, prune) drops both parts of it.
"""

from __future__ import annotations

import asyncio
import builtins
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

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

from reynctl.external.records import PART, Event, constant, ending, since_opened
from reynctl.external.store import Op, ThreadStore
from reynctl.langgraph.checkpoints import MAX_DEPTH as MAX_CP_DEPTH
from reynctl.langgraph.checkpoints import Decoded, apply_diff, diff
from reynctl.langgraph.names import KIND
from reynctl.langgraph.records import phase, step
from reynctl.langgraph.stored import loads, stored
from reynctl.langgraph.values import Previous, base_for, decode, empty, encode, previous_of
from reynctl.langgraph.versions import next_version
from reynctl.langgraph.view import TURN, Saved, ThreadView, gaps, pack, seqs, unpack
from reynd.protocol import errors
from reynd.protocol.read_methods import MAX_HAVING, NEEDLE_MAX, NEEDLE_MIN

__all__ = ["ReyndSaver"]

RECENT: Final = 8  # list values kept decoded after a read (a chain of deltas can start there)
# A put lists the seqs of the records a read of it needs (`need`) when there are at most
# NEED_MAX; as the ones the last put with a whole list lacks (`need_of`) when at most
# NEED_EXTRA are: a cold read fetches them by seq (`_cold`).
NEED_MAX: Final = 1000
NEED_EXTRA: Final = 32


@dataclass(slots=True)
class _Bases:
    """What a put in one namespace of a thread may be stored against."""

    checkpoint: Decoded | None = None  # a checkpoint, decoded: a diff's base
    values: dict[str, Previous] = field(default_factory=dict)  # by channel: a delta's base


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
        self._store = ThreadStore(KIND, ThreadView, socket, timeout=timeout, phases=generations)
        self._lock = self._store.lock
        # By (agent name, namespace): changed by writes only, and by reads only (above).
        self._written: dict[tuple[str, str], _Bases] = {}
        self._handed: dict[tuple[str, str], _Bases] = {}
        self._recent: OrderedDict[tuple[str, str, str, Any], builtins.list[Any]] = OrderedDict()

    # -- connection ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection to the daemon (a later call opens a new one)."""
        self._store.close()

    def __enter__(self) -> ReyndSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the bases of a put --------------------------------------------------------------------

    def _bases(self, name: str, ns: str) -> tuple[_Bases, _Bases]:
        """The namespace's write bases (to update) and what reads handed out (to consult)."""
        key = (name, ns)
        return self._written.setdefault(key, _Bases()), self._handed.get(key, _Bases())

    def _forget(self, name: str) -> None:
        """Drop what is kept of a thread that was closed (its records are gone from its lineage)."""
        self._written = {k: v for k, v in self._written.items() if k[0] != name}
        self._handed = {k: v for k, v in self._handed.items() if k[0] != name}
        for key in [k for k in self._recent if k[0] == name]:
            del self._recent[key]

    # -- writing -------------------------------------------------------------------------

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
        own, given = self._bases(name, ns)
        c: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = c.pop("channel_values")
        blobs: dict[str, dict[str, Any]] = {}
        parts: list[Event] = []
        for ch, version in new_versions.items():
            if ch not in values:
                blobs[ch] = empty(version)
                continue
            candidates = (own.values.get(ch), given.values.get(ch))
            base = base_for(values[ch], (ns, ch, version), view.blobs, candidates)
            enc = encode(self.serde, version, values[ch], base)
            if enc.previous is None:
                own.values.pop(ch, None)
            else:
                own.values[ch] = enc.previous
            record = enc.record
            if len(record["b"]) > PART:
                ref = f"{checkpoint['id']}/{ns}/{ch}"
                data = record.pop("b")
                for i in range(0, len(data), PART):
                    parts.append(step({"lg": "part", "ref": ref, "b": data[i : i + PART]}))
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
        # The parent, decoded (written or handed out: the same checkpoint), when it is stored.
        last = next(
            (b.checkpoint for b in (own, given) if b.checkpoint and b.checkpoint.id == parent),
            None,
        )
        d = None
        if last is not None and last.depth < MAX_CP_DEPTH and (ns, parent) in view.stored:
            d = diff(last.value, c)
        if last is not None and d is not None:
            payload["cpd"] = [parent, d]
            depth = last.depth + 1
        else:
            cp_type, cp_data = self.serde.dumps_typed(c)
            payload["cp"] = [cp_type, pack(cp_data)]
            depth = 0
        own.checkpoint = Decoded(c["id"], _copied(c), depth)
        need = _needs(view, ns, c.get("channel_versions", {}), blobs, parent if depth else None)
        if need is not None:
            full = view.full
            if full is not None and len(extra := need - full[1]) <= NEED_EXTRA:
                payload["need"], payload["need_of"] = gaps(extra), full[0]
            else:
                payload["need"] = gaps(need)
        events = [*parts, step(payload)]
        if self._phases:
            events.append(("skill.phase", {"run_id": TURN, "phase": phase(ns, metadata)}))
        return events

    # -- the sync API ----------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (its thread's latest when it names none)."""
        conf = config["configurable"]
        tid, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        with self._lock:
            cid = get_checkpoint_id(config)
            # An id wal.read's `having` takes (LangGraph's are uuids); any other: read in full.
            searchable = cid is not None and NEEDLE_MIN <= len(cid) <= NEEDLE_MAX
            if cid and searchable and not self._store.holds(tid):
                cold = self._cold(tid, ns, cid)
                if not isinstance(cold, _Unsure):
                    return cold
            name, thread = self._store.read(tid)
            view = thread.view
            saved = view.checkpoints.get(ns, {}).get(cid) if cid else view.latest(ns)
            if saved is None:
                return None
            return self._tuple(name, tid, view, saved, hand_out=cid is None)

    def _cold(self, tid: str, ns: str, cid: str) -> CheckpointTuple | _Unsure | None:
        """Checkpoint `cid` of a thread this saver holds nothing of, read from the records it
        needs, not the whole thread; exactly what a full read returns, or _UNSURE.

        The thread, since it last opened, is searched for the records that name `cid` (its
        puts, its writes, the puts of its children), then after its put for those naming its
        run (a tombstone can hide it): replayed, they tell whether the full view holds it and
        its pending writes, wherever they were written.
        Its put lists the seqs of the records its value is read from (its chain of diffs,
        each channel version's put and bases, their parts), which the daemon sends with the
        search's answer (wal.read's `need`; by seq with wal.get when some are missing). _UNSURE when
        the put lists nothing (an older saver wrote it, or a value was split across parts
        in its own request) or a record is missing (a copied thread's list names the
        source's seqs): the caller reads the whole thread.
        """
        try:
            return self._cold_read(tid, ns, cid)
        except errors.SeqOutOfRange:  # a rewind moved the thread below what it lists
            return _UNSURE
        except errors.InvalidParams:  # a daemon older than wal.read's `turn` or `need`
            return _UNSURE

    def _cold_read(self, tid: str, ns: str, cid: str) -> CheckpointTuple | _Unsure | None:
        # The records naming the checkpoint since the thread last opened (a close hides
        # every record before it, and a closed thread holds no checkpoint): its put, its
        # writes, its children's puts. An id is a long string, rare in the bytes: the
        # search runs at memory speed, where "drop_runs" or "turn.ended" (a quote, then
        # common letters) crawled through every record of the thread at a tenth of it.
        naming = self._store.find(tid, [cid], opened=True, need=True)
        if naming is None:
            return _UNSURE
        # With the records they say they need (`need`, `need_of`): one round trip.
        found = naming.events
        have = {e["seq"]: e for e in [*naming.needed, *found]}
        saved = _replayed(found).checkpoints.get(ns, {}).get(cid)
        if saved is None:
            return None
        if saved.need is None:
            return _UNSURE
        # What else can hide it: a tombstone of the run of any of its puts (an id put again
        # by another run stays hidden with the writes before it), found by the runs' ids
        # (each record of a run names it), from the first record naming the checkpoint, as
        # of the tip the first search saw.
        runs = [
            run
            for e in found
            if (inp := e.get("input") or {}).get("lg") == "put" and inp.get("id") == cid
            if (run := inp.get("run")) is not None
        ]
        if runs:
            # A run id `having` does not take: the tombstones themselves, slower.
            needles = ["drop_runs"]
            if len(runs) <= MAX_HAVING and all(
                isinstance(r, str) and NEEDLE_MIN <= len(r) <= NEEDLE_MAX for r in runs
            ):
                needles = sorted(set(runs))
            first = min(int(e["seq"]) for e in found)
            later = self._store.find(tid, needles, since=first - 1)
            # A rewind or checkout in between: the first search's records may be of a
            # lineage the second one does not see.
            if later is None or later.branch != naming.branch:
                return _UNSURE
            drops = [
                e
                for e in later.events
                if e["seq"] <= naming.upto and (e.get("input") or {}).get("lg") == "drop_runs"
            ]
            if drops:
                found = sorted([*found, *drops], key=lambda e: int(e["seq"]))
        scan = _replayed(found)
        if cid not in scan.checkpoints.get(ns, {}):
            return None
        need = set(saved.need)
        if saved.need_of is not None:
            full = have.get(saved.need_of) or next(
                iter(self._store.get(naming.name, [saved.need_of])), None
            )
            listed = full.get("input", {}).get("need") if full else None
            if not isinstance(listed, builtins.list):
                return _UNSURE
            need.update(seqs(listed))
        records = [have[s] for s in sorted(need) if s in have]
        if len(records) != len(need):  # not sent with the search (too many, too large)
            records = self._store.get(naming.name, sorted(need))
            if len(records) != len(need):
                return _UNSURE
        put = next(e for e in found if e["seq"] == saved.seq)
        view = ThreadView()
        for event in [*records, put]:
            view.apply(event)
        view.writes = {(ns, cid): scan.writes.get((ns, cid), {})}
        return self._tuple(naming.name, tid, view, view.checkpoints[ns][cid])

    def _tuple(
        self,
        name: str,
        tid: str,
        view: ThreadView,
        saved: Saved,
        *,
        hand_out: bool = False,
        remember: bool = True,
    ) -> CheckpointTuple:
        """The tuple of `saved`. `hand_out`: it is the latest, which a run starts from: keep
        it and its values as bases its puts may extend (they reuse the value's items).
        `remember`: keep its list values decoded for the next reads (a newest-first walk
        does not: an older version never extends a newer one)."""
        checkpoint, depth = self._checkpoint(name, view, saved)
        handed = _Bases(Decoded(saved.id, _copied(checkpoint), depth)) if hand_out else None
        values: dict[str, Any] = {}
        for ch, version in checkpoint["channel_versions"].items():
            key = (saved.ns, ch, version)
            present, value = decode(self.serde, view.blobs, key, self._known(name, saved.ns, ch))
            if remember and present and isinstance(value, list):
                self._remember_value((name, saved.ns, ch, version), value)
            if present:
                values[ch] = value
                if handed is not None and (prev := previous_of(view.blobs, key, value)):
                    handed.values[ch] = prev
        if handed is not None:
            self._handed[(name, saved.ns)] = handed
        metadata = self.serde.loads_typed((saved.metadata[0], unpack(saved.metadata[1])))
        writes = [
            (w.task_id, w.channel, loads(self.serde, w.value[0], w.value[1]))
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
        """Versions of a channel held decoded: recent reads, the delta bases."""
        known = {
            v: items for (n, s, c, v), items in self._recent.items() if (n, s, c) == (name, ns, ch)
        }
        for bases in self._bases_of(name, ns):
            if (prev := bases.values.get(ch)) is not None:
                known[prev.version] = prev.items
        return known

    def _bases_of(self, name: str, ns: str) -> builtins.list[_Bases]:
        """What the saver holds decoded of a namespace: handed out, written (only looked at)."""
        key = (name, ns)
        return [b for b in (self._handed.get(key), self._written.get(key)) if b is not None]

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
            held = [b.checkpoint for b in self._bases_of(name, cur.ns) if b.checkpoint]
            last = next((cp for cp in held if cp.id == cur.id), None)
            if last is not None:
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
        for link in reversed(chain):
            value = apply_diff(value, link.checkpoint[1])
        return _copied(value), depth + len(chain)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, of one thread (or all), filtered by metadata and `before`.

        Streams: each tuple (its channel values decoded) is built when the caller asks
        for it, so listing a long thread holds one tuple at a time, not the whole history.
        The lock is held while a thread is read and while one tuple is built, never
        across a yield: a caller may write between two tuples.
        """
        conf = config["configurable"] if config else {}
        ns = conf.get("checkpoint_ns")
        cid = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        if "thread_id" in conf:
            tids = [str(conf["thread_id"])]
        else:
            with self._lock:
                tids = self._store.threads()
        left = limit
        for tid in tids:
            with self._lock:
                name, thread = self._store.read(tid)
                # The thread as of this read: later reads (a write, a rewind) do not change it.
                view = thread.view.frozen()
                chosen: builtins.list[Saved] = []
                for saved in view.newest_first(None if ns is None else str(ns)):
                    if left is not None and len(chosen) >= left:
                        break
                    if cid and saved.id != cid:
                        continue
                    if before_id and saved.id >= before_id:
                        continue
                    if filter and not self._matches(saved, filter):
                        continue
                    chosen.append(saved)
            for saved in chosen:
                with self._lock:
                    tup = self._tuple(name, tid, view, saved, remember=False)
                yield tup
            if left is not None:
                left -= len(chosen)
                if left <= 0:
                    return

    def _matches(self, saved: Saved, filter: dict[str, Any]) -> bool:
        md = self.serde.loads_typed((saved.metadata[0], unpack(saved.metadata[1])))
        return all(md.get(k) == v for k, v in filter.items())

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
        self._store.submit(
            Op(
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
            encoded.append([idx, channel, *stored(*self.serde.dumps_typed(value))])
        payload = {
            "lg": "writes",
            "ns": ns,
            "id": conf["checkpoint_id"],
            "task": task_id,
            "path": task_path,
            "w": encoded,
        }
        self._store.submit(Op(tid, constant([step(payload)])))

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread: an appended tombstone (turn.ended); retention GC frees its bytes."""
        with self._lock:
            self._close_thread(str(thread_id), "deleted")

    def _close_thread(self, tid: str, label: str) -> None:
        """End the thread as it is now (read first: a delete is not fenced on an older read)."""
        name, _ = self._store.read(tid)
        self._store.submit(Op(tid, lambda _, view: ending(KIND, view, label), opens=False))
        self._forget(name)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop the checkpoints (and their writes) of these runs, in every thread: tombstones."""
        runs = sorted(set(run_ids))
        if not runs:
            return
        tombstone = [step({"lg": "drop_runs", "runs": runs})]

        def drop(name: str, view: ThreadView) -> builtins.list[Event]:
            return tombstone if view.open and view.run_ids() & set(runs) else []

        with self._lock:
            for tid in self._store.threads():
                name, thread = self._store.read(tid)
                if drop(name, thread.view):
                    self._store.submit(Op(tid, drop, opens=False))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread into another (records replayed as-is)."""
        with self._lock:
            _, src = self._store.read(str(source_thread_id))
            # Without what a put says it needs: the source's seqs, not the copy's.
            copied = [step(_uncounted(e["input"])) for e in since_opened(TURN, src.view)]
            if copied:
                self._store.submit(Op(str(target_thread_id), constant(copied)))

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
                name, thread = self._store.read(tid)
                view = thread.view
                kept = [s for ns in view.checkpoints if (s := view.latest(ns)) is not None]
                if not kept:
                    continue
                fresh = [self._rewrite(name, tid, view, saved) for saved in kept]
                self._close_thread(tid, "pruned")
                for events in fresh:
                    self._store.submit(Op(tid, constant(events)))

    def _rewrite(self, name: str, tid: str, view: ThreadView, saved: Saved) -> builtins.list[Event]:
        """The records that put `saved` again, every value whole, with its pending writes."""
        tup = self._tuple(name, tid, view, saved)
        checkpoint = tup.checkpoint
        stored = checkpoint["channel_versions"].items()
        versions = {ch: v for ch, v in stored if (saved.ns, ch, v) in view.blobs}
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
            events.append(step({**data, "w": ws}))
        return events

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A zero-padded count, then a random part: a fork from a past checkpoint never
        reuses a stored version (as InMemorySaver's). Short (versions.py): every
        checkpoint record repeats the versions it changed several times over."""
        return next_version(current)

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
        it = self.list(config, filter=filter, before=before, limit=limit)
        while (tup := await asyncio.to_thread(next, it, None)) is not None:
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


class _Unsure:
    """A cold read could not be sure of its answer: read the whole thread."""


_UNSURE: Final = _Unsure()


def _needs(
    view: ThreadView,
    ns: str,
    versions: dict[str, Any],
    written: dict[str, dict[str, Any]],
    parent: str | None,
) -> set[int] | None:
    """The seqs of the records a read of a checkpoint needs, besides its own put: its
    chain of diffs (`parent`: what it is a diff of), the records of each channel
    version. None when one is not held, or they are too many to list."""
    out: set[int] = set()
    if parent is not None:
        saved = view.stored.get((ns, parent))
        if saved is None or saved.chain is None:
            return None
        out.update(saved.chain)
        out.add(saved.seq)
    for ch, version in versions.items():
        record = written.get(ch)
        if record is not None and record["v"] == version:
            if "ref" in record:  # its parts go in this request: their seqs are not known
                return None
            if "base" not in record:
                continue
            held = view.blobs.get((ns, ch, record["base"]))
        else:
            held = view.blobs.get((ns, ch, version))
        if held is None or held.need is None:
            return None
        out.update(held.need)
    return out if len(out) <= NEED_MAX else None


def _uncounted(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("need", "need_of")}


def _config(tid: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _replayed(events: Sequence[dict[str, Any]]) -> ThreadView:
    """A view of some of a thread's records, in seq order (a cold read's findings)."""
    view = ThreadView()
    for event in events:
        view.apply(event)
    return view


def _copied(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A copy LangGraph may change in place (it does, to the nested version maps) safely."""
    out = dict(checkpoint)
    if isinstance(out.get("channel_versions"), dict):
        out["channel_versions"] = dict(out["channel_versions"])
    if isinstance(out.get("versions_seen"), dict):
        out["versions_seen"] = {k: dict(v) for k, v in out["versions_seen"].items()}
    return out

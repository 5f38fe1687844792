"""One LangGraph thread as reynd holds it: the agent's records replayed into an index (pure).

A thread is one external agent (see `names`), its lifecycle as every external
agent's (`reynctl.external.view`): open while turn `lg` is in flight. Its
records, on the active lineage, in order:

- `agent.created` (session `langgraph`, options `{"thread_id": ...}`), then
  `message.received` + `turn.started` (turn `lg`): the thread is open.
- `step.started` of turn `lg`, one per saver operation, its `input` one of:
  `{"lg": "put", ...}` a checkpoint (id, parent, metadata, the channel values
  that changed: `blobs`; `need`: the seqs of the records a read of it needs
  besides itself, or only those that the put at seq `need_of`'s own `need`
  lacks, ascending, each but the first as the gap from the one before;
  absent from an older saver's puts and from copies); `{"lg":
  "writes", ...}` pending writes of a task;
  `{"lg": "drop_runs", "runs": [...]}` a tombstone for delete_for_runs;
  `{"lg": "part", ...}` a piece of a value too large for one request.
- `skill.started` (run `lg`, skill `langgraph`) with the turn, then after each
  put a `skill.phase` naming the checkpoint (`loop step 3`): a `phase`
  generation, so `reynctl generations`, `rewind` to it and the TUI's
  timeline show LangGraph checkpoints. `skill.ended` before the turn ends.
- `turn.ended` of turn `lg`: delete_thread (everything before it is gone;
  once the WAL floor passes it, retention GC deletes the bytes). A later put
  opens the thread again with a new `turn.started`.

A rewind cuts records off the active lineage: `ThreadView.rebuild` replays
what is left.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from reynctl.external.records import pack, unpack
from reynctl.external.view import AgentView
from reynctl.langgraph.names import KIND

__all__ = ["TURN", "Blob", "Saved", "ThreadView", "Write", "gaps", "pack", "seqs", "unpack"]

TURN: Final = KIND.turn  # the turn id (and message id) of an open thread
WRITES_IDX: Final = {"__error__": -1, "__scheduled__": -2, "__interrupt__": -3, "__resume__": -4}


def gaps(values: Iterable[int]) -> list[int]:
    """Seqs as a put's `need` keeps them: ascending, each but the first as the gap from the
    one before (a few digits each, where a seq in a long-lived daemon has many)."""
    ordered = sorted(values)
    return ordered[:1] + [b - a for a, b in itertools.pairwise(ordered)]


def seqs(listed: Iterable[int]) -> list[int]:
    """The seqs a `need` list holds (`gaps` undone)."""
    return list(itertools.accumulate(listed))


@dataclass(slots=True)
class Saved:
    """A checkpoint as put: serialized parts, decoded on read."""

    seq: int
    ns: str
    id: str
    parent: str | None
    # Without channel_values: (serde type, packed bytes), or (parent id, diff) when
    # `is_diff` (checkpoints.py).
    checkpoint: tuple[str, Any]
    metadata: tuple[str, str]
    run_id: str | None
    is_diff: bool = False
    # The seqs of the puts its chain of diffs leads through (None: one is not held).
    chain: tuple[int, ...] | None = ()
    # What the record says a read of it needs (`need`, relative to `need_of`'s own
    # list when that is set); None: an older record, which says nothing.
    need: tuple[int, ...] | None = None
    need_of: int | None = None


@dataclass(slots=True)
class Write:
    task_id: str
    channel: str
    value: tuple[str, str]
    task_path: str


@dataclass(slots=True)
class Blob:
    """One version of one channel: a whole value, or items appended to `base`'s list."""

    type: str
    data: str  # packed bytes (joined from its parts when it was split)
    base: Any = None  # the version this one extends, or None: a whole value
    depth: int = 0  # deltas since the last whole value
    acc: int = 0  # bytes of those deltas
    whole: int = 0  # bytes of that whole value
    # The seqs of the records its value is read from: its put, its parts, its bases'
    # (None: a base is not held).
    need: tuple[int, ...] | None = ()


@dataclass
class ThreadView(AgentView):
    """The thread's checkpoints, writes and channel values as of the records applied."""

    TURN: ClassVar[str] = TURN

    thread_id: str | None = None
    checkpoints: dict[str, dict[str, Saved]] = field(default_factory=dict)  # ns -> id -> saved
    # Every checkpoint put since the thread opened, dropped runs too: the base of a diff.
    stored: dict[tuple[str, str], Saved] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], Write]] = field(default_factory=dict)
    blobs: dict[tuple[str, str, Any], Blob] = field(default_factory=dict)
    parts: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # ref -> (seq, data)
    # The last put whose record lists all that a read of it needs: (its seq, that list).
    full: tuple[int, frozenset[int]] | None = None

    def _created(self, options: dict[str, Any]) -> None:
        self.thread_id = options.get("thread_id")

    def _clear(self) -> None:  # delete_thread, or prune's fresh start
        self.checkpoints.clear()
        self.stored.clear()
        self.writes.clear()
        self.blobs.clear()
        self.parts.clear()
        self.full = None

    def _step(self, seq: int, data: dict[str, Any]) -> None:
        op = data.get("lg")
        if op == "put":
            self._put(seq, data)
        elif op == "writes":
            self._writes(data)
        elif op == "drop_runs":
            self._drop_runs(set(data.get("runs", ())))
        elif op == "part":
            self.parts.setdefault(data["ref"], []).append((seq, data["b"]))

    def _put(self, seq: int, d: dict[str, Any]) -> None:
        ns = d["ns"]
        for ch, b in d.get("blobs", {}).items():
            data = b.get("b", "")
            own: tuple[int, ...] = (seq,)
            if "ref" in b:  # split across `part` records, written just before
                parts = self.parts.pop(b["ref"], [])
                data = "".join(p for _, p in parts) + data
                own = (seq, *(s for s, _ in parts))
            base = b.get("base")
            need: tuple[int, ...] | None = own
            if base is not None:
                held = self.blobs.get((ns, ch, base))
                need = None if held is None or held.need is None else own + held.need
            self.blobs[(ns, ch, b["v"])] = Blob(
                b["t"],
                data,
                base,
                b.get("depth", 0),
                b.get("acc", 0),
                b.get("whole", 0),
                need,
            )
        is_diff = "cpd" in d
        cp = d["cpd"] if is_diff else d["cp"]
        chain: tuple[int, ...] | None = ()
        if is_diff:
            parent = self.stored.get((ns, cp[0]))
            chain = None if parent is None or parent.chain is None else (*parent.chain, parent.seq)
        need_list = None if d.get("need") is None else seqs(d["need"])
        saved = Saved(
            seq,
            ns,
            d["id"],
            d.get("parent"),
            (cp[0], cp[1]),
            (d["md"][0], d["md"][1]),
            d.get("run"),
            is_diff,
            chain,
            None if need_list is None else tuple(need_list),
            d.get("need_of"),
        )
        if need_list is not None and saved.need_of is None:
            self.full = (seq, frozenset(need_list))
        self.checkpoints.setdefault(ns, {})[d["id"]] = saved
        self.stored[(ns, d["id"])] = saved

    def _writes(self, d: dict[str, Any]) -> None:
        key = (d["ns"], d["id"])
        stored = self.writes.setdefault(key, {})
        task_id, path = d["task"], d.get("path", "")
        for idx, channel, type_, data in d["w"]:
            inner = (task_id, WRITES_IDX.get(channel, idx))
            # A regular write is kept once (a retried task repeats it); special
            # ones (error, interrupt...) are replaced, as LangGraph's own savers do.
            if inner[1] >= 0 and inner in stored:
                continue
            stored[inner] = Write(task_id, channel, (type_, data), path)

    def _drop_runs(self, runs: set[str]) -> None:
        for ns, saved in self.checkpoints.items():
            for cid in [c for c, s in saved.items() if s.run_id in runs]:
                del saved[cid]
                self.writes.pop((ns, cid), None)

    def frozen(self) -> ThreadView:
        """A copy that later records do not change (a list streams from it); the records
        themselves are shared, never changed in place."""
        return ThreadView(
            exists=self.exists,
            open=self.open,
            phases=self.phases,
            thread_id=self.thread_id,
            checkpoints={ns: dict(saved) for ns, saved in self.checkpoints.items()},
            stored=dict(self.stored),
            writes={key: dict(w) for key, w in self.writes.items()},
            blobs=dict(self.blobs),
        )

    # -- queries -------------------------------------------------------------------------

    def latest(self, ns: str) -> Saved | None:
        saved = self.checkpoints.get(ns)
        return saved[max(saved)] if saved else None

    def newest_first(self, ns: str | None) -> list[Saved]:
        """Checkpoints of `ns` (None: every namespace), newest id first."""
        spaces = self.checkpoints if ns is None else {ns: self.checkpoints.get(ns, {})}
        out = [s for saved in spaces.values() for s in saved.values()]
        out.sort(key=lambda s: s.id, reverse=True)
        return out

    def pending(self, ns: str, checkpoint_id: str) -> list[Write]:
        """The checkpoint's pending writes in LangGraph's order (writes_sort_key)."""
        stored = self.writes.get((ns, checkpoint_id), {})
        return [stored[k] for k in sorted(stored, key=lambda k: (stored[k].task_path, *k))]

    def run_ids(self) -> set[str]:
        return {s.run_id for saved in self.checkpoints.values() for s in saved.values() if s.run_id}

"""Shared helpers of the storage tests: a brute-force model of the log and its state.

`LogModel` is deliberately naive and independent of the code under test: it
keeps every record with its parent pointer, computes lineage, activity and
branch by following those pointers seq by seq, and computes the state as of
any seq with its own tiny reducer over `Op` tuples (not `reynd.core.reduce`).
The tests compare the real `Store` / `Lineage` against it.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

import msgspec

from reynd.protocol import events as ev
from reynd.protocol.state import RuntimeState
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

AGENTS = ("a", "b")

# -- operations and their events ---------------------------------------------------------

# ("create", agent) | ("msg", agent, message_id, text) | ("turn_start", agent, turn_id, message_id)
# | ("step", agent, turn_id, reply) | ("turn_end", agent, turn_id)
# | ("files", agent, path): a workspace.files record (the workspace's, not the agent's state)
Op = tuple[str, ...]


def to_event(op: Op) -> ev.Event:
    kind, agent = op[0], op[1]
    if kind == "create":
        return ev.AgentCreated(agent=agent)
    if kind == "msg":
        return ev.MessageReceived(agent=agent, message_id=op[2], text=op[3])
    if kind == "turn_start":
        return ev.TurnStarted(agent=agent, turn_id=op[2], message_id=op[3])
    if kind == "step":
        return ev.StepCommitted(
            agent=agent,
            turn_id=op[2],
            step=0,
            messages=(ev.Message(role="assistant", content=op[3]),),
        )
    if kind == "turn_end":
        return ev.TurnEnded(agent=agent, turn_id=op[2], label=f"turn {op[2]}")
    if kind == "files":
        return ev.WorkspaceFiles(ops=(ev.FileOp(op[2], "-", 0, "", 0),))
    raise ValueError(op)


class AgentModel(NamedTuple):
    inbox: tuple[tuple[str, str], ...] = ()
    history: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    turns: int = 0


ModelState = dict[str, AgentModel]


def model_apply(state: ModelState, op: Op) -> ModelState:
    """The independent reducer: a new dict, the old one untouched."""
    out = dict(state)
    kind, agent = op[0], op[1]
    if kind == "files":
        return out
    if kind == "create":
        out[agent] = AgentModel()
        return out
    a = out[agent]
    if kind == "msg":
        out[agent] = a._replace(inbox=(*a.inbox, (op[2], op[3])))
    elif kind == "turn_start":
        text = next(t for mid, t in a.inbox if mid == op[3])
        inbox = list(a.inbox)
        inbox.remove((op[3], text))
        out[agent] = a._replace(
            inbox=tuple(inbox), history=(*a.history, text), pending=(*a.pending, op[2])
        )
    elif kind == "step":
        out[agent] = a._replace(history=(*a.history, op[3]))
    elif kind == "turn_end":
        out[agent] = a._replace(
            pending=tuple(t for t in a.pending if t != op[2]), turns=a.turns + 1
        )
    else:
        raise ValueError(op)
    return out


def summarize(state: RuntimeState) -> ModelState:
    """The parts of a real RuntimeState that the model tracks."""
    return {
        name: AgentModel(
            inbox=tuple((i.message_id, i.text) for i in a.inbox),
            history=tuple(m.content for m in a.history),
            pending=tuple(c.turn_id for c in a.pending_chains),
            turns=a.turns_completed,
        )
        for name, a in state.agents.items()
    }


# -- the brute-force log model ------------------------------------------------------------


@dataclass
class LogModel:
    """Records 1..head: an Op, or a reset target (int). Everything by parent pointers."""

    records: list[Op | int] = field(default_factory=list)
    _states: dict[int, ModelState] = field(default_factory=lambda: {0: {}})
    _counter: int = 0

    @property
    def head(self) -> int:
        return len(self.records)

    def add(self, op: Op) -> int:
        self.records.append(op)
        seq = self.head
        self._states[seq] = model_apply(self._states[seq - 1], op)
        return seq

    def add_reset(self, target: int) -> int:
        assert 0 <= target < self.head + 1
        self.records.append(target)
        seq = self.head
        self._states[seq] = self._states[target]
        return seq

    def is_reset(self, seq: int) -> bool:
        return isinstance(self.records[seq - 1], int)

    def parent(self, seq: int) -> int:
        rec = self.records[seq - 1]
        return rec if isinstance(rec, int) else seq - 1

    def lineage(self, seq: int) -> list[int]:
        """seq, parent(seq), ... down to 0."""
        out = [seq]
        while seq > 0:
            seq = self.parent(seq)
            out.append(seq)
        return out

    def active_set(self) -> set[int]:
        return set(self.lineage(self.head))

    def branch_of(self, seq: int) -> int:
        for s in self.lineage(seq):
            if s > 0 and self.is_reset(s):
                return s
        return 0

    def state(self, seq: int) -> ModelState:
        return self._states[seq]

    def tip_state(self) -> ModelState:
        return self._states[self.head]

    # -- generating valid operations at the tip --------------------------------------

    def next_ops(self, rng: random.Random, agent: str | None = None) -> list[Op]:
        """One valid step of the workload for `agent` at the tip (creates it if needed)."""
        state = self.tip_state()
        agent = agent or rng.choice(AGENTS)
        a = state.get(agent)
        if a is None:
            return [("create", agent)]
        self._counter += 1
        n = self._counter
        if a.pending:
            turn = a.pending[0]
            return [("step", agent, turn, f"reply {n}"), ("turn_end", agent, turn)]
        if a.inbox and rng.random() < 0.4:
            return [("turn_start", agent, f"t{n}", a.inbox[0][0])]
        return [("msg", agent, f"m{n}", f"hello {n} " + "x" * (n % 13))]


def opts(**kw: int) -> StorageOptions:
    """Small segments (rotation) and a small snapshot threshold by default."""
    base: dict[str, int] = {"segment_bytes": 4096, "snapshot_min_bytes": 1024}
    base.update(kw)
    return StorageOptions(**base)


def append_ops(store: Store, model: LogModel, ops: Sequence[Op]) -> list[int]:
    """Append ops as one batch to the store and the model; check the seqs agree."""
    written = store.append([to_event(op) for op in ops])
    seqs = [model.add(op) for op in ops]
    assert [e.seq for e in written] == seqs
    return seqs


def build_log(
    root: Path,
    n: int,
    *,
    seed: int = 0,
    options: StorageOptions | None = None,
    snapshot_every: int = 0,
    files_every: int = 0,
) -> LogModel:
    """Write about `n` plain records (no resets) to a fresh store and close it; with
    `files_every`, a workspace.files record every that many records or so."""
    rng = random.Random(seed)
    model = LogModel()
    with Store.open(root, options or opts()) as store:
        while model.head < n:
            files = files_every and (model.head + 1) % files_every == 0
            for op in [("files", "a", f"f{model.head}")] if files else model.next_ops(rng):
                append_ops(store, model, [op])
                if snapshot_every and model.head % snapshot_every == 0:
                    store.snapshot_now()
    return model


def wal_dir(root: Path) -> Path:
    return root / "state" / "wal"


def snap_dir(root: Path) -> Path:
    return root / "state" / "snapshots"


def segments(root: Path) -> list[Path]:
    return sorted(wal_dir(root).glob("*.jsonl"))


def record_spans(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each line of a segment (records are one per line)."""
    data = path.read_bytes()
    spans = []
    pos = 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        spans.append((pos, nl + 1))
        pos = nl + 1
    return spans


def flip(path: Path, offset: int, mask: int = 0x01) -> None:
    """XOR one byte of a file in place."""
    with path.open("r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))
        f.flush()
        os.fsync(f.fileno())


def truncate(path: Path, length: int) -> None:
    os.truncate(path, length)


def read_all(store: Store) -> list[ev.Event]:
    return list(store.wal.read(1, store.head)) if store.head else []


def lineage_sample(head: int, limit: int = 40) -> Iterable[int]:
    """Every seq when the log is short, else a spread sample plus the last few."""
    if head + 1 <= limit:
        return range(head + 1)
    step = max(1, head // (limit - 10))
    return sorted({*range(0, head + 1, step), *range(max(0, head - 9), head + 1)})


def scripted_op(i: int) -> Op:
    """The i-th event (0-based) of the crash workers' deterministic append stream."""
    if i == 0:
        return ("create", "a")
    return ("msg", "a", f"m{i}", f"text {i} " + "y" * (i % 17))


def same_event(got: ev.Event, want: ev.Event) -> bool:
    """Equal up to the append timestamp."""
    return bool(msgspec.structs.replace(got, ts=0.0) == msgspec.structs.replace(want, ts=0.0))


def CLOCK() -> float:
    """A fixed time for stores driven by hypothesis state machines.

    Record sizes (and so where segments and snapshots are cut, which the
    machines' preconditions and draws depend on) must not follow the wall
    clock: hypothesis replays an example and requires the same draws.
    """
    return 1_796_000_000.0


def count_calls(fn: Any, *args: Any) -> int:
    """Python and C function calls made while running fn(*args) (a deterministic cost)."""
    count = 0

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(prof)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return count


# -- segment indexes: a store opened through them vs one opened by a full scan ----------------


def index_dir(root: Path) -> Path:
    return root / "state" / "index"


def index_files(root: Path) -> list[Path]:
    return sorted(index_dir(root).glob("*.idx")) if index_dir(root).is_dir() else []


def without_index(root: Path, dest: Path) -> Path:
    """A copy of the state directory `root` without its segment indexes (a full scan opens it)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns("LOCK"))
    if index_dir(dest).exists():
        shutil.rmtree(index_dir(dest))
    return dest


def store_view(store: Store, *, every_seq: bool = True) -> dict[str, object]:
    """Everything an open rebuilds, and the state as of every seq (or the error it gives)."""
    lin = store.lineage
    view: dict[str, object] = {
        "head": store.head,
        "floor": store.floor,
        "resets": lin.resets,
        "active": lin.active_intervals(),
        "branches": lin.branches(),
        "catalog": list(store.catalog.newest_first()),
        "file_ops": store.file_ops.between(0, store.head),
        "active_generations": list(store.generations()),
        "segments": [(s.first_seq, list(s.offsets), s.size, s.last_ts) for s in store.wal.segments],
        "snapshots": list(store.snapshots.seqs),
        "tip": msgspec.to_builtins(store.state),
    }
    if every_seq:
        states: list[object] = []
        for s in range(store.head + 1):
            try:
                states.append(msgspec.to_builtins(store.state_as_of(s)))
            except Exception as exc:  # BelowFloor under retention: the same error both ways
                states.append(type(exc).__name__)
        view["states"] = states
    return view


def assert_same_as_full_scan(store: Store, root: Path, scratch: Path) -> None:
    """`store` (opened on `root`, through its indexes) equals a full-scan open of a copy."""
    copy = without_index(root, scratch)
    with Store.open(copy, store.options) as full:
        assert full.recovery.indexed == 0
        want = store_view(full)
    got = store_view(store)
    for key in want:
        assert got[key] == want[key], key


def frame_chunk(payload: object, first: int, count: int, version: int) -> bytes:
    """A segment index chunk of any `version` around any payload, its checksums right."""
    body = msgspec.msgpack.encode(payload)
    if version >= 5:  # deflated from version 5 on
        body = zlib.compress(body)
    head = struct.pack("<8sIQQQI", b"REYNSIDX", version, first, count, len(body), zlib.crc32(body))
    return head + struct.pack("<I", zlib.crc32(head)) + body

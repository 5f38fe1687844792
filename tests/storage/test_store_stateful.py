"""A hypothesis state machine driving a real Store on disk against LogModel.

Rules: append (agent events that start and end turns, so generations are cut),
rewind (active target; NotActive for an abandoned one), checkout (undo or
fork-switch), snapshot, reopen from disk, and crash-reopen (close, then leave
what a crash leaves: a torn record at the tail and a half-written snapshot).
After every step every seq's active flag and branch, a sample of as-of states,
the reconstruct plan's snapshot choice and the tip state are checked.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import (
    AGENTS,
    CLOCK,
    LogModel,
    append_ops,
    lineage_sample,
    opts,
    segments,
    snap_dir,
    summarize,
    to_event,
)
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from reynd.protocol import errors
from reynd.storage.framing import encode_frame
from reynd.storage.store import Store

OPTIONS = opts(segment_bytes=4096, snapshot_min_bytes=1500)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="reynd-sm-"))
        self.root = self.dir / "reyn"
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        self.model = LogModel()
        self.rng = random.Random(0)
        self.resets = 0

    def teardown(self) -> None:
        event(f"head>={self.model.head // 20 * 20}")
        event(f"segments={len(segments(self.root))}")
        event(f"resets={len(self.store.lineage.resets) // 3 * 3}+")
        event(f"snapshots={len(self.store.snapshots.seqs)}")
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules ------------------------------------------------------------------------

    @initialize(n=st.integers(0, 12))
    def seed_log(self, n: int) -> None:
        while self.model.head < n:
            append_ops(self.store, self.model, self.model.next_ops(self.rng))

    @rule(agent=st.sampled_from(AGENTS), steps=st.integers(1, 6), batch=st.booleans())
    def append(self, agent: str, steps: int, batch: bool) -> None:
        ops = []
        for _ in range(steps):
            nxt = self.model.next_ops(self.rng, agent)
            if batch:
                ops.extend(nxt)
                # Later ops of the batch must be valid on top of the earlier ones.
                for op in nxt:
                    self.model.add(op)
            else:
                append_ops(self.store, self.model, nxt)
        if batch:
            # Undo the provisional model adds, then append the whole batch in one go.
            del self.model.records[-len(ops) :]
            written = self.store.append([to_event(op) for op in ops])
            seqs = [self.model.add(op) for op in ops]
            assert [e.seq for e in written] == seqs
        if self.store.snapshot_due():
            self.store.snapshot_now()

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data())
    def rewind_to_active(self, data: st.DataObject) -> None:
        active = sorted(self.model.active_set() - {self.model.head})
        target = data.draw(st.sampled_from(active), label="target")
        record = self.store.rewind(target)
        seq = self.model.add_reset(target)
        assert (record.seq, record.target_n, record.supersedes) == (seq, target, seq - 1)

    @precondition(lambda self: len(self.model.active_set()) < self.model.head + 1)
    @rule(data=st.data())
    def rewind_to_abandoned_is_refused(self, data: st.DataObject) -> None:
        abandoned = sorted(set(range(self.model.head + 1)) - self.model.active_set())
        target = data.draw(st.sampled_from(abandoned), label="target")
        with pytest.raises(errors.NotActive, match=f"checkout {target}"):
            self.store.rewind(target)
        assert self.store.head == self.model.head

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.model.head - 1), label="target")
        expected_mode = "undo" if target in self.model.active_set() else "fork_switch"
        mode, record = self.store.checkout(target)
        seq = self.model.add_reset(target)
        assert mode == expected_mode
        assert (record.seq, record.target_n, record.mode) == (seq, target, "checkout")

    @rule()
    def rewind_to_tip_is_nothing_to_do(self) -> None:
        with pytest.raises((errors.NothingToDo, errors.SeqOutOfRange)):
            self.store.rewind(self.model.head)
        with pytest.raises(errors.SeqOutOfRange):
            self.store.checkout(self.model.head + 1)
        assert self.store.head == self.model.head

    @precondition(lambda self: self.model.head > 0)
    @rule()
    def snapshot_now(self) -> None:
        seq = self.store.snapshot_now()
        assert seq == self.model.head
        assert seq in self.store.snapshots.seqs

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        assert self.store.recovery.torn_bytes == 0

    @rule(cut=st.integers(1, 200))
    def crash_and_reopen(self, cut: int) -> None:
        """Leave what a kill leaves: a torn unacknowledged record, a tmp snapshot."""
        self.store.close()
        frame = encode_frame(b'{"kind":"message.received","seq":%d}' % (self.model.head + 1))
        torn = frame[: min(cut, len(frame) - 1)]
        last = segments(self.root)[-1] if segments(self.root) else None
        if last is not None:
            with last.open("ab") as f:
                f.write(torn)
        tmp = snap_dir(self.root) / f".tmp-{self.model.head + 1:020d}.snap"
        tmp.write_bytes(b"REYNSNAP half")
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)
        if last is not None:
            assert self.store.recovery.torn_bytes == len(torn)
            saved = self.store.recovery.torn_saved_to
            assert saved is not None
            assert saved.read_bytes() == torn
        assert not tmp.exists()

    @precondition(lambda self: self.store.snapshots.seqs)
    @rule(data=st.data())
    def damage_a_snapshot_and_reopen(self, data: st.DataObject) -> None:
        """Plain damage to a snapshot's payload: it is set aside, an older one serves."""
        seq = data.draw(st.sampled_from(self.store.snapshots.seqs), label="snapshot")
        self.store.close()
        path = self.store.snapshots.path(seq)
        raw = bytearray(path.read_bytes())
        raw[32 + (len(raw) - 32) // 2] ^= 0xFF
        path.write_bytes(bytes(raw))
        self.store = Store.open(self.root, OPTIONS, clock=CLOCK)

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def head_and_tip_state_match(self) -> None:
        assert self.store.head == self.model.head
        assert self.store.state.seq == self.model.head
        assert summarize(self.store.state) == self.model.tip_state()

    @invariant()
    def every_seq_active_flag_and_branch(self) -> None:
        active = self.model.active_set()
        lin = self.store.lineage
        for s in range(self.model.head + 1):
            assert lin.is_active(s) == (s in active), s
            assert lin.branch_of(s) == self.model.branch_of(s), s

    @invariant()
    def as_of_states_and_plans(self) -> None:
        snaps = self.store.snapshots.seqs
        for s in lineage_sample(self.model.head, limit=25):
            on_path = [x for x in self.model.lineage(s) if x in snaps]
            assert self.store.plan(s).snapshot == max(on_path, default=0), s
            assert summarize(self.store.state_as_of(s)) == self.model.state(s), s
        assert self.store.head == self.model.head  # as-of reads never move the tip


StoreMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_store_state_machine = StoreMachine.TestCase

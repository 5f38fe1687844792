"""As-of reads from states kept in memory answer exactly what a reconstruct from the log does.

reynd/daemon/as_of.py keeps forks of the tip as it moves, forks taken on the way
of each replay, the states read and the snapshots decoded, and builds a read
from the nearest of them on the target's lineage. A real Store in a temporary
directory takes random runs of appends, rewinds, checkouts and snapshots (the
commit hook called after each, as the daemon does), and random reads in random
order, of active and abandoned seqs: each must equal `Store.state_as_of`, the
uncached reconstruct, and no read may change a state handed out before.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reynd.daemon.as_of import AsOf
from reynd.daemon.coordinator import Gate
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store

# (what, how much): append n turns' records, rewind/checkout to a pick, snapshot, read a pick
ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "rewind", "checkout", "snapshot", "read", "read"]),
        st.integers(0, 10**6),
    ),
    max_size=30,
)


def _turn(i: int) -> list[ev.Event]:
    t = f"t{i}"
    return [
        ev.MessageReceived(agent="a", message_id=t, text=f"hello {i}"),
        ev.TurnStarted(agent="a", turn_id=t, message_id=t),
        ev.StepCommitted(
            agent="a", turn_id=t, step=0, messages=(ev.Message(role="assistant", content=t),)
        ),
        ev.TurnEnded(agent="a", turn_id=t),
    ]


def _exercise(root: Path, script: list[tuple[str, int]], every: int) -> None:
    store = Store.open(root, StorageOptions(snapshot_min_bytes=1 << 40))
    with store:
        as_of = AsOf(store, Gate(), every=every)
        store.append([ev.AgentCreated(agent="a")])
        handed: list[tuple[int, bytes, object]] = []  # (seq, encoding, the state handed out)

        async def read(seq: int) -> None:
            state = await as_of.read(seq)
            expected = store.state_as_of(seq)
            assert msgspec.to_builtins(state) == msgspec.to_builtins(expected), seq
            if seq != store.head:  # the tip's is the live state, which moves on
                handed.append((seq, msgspec.msgpack.encode(state), state))

        for i, (op, pick) in enumerate(script):
            if op == "append":
                for k in range(pick % 3 + 1):
                    as_of.committed(store.append(_turn(i * 10 + k)))
            elif op == "snapshot":
                store.snapshot_now()
            elif op in ("rewind", "checkout") and store.head > 1:
                target = pick % store.head
                try:
                    event = store.rewind(target) if op == "rewind" else store.checkout(target)[1]
                except (errors.NotActive, errors.NothingToDo):
                    continue
                as_of.committed([event])
            elif op == "read":
                trio.run(read, pick % (store.head + 1))
        for seq in range(store.head + 1):  # every seq, in the end, each read twice
            trio.run(read, seq)
            trio.run(read, seq)
        for seq, encoded, state in handed:
            assert msgspec.msgpack.encode(state) == encoded, f"the state of {seq} changed"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.sampled_from([1, 2, 5]))
def test_kept_states_answer_as_the_log_does(script: list[tuple[str, int]], every: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _exercise(Path(tmp), script, every)


def test_a_read_below_the_floor_is_refused_though_a_state_is_kept(tmp_path: Path) -> None:
    """A kept state never answers what the log refuses: a seq outside 0..head."""
    with Store.open(tmp_path) as store:
        as_of = AsOf(store, Gate(), every=1)
        as_of.committed(store.append([ev.AgentCreated(agent="a")]))
        as_of.committed(store.append(_turn(0)))
        assert as_of.kept  # the tip was forked
        with pytest.raises(errors.SeqOutOfRange):
            trio.run(as_of.read, store.head + 1)

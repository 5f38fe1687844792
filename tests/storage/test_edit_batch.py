"""Edit and retry's batch (issue 25): a reset record and the messages after it, cut anywhere.

`rewind {then, reapply}` stages the reset record and the messages that
follow it as one atomic batch. Here a real Store builds a random history of
messages and moves, appends such a batch, and a copy of its log cut at a
random byte inside the batch (what a SIGKILL part-way through the write
leaves) is reopened for real: recovery keeps the whole batch or none of it,
and the state is the one before the move or the one after, never between.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from helpers import opts, segments
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.protocol import events as ev
from reynd.storage.store import Store

_OPTS = opts(segment_bytes=1 << 20, snapshot_min_bytes=1 << 30)  # one segment, no snapshot


def _inbox(store: Store) -> list[str]:
    agent = store.state.agents.get("a")
    return [] if agent is None else [m.message_id for m in agent.inbox]


def _history(store: Store, script: list[int | None]) -> None:
    """Messages (None) and checkouts (k: to k mod (head + 1)), after agent a's creation."""
    store.append([ev.AgentCreated(agent="a")])
    for i, item in enumerate(script):
        if item is None:
            store.append([ev.MessageReceived(agent="a", message_id=f"h{i}", text="x" * i)])
            continue
        target = 1 + item % store.head  # never genesis: agent a exists at every target
        if target != store.head:
            reset = store.prepare_reset(target, "checkout")
            store.append(store.reset_batch(reset), store.rebuild(target))


@settings(max_examples=60, deadline=None)
@given(
    script=st.lists(st.one_of(st.none(), st.integers(0, 10_000)), max_size=12),
    pick=st.integers(0, 10_000),
    follow=st.integers(1, 4),
    where=st.floats(0, 1),
)
def test_an_edit_batch_cut_anywhere_leaves_both_or_neither(
    script: list[int | None], pick: int, follow: int, where: float
) -> None:
    with tempfile.TemporaryDirectory(prefix="reyn-edit-") as tmp:
        root = Path(tmp)
        with Store.open(root, _OPTS) as store:
            _history(store, [*script, None])
            before = (store.head, _inbox(store))
            target = 1 + pick % (store.head - 1)  # below the tip: a move
            reset = store.prepare_reset(target, "checkout")
            messages = [
                ev.MessageReceived(agent="a", message_id=f"e{k}", text="edited")
                for k in range(follow)
            ]
            (seg,) = segments(root)
            start = seg.stat().st_size
            batch = [*store.reset_batch(reset), *messages]
            store.append(batch, store.rebuild(target), atomic=True)
            end = seg.stat().st_size
            after = (store.head, _inbox(store))
        cut = start + round(where * (end - start))
        with seg.open("r+b") as f:
            f.truncate(cut)
        with Store.open(root, _OPTS) as store:
            assert (store.head, _inbox(store)) == (after if cut == end else before)
            reset_seq = before[0] + 1
            assert store.lineage.is_reset(reset_seq) == (cut == end)
            assert after[1][-follow:] == [m.message_id for m in messages]

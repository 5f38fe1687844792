"""generations(): the active-only listing walks lineage intervals, not the whole catalog."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import CLOCK
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.protocol import events as ev
from reynd.storage.options import StorageOptions
from reynd.storage.store import Store


def _turn(store: Store, agent: str, n: int) -> None:
    store.append(
        [
            ev.MessageReceived(agent=agent, message_id=f"m{n}", text="x"),
            ev.TurnStarted(agent=agent, turn_id=f"t{n}", message_id=f"m{n}"),
            ev.TurnEnded(agent=agent, turn_id=f"t{n}"),
        ]
    )


@settings(max_examples=25)
@given(seed=st.integers(0, 10_000))
def test_active_listing_equals_a_filter_of_the_whole_catalog(
    tmp_path_factory: pytest.TempPathFactory, seed: int
) -> None:
    rng = random.Random(seed)
    root: Path = tmp_path_factory.mktemp("gen") / "reyn"
    with Store.open(root, StorageOptions(), clock=CLOCK) as store:
        store.append([ev.AgentCreated(agent="a"), ev.AgentCreated(agent="b")])
        for n in range(rng.randint(5, 40)):
            _turn(store, rng.choice("ab"), n)
            if rng.random() < 0.2 and store.head > 2:
                target = rng.randint(0, store.head - 1)
                if store.lineage.is_active(target):
                    store.rewind(target)
                else:
                    store.checkout(target)
        everything = list(store.generations(all_branches=True))
        for cursor in (None, *rng.sample(range(1, store.head + 2), 5)):
            for agent in (None, "a"):
                want = [
                    (e.seq, active, branch)
                    for e, active, branch in everything
                    if active
                    and (cursor is None or e.seq < cursor)
                    and (agent is None or e.agent == agent)
                ]
                got = [
                    (e.seq, active, branch)
                    for e, active, branch in store.generations(cursor=cursor, agent=agent)
                ]
                assert got == want, (seed, cursor, agent)

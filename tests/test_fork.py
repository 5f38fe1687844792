"""`fork(state)`: a copy `apply` can change while the original stays as it was (pure).

The as-of reads replay forward from a kept state (reynd/daemon/as_of.py) instead of
decoding a snapshot: a fork that shared one container `apply` changes in place would
make a kept state drift, and every later read built on it would be wrong. Random
sequences of every agent event, over few ids so that they meet (a step of a turn in
flight, an answer to a question asked), are applied to a state; the state is forked
midway and the rest applied to the fork: the original must encode as before, and the
fork must equal the whole sequence replayed from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reynd.core.reduce import apply, fork
from reynd.protocol import events as ev
from reynd.protocol.state import RuntimeState

ids = st.sampled_from(["a", "a", "a", "b"])
agents = st.sampled_from(["x", "x", "x", "y"])  # mostly the one created first
small = st.integers(0, 2)
texts = st.sampled_from(["", "hi", "yo"])
messages = st.builds(ev.Message, role=st.sampled_from(["user", "assistant"]), content=texts)
dicts = st.dictionaries(st.sampled_from(["k", "l"]), small, max_size=2)


def _event(kind: type[ev.AgentEvent], **fields: Any) -> st.SearchStrategy[ev.AgentEvent]:
    return st.builds(kind, agent=agents, **fields)


events = st.one_of(
    _event(ev.AgentCreated, options=dicts),
    _event(ev.AgentConfigured, executor=st.none() | texts, options=st.none() | dicts),
    _event(ev.MessageReceived, message_id=ids, text=texts),
    _event(ev.TurnStarted, turn_id=ids, message_id=ids),
    _event(ev.StepStarted, turn_id=ids, step=small, input=dicts),
    _event(
        ev.StepCommitted,
        turn_id=ids,
        step=small,
        output=dicts,
        messages=st.lists(messages, max_size=2).map(tuple),
        tokens_in=small,
    ),
    _event(ev.TurnEnded, turn_id=ids, outcome=st.sampled_from(["completed", "cancelled"])),
    _event(ev.PlanCreated, plan_id=ids, steps=st.lists(texts, min_size=1, max_size=2).map(tuple)),
    _event(ev.PlanStepDone, plan_id=ids, index=st.integers(0, 1), result=st.just("r")),
    _event(ev.SkillStarted, run_id=ids, skill=texts),
    _event(ev.SkillPhase, run_id=ids, phase=texts),
    _event(ev.SkillEnded, run_id=ids),
    _event(ev.InterventionAsked, intervention_id=ids, question=texts, turn_id=st.none() | ids),
    _event(ev.InterventionAnswered, intervention_id=ids, answer=texts),
)


def replay(log: Sequence[ev.Event], state: RuntimeState | None = None) -> RuntimeState:
    state = RuntimeState() if state is None else state
    for event in log:
        apply(state, event)
    return state


@settings(max_examples=600)
@given(st.lists(events, max_size=40), st.lists(events, max_size=40))
@example(  # an answer lands in a chain of the fork's: rarely drawn, so spelled out
    [ev.TurnStarted(agent="x", turn_id="a", message_id="a")],
    [
        ev.InterventionAsked(agent="x", intervention_id="a", question="", turn_id="a"),
        ev.InterventionAnswered(agent="x", intervention_id="a", answer="r"),
    ],
)
def test_a_fork_changes_apart_from_its_original(
    before: list[ev.AgentEvent], after: list[ev.AgentEvent]
) -> None:
    made = [ev.AgentCreated(agent="x")]
    log = [msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(made + before + after)]
    head, tail = log[: len(made + before)], log[len(made + before) :]
    original = replay(head)
    kept = msgspec.msgpack.encode(original)
    forked = replay(tail, fork(original))
    assert msgspec.msgpack.encode(original) == kept  # the original did not move
    assert forked == replay(log)
    # And the other way round: the original going on leaves an earlier fork alone.
    copy = fork(original)
    replay(tail, original)
    assert msgspec.msgpack.encode(copy) == kept


def test_a_fork_that_shared_what_apply_changes_would_be_caught() -> None:
    """The test above can fail: a fork sharing the chains (one line of `fork` undone)."""
    start = [
        ev.AgentCreated(agent="x", seq=1),
        ev.MessageReceived(agent="x", message_id="a", text="hi", seq=2),
        ev.TurnStarted(agent="x", turn_id="a", message_id="a", seq=3),
    ]
    original = replay(start)
    shallow = fork(original)
    shallow.agents["x"].pending_chains = original.agents["x"].pending_chains
    kept = msgspec.msgpack.encode(original)
    apply(shallow, ev.StepCommitted(agent="x", turn_id="a", step=0, seq=4))
    assert msgspec.msgpack.encode(original) != kept

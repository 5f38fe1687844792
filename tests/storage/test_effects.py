"""core/effects.py (issue 25): what the steps among some records did, against a model.

Each generated step ends once: with its memo (then a plain turn end follows,
which ends no step), or with the turn end of a turn it failed or that was
cancelled. Its record carries an effect or not; its `step.started` may lie
before the records looked at. Known effects are summed, a step that ended
without one is unknown, and a turn end with no step open ends none.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from helpers import build_log, opts
from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.effects import effects_of, turns_and_agents
from reynd.protocol import events as ev
from reynd.protocol.preview import Effects, effects_line
from reynd.storage.store import Store


@dataclass(frozen=True)
class Step:
    agent: str
    end: str  # "memo", "failed", "cancelled"
    started: bool  # its step.started is among the records
    effect: ev.Effect | None

    @property
    def recorded(self) -> ev.Effect | None:
        """The effect its end record carries (a cancelled turn's end carries none)."""
        return None if self.end == "cancelled" else self.effect


effects = st.builds(
    ev.Effect,
    executor=st.sampled_from(["builtin", "command", "openai"]),
    argv=st.lists(st.sampled_from(["true", "false", "./run"]), max_size=2).map(tuple),
    exit_code=st.none() | st.integers(0, 255),
    model_calls=st.integers(0, 3),
    tokens_in=st.integers(0, 10_000),
    tokens_out=st.integers(0, 10_000),
    tools=st.lists(st.sampled_from(["echo", "time_now"]), max_size=3).map(tuple),
)
steps = st.builds(
    Step,
    agent=st.sampled_from(["a", "b", "c"]),
    end=st.sampled_from(["memo", "failed", "cancelled"]),
    started=st.booleans(),
    effect=st.none() | effects,
)


def _records(specs: list[Step], order: list[int]) -> list[ev.Event]:
    """Every step's start first (those among the records), then their ends in `order`."""
    out: list[ev.Event] = []
    for i, s in enumerate(specs):
        if s.started:
            out.append(ev.StepStarted(agent=s.agent, turn_id=f"t{i}", step=i % 4))
    for i in order:
        s = specs[i]
        if s.end == "memo":
            out.append(
                ev.StepCommitted(agent=s.agent, turn_id=f"t{i}", step=i % 4, effect=s.effect)
            )
            out.append(ev.TurnEnded(agent=s.agent, turn_id=f"t{i}"))  # ends no step
        else:
            out.append(
                ev.TurnEnded(agent=s.agent, turn_id=f"t{i}", outcome="failed", effect=s.effect)
                if s.end == "failed"
                else ev.TurnEnded(agent=s.agent, turn_id=f"t{i}", outcome="cancelled")
            )
    return _numbered(out)


def _numbered(records: list[ev.Event]) -> list[ev.Event]:
    return [msgspec.structs.replace(r, seq=k + 1) for k, r in enumerate(records)]


@settings(max_examples=400, deadline=None)
@given(st.lists(steps, max_size=12), st.randoms(use_true_random=False), st.integers(0, 5))
def test_effects_sum_what_steps_recorded_and_count_the_rest_unknown(
    specs: list[Step], rnd: random.Random, listed: int
) -> None:
    order = list(range(len(specs)))
    rnd.shuffle(order)
    got = effects_of(_records(specs, order), listed=listed)
    ended = [
        specs[i]
        for i in order
        if specs[i].end == "memo" or specs[i].started or specs[i].recorded is not None
    ]
    known = [s.recorded for s in ended if s.recorded is not None]
    # A cancelled turn end carries no effect: its open step is unknown.
    assert got.unknown_steps == sum(1 for s in ended if s.recorded is None)
    assert got.steps == len(known)
    assert got.model_calls == sum(e.model_calls for e in known)
    assert got.tokens_in == sum(e.tokens_in for e in known)
    assert got.tokens_out == sum(e.tokens_out for e in known)
    tools: Counter[str] = Counter()
    for e in known:
        tools.update(e.tools)
    assert got.tools == dict(tools)
    runs = [e for e in known if e.argv]
    assert got.command_count == len(runs)
    assert [(tuple(c.argv), c.exit_code) for c in got.commands] == [
        (e.argv, e.exit_code) for e in runs[:listed]
    ]
    assert got.files_outside is None  # no executor reports them: not known, not none


@settings(max_examples=200, deadline=None)
@given(st.lists(steps, max_size=8), st.lists(steps, max_size=8))
def test_effects_of_two_runs_of_whole_steps_add_up(first: list[Step], second: list[Step]) -> None:
    """Split where no step is open, the two sums add to the sum of the whole."""
    a = _records(first, list(range(len(first))))
    b = _records(second, list(range(len(second))))
    whole, one, two = effects_of(a + b), effects_of(a), effects_of(b)
    for name in (
        "steps",
        "unknown_steps",
        "command_count",
        "model_calls",
        "tokens_in",
        "tokens_out",
    ):
        assert getattr(whole, name) == getattr(one, name) + getattr(two, name)


def test_turns_and_agents_list_the_first_and_count_all() -> None:
    records = _numbered(
        [
            ev.AgentCreated(agent="a"),
            *[ev.TurnStarted(agent="a", turn_id=f"t{i}", message_id=f"m{i}") for i in range(5)],
            ev.AgentCreated(agent="b"),
        ]
    )
    turns, count, agents = turns_and_agents(records, listed=2)
    assert [(t.turn_id, t.seq) for t in turns] == [("t0", 2), ("t1", 3)]
    assert count == 5 and agents == ["a", "b"]


def test_the_prompt_line_says_what_is_not_undone() -> None:
    e = Effects(command_count=3, model_calls=5, tokens_in=9000, tokens_out=3000)
    assert effects_line(e) == "not undone: 3 commands ran, 5 model calls, 12k tokens"
    e = Effects(command_count=1, tools={"echo": 2}, unknown_steps=1, tokens_in=12_345)
    assert effects_line(e) == (
        "not undone: 1 command ran, 12.3k tokens, 2 tool calls, 1 step with unknown effects"
    )
    assert effects_line(Effects()).startswith("not undone: nothing")


KINDS = ["agent.created", "message.received", "workspace.files", "step.committed", "rewind"]


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kinds")
    build_log(root, 300, files_every=7)
    return root


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(KINDS)), st.integers(1, 300), st.integers(0, 300))
def test_a_read_of_some_kinds_is_the_read_filtered(
    log_dir: Path, kinds: set[str], lo: int, span: int
) -> None:
    """Wal.read(kinds=...) skips the other records undecoded (the preview's reads): exactly
    the records of those kinds, in order, as an unfiltered read has them."""
    with Store.open(log_dir, opts()) as store:
        hi = min(store.head, lo + span)
        every = list(store.wal.read(lo, hi)) if lo <= hi else []
        some = list(store.wal.read(lo, hi, kinds)) if lo <= hi else []
    assert some == [e for e in every if ev.kind_of(e) in kinds]


def test_a_kind_written_inside_another_record_is_not_that_kind(tmp_path: Path) -> None:
    """The search finds `"rec":{"kind":"message.received"` inside a memo's output too:
    that record is the memo's, and a read of messages leaves it out."""
    inner = {"rec": {"kind": "message.received", "message_id": "m9", "text": "no"}}
    with Store.open(tmp_path, opts()) as store:
        store.append([ev.AgentCreated(agent="a")])
        store.append([ev.MessageReceived(agent="a", message_id="m1", text="hi")])
        store.append([ev.StepCommitted(agent="a", turn_id="t2", step=0, output=inner)])
        store.append([ev.MessageReceived(agent="a", message_id="m2", text="again")])
        got = list(store.wal.read(1, store.head, {"message.received"}))
        memos = list(store.wal.read(1, store.head, {"step.committed"}))
    assert [(e.seq, type(e)) for e in got] == [(2, ev.MessageReceived), (4, ev.MessageReceived)]
    assert [e.seq for e in memos] == [3]

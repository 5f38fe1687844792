"""ReyndSession, the OpenAI Agents SDK's session kept in reynd, on a real daemon.

The first part covers each case the SDK's own session tests check for its
stores (tests/memory/test_session.py: items in order, limits, pop on empty,
clear, sessions kept apart, unicode and special characters, large items,
concurrent writers, SessionSettings, the Runner with history and an input
callback), against ReyndSession. The second, what reynd adds: the Runner
through a rewind from the CLI, fenced writers, pop and clear undone by a
rewind, branches from a turn, usage kept with the turn, several sessions
moved together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import RunConfig, Runner, SessionSettings
from hypothesis import given, settings
from hypothesis import strategies as st

from reynctl.errors import ConnectionClosed, StaleBranch
from reynctl.openai_agents import ReyndSession
from reynd.storage.crashpoints import CRASH_ENV
from tests.harness import Daemon, reynctl_json, start_daemon
from tests.openai_agents_model import CountingModel, agent, run, text
from tests.runtime_helpers import kill_daemon, restart


def session(daemon: Daemon, sid: str, **kwargs: Any) -> ReyndSession:
    return ReyndSession(sid, str(daemon.socket), **kwargs)


def contents(items: list[Any]) -> list[Any]:
    return [text(i) for i in items]


def msgs(*texts: str) -> list[dict[str, Any]]:
    """Alternating user and assistant messages, the user first."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]


def generations(daemon: Daemon, agent: str) -> list[dict[str, Any]]:
    """`reynctl generations` of one agent, newest first."""
    out: list[dict[str, Any]] = reynctl_json(daemon.socket, "generations", "--agent", agent)[
        "generations"
    ]
    return out


def ask(model: CountingModel, s: ReyndSession, text: str | list[Any], **kwargs: Any) -> Any:
    return run(Runner.run(agent(model), text, session=s, **kwargs)).final_output


# -- the SDK's own session cases ---------------------------------------------------------


async def streamed(model: CountingModel, s: ReyndSession, text: str) -> Any:
    result = Runner.run_streamed(agent(model), text, session=s)
    async for _ in result.stream_events():
        pass
    return result.final_output


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
def test_the_runner_hands_the_model_the_history(daemon: Daemon, method: str) -> None:
    model = CountingModel("San Francisco", "California")
    with session(daemon, f"basic-{method}") as s:
        for question in ("What city is the Golden Gate Bridge in?", "What state is it in?"):
            if method == "run":
                ask(model, s, question)
            elif method == "run_streamed":
                run(streamed(model, s, question))
            else:  # run_sync makes its own loop: in a thread without one
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    pool.submit(
                        lambda q: Runner.run_sync(agent(model), q, session=s), question
                    ).result()
        assert model.calls == 2
        assert model.contents() == [
            "What city is the Golden Gate Bridge in?",
            "San Francisco",
            "What state is it in?",
        ]
        assert contents(run(s.get_items()))[-1] == "California"


def test_sessions_are_kept_apart(daemon: Daemon) -> None:
    model = CountingModel("I like cats", "I like dogs", "Yes, you mentioned cats")
    with session(daemon, "session_1") as one, session(daemon, "session_2") as two:
        ask(model, one, "I like cats")
        ask(model, two, "I like dogs")
        ask(model, one, "What did I say I like?")
        assert model.contents() == ["I like cats", "I like cats", "What did I say I like?"]
        assert contents(run(two.get_items())) == ["I like dogs", "I like dogs"]


def test_add_get_and_clear(daemon: Daemon) -> None:
    with session(daemon, "direct_test") as s:
        run(s.add_items([{"role": "user", "content": "Hello"}]))
        run(s.add_items([{"role": "assistant", "content": "Hi there!"}]))
        got = run(s.get_items())
        assert [(i["role"], i["content"]) for i in got] == [
            ("user", "Hello"),
            ("assistant", "Hi there!"),
        ]
        run(s.clear_session())
        assert run(s.get_items()) == []
        run(s.clear_session())  # clearing an empty session: nothing to do
        run(s.add_items([]))  # nor adding nothing
        assert run(s.get_items()) == []
    with session(daemon, "direct_test") as again:  # a new instance reads the same
        assert run(again.get_items()) == []


def test_pop_item(daemon: Daemon) -> None:
    with session(daemon, "pop_test") as s:
        assert run(s.pop_item()) is None  # an empty (never written) session
        run(s.add_items(msgs("Hello", "Hi there!", "How are you?")))
        assert run(s.pop_item()) == {"role": "user", "content": "How are you?"}
        assert contents(run(s.get_items())) == ["Hello", "Hi there!"]
        assert run(s.pop_item()) == {"role": "assistant", "content": "Hi there!"}
        assert run(s.pop_item()) == {"role": "user", "content": "Hello"}
        assert run(s.pop_item()) is None
        assert run(s.get_items()) == []


def test_pop_affects_only_its_session(daemon: Daemon) -> None:
    with session(daemon, "session_1") as one, session(daemon, "session_2") as two:
        run(one.add_items(msgs("Session 1 message")))
        run(two.add_items(msgs("Session 2 message 1", "Session 2 message 2")))
        assert run(two.pop_item())["content"] == "Session 2 message 2"
        assert contents(run(one.get_items())) == ["Session 1 message"]
        assert contents(run(two.get_items())) == ["Session 2 message 1"]


def test_get_items_with_limit(daemon: Daemon) -> None:
    texts = [f"{k} {n}" for n in (1, 2, 3) for k in ("Message", "Response")]
    with session(daemon, "count_test") as s:
        run(s.add_items(msgs(*texts)))
        assert contents(run(s.get_items())) == texts
        assert contents(run(s.get_items(limit=2))) == texts[-2:]
        assert contents(run(s.get_items(limit=4))) == texts[-4:]
        assert contents(run(s.get_items(limit=10))) == texts
        assert run(s.get_items(limit=0)) == []


def test_the_runner_appends_a_list_input_to_the_history(daemon: Daemon) -> None:
    model = CountingModel("This should run")
    with session(daemon, "list-input") as s:
        history = msgs("Earlier message", "Saved reply")
        run(s.add_items(history))
        new = [{"role": "user", "content": "Test message"}]
        ask(model, s, new)
        assert model.inputs[-1] == history + new


def test_a_session_input_callback_prepares_the_input(daemon: Daemon) -> None:
    model = CountingModel("I'm gpt-4o")
    with session(daemon, "callback") as s:
        history = msgs("Hello there.", "Hi, I'm here to assist you.")
        run(s.add_items(history))

        def users_only(old: list[Any], new: list[Any]) -> list[Any]:
            return [i for i in old if i["role"] == "user"] + new

        new = [{"role": "user", "content": "What your name?"}]
        ask(model, s, new, run_config=RunConfig(session_input_callback=users_only))
        assert model.inputs[-1] == [history[0], new[0]]


def test_unicode_and_special_characters(daemon: Daemon) -> None:
    texts = [
        "こんにちは",
        "😊👍",
        "Привет",
        "O'Reilly",
        "DROP TABLE sessions;",
        '"SELECT * FROM users WHERE name = "admin";"',
        "Robert'); DROP TABLE students;--",
        "tab\there, nul\x00, line\u2028separator, bidi\u202e",  # control characters
    ]
    with session(daemon, "unicode_test") as s:
        run(s.add_items(msgs(*texts)))
        assert contents(run(s.get_items())) == texts
        # Its user messages are turns, their generations labelled on one line.
        run(s.add_items([{"role": "user", "content": [{"type": "input_text", "text": "parts"}]}]))
        labels = [g["label"] for g in generations(daemon, s.agent)]
        assert "turn 1: こんにちは" in labels
        assert labels[0] == "turn 5: parts"  # a message of content parts: their text
        assert all("\x00" not in label for label in labels)


@pytest.mark.parametrize("size", [300_000, 3_000_000])
def test_large_items(daemon: Daemon, size: int) -> None:
    """Items above a request's part (or the daemon's max_message_bytes): kept whole."""
    big = "x" * (size // 2) + '"\\' * (size // 4)  # escapes: a part must still fit
    items = [
        {"role": "user", "content": big},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "é" * (size // 2)},
    ]
    with session(daemon, f"large-{size}") as s:
        run(s.add_items(items))
        assert run(s.get_items()) == items
    with session(daemon, f"large-{size}") as fresh:  # read back from the daemon alone
        assert run(fresh.get_items()) == items
        assert [t["content"][:3] for t in fresh.turns()] == ["xxx", "ééé"]


def test_many_items_in_one_add(daemon: Daemon) -> None:
    items = [{"role": "assistant", "content": f"{n:04} " + "y" * 2000} for n in range(1500)]
    with session(daemon, "many") as s:
        run(s.add_items(items))
        assert run(s.get_items()) == items
        assert run(s.get_items(limit=3)) == items[-3:]


def test_concurrent_writers_to_one_session(daemon: Daemon) -> None:
    """As the SDK's test: five threads, each its own event loop, adding one item each."""
    with session(daemon, "concurrent_test") as s:

        def add(n: int) -> None:
            asyncio.run(s.add_items([{"role": "user", "content": f"Message {n}"}]))

        with concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
            list(pool.map(add, range(10)))
        assert sorted(contents(run(s.get_items()))) == sorted(f"Message {n}" for n in range(10))
        assert [t["turn"] for t in s.turns()] == list(range(1, 11))  # each numbered once


def test_concurrent_sessions(daemon: Daemon) -> None:
    """Several sessions written at once from one loop, and from separate instances."""

    async def both(a: ReyndSession, b: ReyndSession) -> None:
        await asyncio.gather(
            *(x.add_items([{"role": "user", "content": x.session_id}]) for x in (a, b) * 5)
        )

    with session(daemon, "c1") as a, session(daemon, "c2") as b:
        run(both(a, b))
        assert contents(run(a.get_items())) == ["c1"] * 5
        assert contents(run(b.get_items())) == ["c2"] * 5


def test_session_settings(daemon: Daemon) -> None:
    settings_of_default = session(daemon, "default").session_settings
    assert settings_of_default is not None and settings_of_default.limit is None
    with session(daemon, "limited", session_settings=SessionSettings(limit=3)) as s:
        assert s.session_settings is not None and s.session_settings.limit == 3
        run(s.add_items([{"role": "user", "content": f"Message {n}"} for n in range(10)]))
        assert contents(run(s.get_items())) == ["Message 7", "Message 8", "Message 9"]
        assert contents(run(s.get_items(limit=2))) == ["Message 8", "Message 9"]
        model = CountingModel("Got it")
        ask(model, s, "New question", run_config=RunConfig(session_settings=SessionSettings(2)))
        assert model.contents() == ["Message 8", "Message 9", "New question"]


def test_an_item_that_is_not_json_is_refused_before_anything_is_written(daemon: Daemon) -> None:
    with session(daemon, "bad") as s:
        run(s.add_items(msgs("kept")))
        with pytest.raises(TypeError):
            run(
                s.add_items(
                    [{"role": "user", "content": "x"}, {"role": "user", "content": object()}]
                )
            )
        assert contents(run(s.get_items())) == ["kept"]


def test_items_that_are_not_dicts_are_refused(daemon: Daemon) -> None:
    with session(daemon, "bad-items") as s, pytest.raises(TypeError, match="a session item is"):
        run(s.add_items(["just a string"]))


def test_a_session_id_that_is_no_agent_name_is_hashed(daemon: Daemon) -> None:
    sid = "user 42 / ünïcode"
    with session(daemon, sid) as s:
        run(s.add_items(msgs("hi")))
        assert s.agent.startswith("oax-")
        listed = reynctl_json(daemon.socket, "agents", "--session", "openai-agents")["agents"]
        assert [a["options"] for a in listed] == [{"session_id": sid}]
    with session(daemon, sid) as again:
        assert contents(run(again.get_items())) == ["hi"]


class Ops:
    """A list the session must match, op by op."""

    add = st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=20)}
        ),
        max_size=4,
    ).map(lambda items: ("add", items))
    op = st.one_of(
        add,
        st.just(("pop", None)),
        st.just(("clear", None)),
        st.integers(0, 6).map(lambda n: ("get", n)),
    )


@pytest.fixture(scope="module")
def one_daemon(shared_daemon: Daemon) -> Daemon:
    return shared_daemon


_examples = iter(range(10**6))


@settings(max_examples=30)
@given(ops=st.lists(Ops.op, max_size=12))
def test_the_session_is_the_list_its_operations_make(one_daemon: Daemon, ops: list[Any]) -> None:
    """Whatever the operations, a session reads as the list they make, from any instance."""
    sid = f"prop-{next(_examples)}"
    expected: list[Any] = []
    with session(one_daemon, sid) as s:
        for op, arg in ops:
            if op == "add":
                run(s.add_items(arg))
                expected += arg
            elif op == "pop":
                assert run(s.pop_item()) == (expected.pop() if expected else None)
            elif op == "clear":
                run(s.clear_session())
                expected = []
            else:
                assert run(s.get_items(limit=arg)) == (expected[-arg:] if arg else [])
        assert run(s.get_items()) == expected
        users = [i for i in expected if i["role"] == "user"]
        assert [t["content"] for t in s.turns()] == [i["content"] for i in users][: len(s.turns())]
    with session(one_daemon, sid) as other:
        assert run(other.get_items()) == expected


# -- what reynd adds ---------------------------------------------------------------------


def test_runner_turns_a_cli_rewind_and_the_next_run(daemon: Daemon) -> None:
    """Three runs; `reynctl rewind` to the third turn's generation; the next run's model is
    handed the history as of the rewind, and the abandoned turn stays on its branch."""
    model = CountingModel()
    with session(daemon, "chat") as s:
        for n in (1, 2, 3):
            assert ask(model, s, f"question {n}") == f"reply {n}"
        assert model.calls == 3
        gens = generations(daemon, "oa-chat")
        assert [g["label"] for g in gens] == [f"turn {n}: question {n}" for n in (3, 2, 1)]
        assert [g["kind"] for g in gens] == ["phase"] * 3

        reynctl_json(daemon.socket, "rewind", str(gens[0]["seq"]), "--yes")  # before turn 3
        assert ask(model, s, "question 3 again") == "reply 4"
        assert model.contents() == [
            "question 1",
            "reply 1",
            "question 2",
            "reply 2",
            "question 3 again",
        ]
        assert [t["content"] for t in s.turns()] == ["question 1", "question 2", "question 3 again"]
        branches = reynctl_json(daemon.socket, "branches")["branches"]
        assert len(branches) == 2


def test_a_writer_the_rewind_left_behind_is_fenced(daemon: Daemon) -> None:
    with session(daemon, "fenced") as s, session(daemon, "fenced") as other:
        run(s.add_items(msgs("one", "two")))
        seq = daemon.call("daemon.status")["head"]
        run(other.get_items())  # it has read: its writes are fenced on that tip
        run(s.add_items(msgs("three")))
        daemon.call("rewind", {"seq": seq})
        with pytest.raises(StaleBranch):  # s wrote "three" on the branch the rewind left
            run(s.add_items(msgs("four")))
        assert contents(run(s.get_items())) == ["one", "two"]  # a read: on the new branch
        run(s.add_items(msgs("four")))
        assert contents(run(other.get_items())) == ["one", "two", "four"]


def test_pop_and_clear_are_records_a_rewind_undoes(daemon: Daemon) -> None:
    with session(daemon, "undo") as s:
        run(s.add_items(msgs("a", "b", "c")))
        before_pop = daemon.call("daemon.status")["head"]
        assert run(s.pop_item())["content"] == "c"
        before_clear = daemon.call("daemon.status")["head"]
        run(s.clear_session())
        assert run(s.get_items()) == []
        assert s.turns() == []
        daemon.call("rewind", {"seq": before_clear})
        assert contents(run(s.get_items())) == ["a", "b"]
        daemon.call("rewind", {"seq": before_pop})
        assert contents(run(s.get_items())) == ["a", "b", "c"]
        assert [t["content"] for t in s.turns()] == ["a", "c"]


def test_each_add_items_is_one_batch(daemon: Daemon) -> None:
    """The records of one add_items have consecutive seqs (one wal.append_batch), each turn
    an `add` record right after its generation."""
    with session(daemon, "batch") as s:
        run(s.add_items(msgs("q1", "a1", "q2", "a2")))
        events = daemon.call("wal.read", {"agent": s.agent})["events"]
        mine = [e for e in events if e["kind"] in ("skill.phase", "step.started")]
        assert [e["kind"] for e in mine] == ["skill.phase", "step.started"] * 2
        seqs = [e["seq"] for e in mine]
        assert seqs == list(range(seqs[0], seqs[0] + 4))
        assert [e["input"]["items"] for e in mine[1::2]] == [msgs("q1", "a1"), msgs("q2", "a2")]


def test_branches_from_a_turn_and_switching_back(daemon: Daemon) -> None:
    """AdvancedSQLiteSession's branching, as reynd's rewind and checkout."""
    model = CountingModel()
    with session(daemon, "branchy") as s:
        for n in (1, 2, 3):
            result = run(Runner.run(agent(model), f"q{n}", session=s))
            run(s.store_run_usage(result))
        turns = run(s.get_conversation_turns())
        assert [t["turn"] for t in turns] == [1, 2, 3]
        assert [t["turn"] for t in run(s.find_turns_by_content("Q2"))] == [2]
        assert [t["usage"]["input_tokens"] for t in turns] == [10, 30, 50]
        assert run(s.get_session_usage()) == {
            "requests": 3,
            "input_tokens": 90,
            "output_tokens": 9,
            "total_tokens": 99,
        }
        assert run(s.get_turn_usage(2)) == {
            2: {"requests": 1, "input_tokens": 30, "output_tokens": 3, "total_tokens": 33}
        }
        old = run(s.list_branches())
        moved = run(s.create_branch_from_turn(2))
        assert moved.by is not None and moved.by.client == "reynd-openai-agents"  # in the reflog
        assert moved.reason == "branch session branchy from turn 2"
        assert contents(run(s.get_items())) == ["q1", "reply 1"]
        assert (run(s.get_session_usage()) or {}).get("requests") == 1
        ask(model, s, "q2 other")
        assert model.contents() == ["q1", "reply 1", "q2 other"]
        branches = run(s.list_branches())
        assert len(branches.branches) == len(old.branches) + 1
        assert moved.branch == next(b.id for b in branches.branches if b.active)

        run(s.switch_to_branch(old.branches[0].id))  # back to the first branch, at its tip
        assert [t["content"] for t in s.turns()] == ["q1", "q2", "q3"]
        assert (run(s.get_session_usage()) or {}).get("requests") == 3
        with pytest.raises(ValueError, match="no turn 9"):
            s.branch_from_turn(9)
        with pytest.raises(ValueError, match="no branch 99"):
            s.switch_branch(99)


def test_a_rewind_moves_every_session_together(daemon: Daemon) -> None:
    model = CountingModel()
    with session(daemon, "left") as a, session(daemon, "right") as b:
        ask(model, a, "a1")
        ask(model, b, "b1")
        seq = daemon.call("daemon.status")["head"]
        ask(model, a, "a2")
        ask(model, b, "b2")
        reynctl_json(daemon.socket, "rewind", str(seq), "--yes")
        assert contents(run(a.get_items())) == ["a1", "reply 1"]
        assert contents(run(b.get_items())) == ["b1", "reply 2"]
        listed = reynctl_json(daemon.socket, "agents", "--session", "openai-agents")
        assert sorted(x["name"] for x in listed["agents"]) == ["oa-left", "oa-right"]


def test_a_crash_mid_add_items_leaves_none_of_it(short_tmp: Path) -> None:
    """The daemon SIGKILLed (a crashpoint) while writing an add_items' second record: after
    recovery the session holds the turns before it, whole, and takes the next add."""
    d = start_daemon(short_tmp)
    try:
        with session(d, "crash") as s:
            run(s.add_items(msgs("q1", "a1")))
    finally:
        d.stop()
    d = start_daemon(short_tmp, state_dir=d.state_dir, env={CRASH_ENV: "wal.mid_batch:1"})
    try:
        with session(d, "crash") as s, pytest.raises(ConnectionClosed):
            run(s.add_items(msgs("q2", "a2")))  # its generation, then its items: killed between
        d.wait()
    finally:
        kill_daemon(d)
    d = restart(d, short_tmp)
    try:
        with session(d, "crash") as s:
            assert contents(run(s.get_items())) == ["q1", "a1"]
            assert [t["turn"] for t in s.turns()] == [1]
            assert [g["label"] for g in generations(d, s.agent)] == ["turn 1: q1"]  # none of it
            run(s.add_items(msgs("q2", "a2")))
            assert [t["content"] for t in s.turns()] == ["q1", "q2"]
    finally:
        d.stop()

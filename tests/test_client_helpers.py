"""Both clients' typed helpers: declared once, held to the method table, alike in both.

Every method of `METHODS` has a helper in reynctl.helpers or a reason in
`NO_HELPER` (a new method fails here until that is decided). Each helper is
declared with its method's params Struct and result type; on both clients it
takes the Struct's fields as keyword arguments, with their defaults, and
returns the result type (awaited on the async client). mypy checks the
`assert_type`s below as precisely as the runtime checks run them.
"""

from __future__ import annotations

import inspect
from collections.abc import Coroutine
from typing import Any, assert_type

import anyio
import msgspec
import pytest

from reynctl.aio import AsyncClient, open_client
from reynctl.client import Client
from reynctl.helpers import NO_HELPER, Helper, Methods, Reply
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from tests.harness import Daemon

HELPERS: dict[str, Helper[Any, Any]] = {
    name: h for name, h in vars(Methods).items() if isinstance(h, Helper)
}


def test_every_method_has_a_helper_or_a_reason_for_none() -> None:
    covered = [h.method for h in HELPERS.values()]
    assert len(covered) == len(set(covered)), "two helpers for one method"
    assert set(covered).isdisjoint(NO_HELPER)
    assert set(covered) | set(NO_HELPER) == set(m.METHODS), (
        "a method with neither a helper (reynctl/helpers.py, Methods) nor a reason in NO_HELPER"
    )
    assert all(reason.strip() for reason in NO_HELPER.values())


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_a_helper_is_declared_as_the_method_table_says(name: str) -> None:
    helper = HELPERS[name]
    declared = m.METHODS[helper.method]
    assert helper.params is declared.params
    assert helper.result == declared.result
    assert helper.name == name


def _expected(helper: Helper[Any, Any]) -> list[tuple[str, object]]:
    """The params Struct's fields: (name, default), `inspect.Parameter.empty` when required."""
    out: list[tuple[str, object]] = []
    for f in msgspec.structs.fields(m.METHODS[helper.method].params):
        if f.required:
            out.append((f.name, inspect.Parameter.empty))
        elif f.default_factory is not msgspec.NODEFAULT:
            out.append((f.name, f.default_factory()))
        else:
            out.append((f.name, f.default))
    return out


def _shape(fn: Any) -> tuple[list[tuple[str, object]], object]:
    """A bound helper's keyword-only parameters (name, default) and its return annotation."""
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, (fn.__name__, p.name)
        factory = getattr(p.default, "factory", None)  # a Struct's default_factory
        params.append((p.name, p.default if factory is None else factory()))
    return params, sig.return_annotation


def test_both_clients_have_every_helper_alike(daemon: Daemon) -> None:
    async def body() -> None:
        ac = await open_client(daemon.socket)
        try:
            with Client(daemon.socket) as c:
                for name, helper in HELPERS.items():
                    # Neither client hides a helper under a method of its own.
                    assert inspect.getattr_static(Client, name) is helper
                    assert inspect.getattr_static(AsyncClient, name) is helper
                    sync, asy = getattr(c, name), getattr(ac, name)
                    assert not inspect.iscoroutinefunction(sync)
                    assert inspect.iscoroutinefunction(asy)
                    assert sync.__name__ == asy.__name__ == name
                    assert helper.method in sync.__doc__ and sync.__doc__ == asy.__doc__
                    expected = (_expected(helper), m.METHODS[helper.method].result)
                    assert _shape(sync) == _shape(asy) == expected, name
        finally:
            await ac.aclose()

    anyio.run(body)


def test_helpers_answer_alike_on_both_clients(daemon: Daemon) -> None:
    """The same calls through both clients: the same results, of the declared types."""

    async def body() -> None:
        ac = await open_client(daemon.socket)
        try:
            with Client(daemon.socket) as c:
                got = assert_type(
                    c.append_batch(
                        agent="ext",
                        events=[
                            m.BatchEvent(kind="agent.created"),
                            m.BatchEvent(kind="message.received", data=_msg("m1")),
                        ],
                    ),
                    m.WalAppendBatchResult,
                )
                more = assert_type(
                    await ac.append(agent="ext", kind="message.received", data=_msg("m2")),
                    m.WalAppendResult,
                )
                assert more.seq == got.seqs[-1] + 1
                assert c.status().head == (await ac.status()).head == more.seq
                sync_state = assert_type(c.state(seq=got.seqs[-1]), m.StateResult)
                assert sync_state == await ac.state(seq=got.seqs[-1])
                assert c.agents() == await ac.agents() and c.branches() == await ac.branches()
                info = assert_type(await ac.agent(agent="ext"), a.AgentInfo)
                assert info == c.agent(agent="ext")
                assert c.read(agent="ext").events == (await ac.read(agent="ext")).events
                pending = assert_type(ac.status(), Coroutine[Any, Any, m.StatusResult])
                assert (await pending).head == more.seq

                # checkout's `force` on both (the blocking client had no way to pass it).
                back = assert_type(c.rewind(seq=got.seqs[0]), m.RewindResult)
                again = await ac.checkout(seq=more.seq, force=False)
                assert (back.mode, again.mode) == ("undo", "fork_switch")
                undo = c.checkout(seq=got.seqs[0], force=True)
                assert undo.target == got.seqs[0]

                # `call` returns a Reply in both: the result decoded, and as sent.
                sr = assert_type(
                    c.call("daemon.status", m.StatusParams(), m.StatusResult), Reply[m.StatusResult]
                )
                ar = await ac.call("daemon.status", m.StatusParams(), m.StatusResult)
                assert_type(ar, Reply[m.StatusResult])
                assert (sr.method, ar.method) == ("daemon.status", "daemon.status")
                assert sr.value.head == ar.value.head == undo.reset_seq
                assert msgspec.json.decode(ar.raw)["head"] == ar.value.head
        finally:
            await ac.aclose()

    anyio.run(body)


def _msg(mid: str) -> dict[str, Any]:
    return {"message_id": mid, "text": mid}

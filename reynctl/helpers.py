"""The typed helper of each method, declared once for both clients.

`Methods` holds one `Helper` per method that a client names as an attribute
(`status`, `state`, `append_batch`, ...): the method's name, its params Struct
and its result type, as `reynd.protocol.methods.METHODS` declares them
(tests/test_client_helpers.py holds the two to each other). The params
Struct's fields are the helper's keyword arguments and its result is what it
returns: `Client.checkout(seq=5, force=True)` returns a `RewindResult`, and
`AsyncClient.checkout(seq=5, force=True)` an awaitable of one. mypy reads the
arguments from the Struct itself (msgspec declares Structs as dataclass
transforms), so a helper is typed as precisely as the Struct.

The two clients differ only in the transport behind `call`, which both
declare here with one shape: a `Reply` (the result decoded, and as sent).
`NO_HELPER` names the methods with no shared helper, and why.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Generic, ParamSpec, TypeVar, overload

from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol import moves as mv
from reynd.protocol import read_methods as r
from reynd.protocol import tag_methods as t
from reynd.protocol import workspace_methods as w
from reynd.protocol.base import Params

__all__ = ["NO_HELPER", "AsyncMethods", "Helper", "Methods", "Reply", "SyncMethods"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reply(Generic[T]):
    """A method's result, decoded (`value`) and exactly as sent (`raw`, for --json)."""

    method: str
    raw: bytes
    value: T


class Helper(Generic[P, R]):
    """`client.<name>(**fields of params) -> result` for one method, on either client."""

    def __init__(self, method: str, params: Callable[P, Params], result: type[R]) -> None:
        self.method = method
        self.params = params
        self.result = result
        self.name = method  # the attribute's, once set on the class
        self._signature: inspect.Signature | None = None

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Helper[P, R]: ...
    @overload
    def __get__(self, client: SyncMethods, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, client: AsyncMethods, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(
        self, client: SyncMethods | AsyncMethods | None, owner: type[Any]
    ) -> Helper[P, R] | Callable[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if client is None:
            return self
        return client._bind(self)

    def dress(self, fn: Callable[P, Any]) -> None:
        """Give a bound helper its name, the method's summary and the Struct's signature."""
        if self._signature is None:  # once: inspect is slow, and a helper is bound per use
            sig = inspect.signature(self.params)
            self._signature = sig.replace(return_annotation=self.result)
        fn.__name__ = fn.__qualname__ = self.name
        fn.__doc__ = f"{self.method}: {m.METHODS[self.method].summary}"
        fn.__signature__ = self._signature  # type: ignore[attr-defined]


class Methods:
    """The helpers, one per method; `NO_HELPER` lists the methods without one."""

    status = Helper("daemon.status", m.StatusParams, m.StatusResult)
    shutdown = Helper("daemon.shutdown", m.ShutdownParams, m.OkResult)
    generations = Helper("generations.list", m.GenerationsParams, m.GenerationsResult)
    rewind = Helper("rewind", m.RewindParams, m.RewindResult)
    checkout = Helper("checkout", m.CheckoutParams, m.RewindResult)
    undo = Helper("undo", mv.UndoParams, m.RewindResult)
    reflog = Helper("reflog.list", mv.ReflogParams, mv.ReflogResult)
    tag = Helper("tags.set", t.TagsSetParams, t.TagInfo)
    delete_tag = Helper("tags.delete", t.TagsDeleteParams, t.TagInfo)
    tags = Helper("tags.list", t.TagsListParams, t.TagsListResult)
    branches = Helper("branches.list", m.BranchesParams, m.BranchesResult)
    state = Helper("state.get", m.StateParams, m.StateResult)
    diff = Helper("state.diff", m.DiffParams, m.DiffResult)
    append = Helper("wal.append", m.WalAppendParams, m.WalAppendResult)
    append_batch = Helper("wal.append_batch", m.WalAppendBatchParams, m.WalAppendBatchResult)
    read = Helper("wal.read", r.WalReadParams, r.WalReadResult)
    get = Helper("wal.get", r.WalGetParams, r.WalGetResult)
    agents = Helper("agents.list", a.AgentsListParams, a.AgentsListResult)
    agent = Helper("agents.get", a.AgentsGetParams, a.AgentInfo)
    create_agent = Helper("agents.create", a.AgentsCreateParams, a.AgentInfo)
    configure_agent = Helper("agents.configure", a.AgentsConfigureParams, a.AgentInfo)
    # With `wait`, set the client's timeout above the call's.
    send = Helper("agents.send", a.AgentsSendParams, a.AgentsSendResult)
    cancel = Helper("agents.cancel", a.AgentsCancelParams, a.AgentsCancelResult)
    resolve = Helper("agents.resolve", a.AgentsResolveParams, a.AgentInfo)
    interventions = Helper(
        "interventions.list", a.InterventionsListParams, a.InterventionsListResult
    )
    answer = Helper(
        "interventions.answer", a.InterventionsAnswerParams, a.InterventionsAnswerResult
    )
    act_turn_rewind = Helper("act_turn.rewind", a.ActTurnRewindParams, a.ActTurnRewindResult)
    workspace_tree = Helper("workspace.tree", w.TreeParams, w.TreeResult)
    workspace_blob = Helper("workspace.blob", w.BlobParams, w.BlobResult)
    discover = Helper("rpc.discover", m.RpcDiscoverParams, dict[str, Any])


_OPERATOR = "an operator's command, which reynctl prints as sent: reach it with call()"

NO_HELPER: Final[dict[str, str]] = {
    "subscribe": "each client has its own subscribe: the blocking one's notifications() "
    "read it, the async one returns a Subscription that renews itself",
    "unsubscribe": "the blocking client's own helper; the async one's Subscription.aclose()",
    "session.hello": "each client sends it itself, once per connection, before its first "
    "write, when it was given a `name`",
    "retention.get": _OPERATOR,
    "retention.set": _OPERATOR,
    "retention.gc": _OPERATOR,
    "state.du": _OPERATOR,
    "events.runs": _OPERATOR,
    "events.list": _OPERATOR,
    "events.get": _OPERATOR,
    "replay.walk": _OPERATOR,
    "replay.seek": _OPERATOR,
    "replay.compare": _OPERATOR,
}
"""The methods of METHODS with no shared helper, and why (a new method is decided here)."""


class SyncMethods(Methods, abc.ABC):
    """The helpers over a blocking `call`: each returns its result."""

    @abc.abstractmethod
    def call(self, method: str, params: Any, result_type: type[T]) -> Reply[T]:
        """Call `method` and wait for its answer."""

    def _bind(self, helper: Helper[P, R]) -> Callable[P, R]:
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return self.call(helper.method, helper.params(*args, **kwargs), helper.result).value

        helper.dress(call)
        return call


class AsyncMethods(Methods, abc.ABC):
    """The helpers over an async `call`: each is a coroutine function."""

    @abc.abstractmethod
    async def call(self, method: str, params: Any, result_type: type[T]) -> Reply[T]:
        """Call `method` and wait for its answer."""

    def _bind(self, helper: Helper[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            params = helper.params(*args, **kwargs)
            return (await self.call(helper.method, params, helper.result)).value

        helper.dress(call)
        return call

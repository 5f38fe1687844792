"""ReyndSession: an OpenAI Agents SDK session kept in reynd, with rewind and branches.

One SDK session is one external reynd agent (`names.KIND`); what its
records hold is described in `view`. Reads go through `wal.read`, which
answers on the active lineage: after `reynctl rewind` or `checkout`, the
next `get_items` (the first thing a run does) sees the session as of the
target seq. Every write is one `wal.append_batch` (one round trip, one
fsync), fenced on the tip the session last read, through the write path
every external agent shares (`reynctl.external.store`): a writer a rewind
left behind is refused (StaleBranch) until it reads again.

Branches are reynd's: each turn (from a user message to the next) starts
with a generation, branching from turn N is a rewind to it, switching is a
checkout of a branch's tip. Both move the whole system: every agent, every
session and the workspace, atomically.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit
from agents.result import RunResultBase

from reynctl.external.records import Event, constant
from reynctl.external.store import Op, ThreadStore
from reynctl.openai_agents.names import KIND
from reynctl.openai_agents.records import USAGE_FIELDS, added, step, usage
from reynctl.openai_agents.view import SessionView
from reynd.protocol import methods as m

__all__ = ["ReyndSession"]


class ReyndSession:
    """An SDK `Session` whose items are kept in a running reynd daemon.

    `socket`: the daemon's socket, found as reynctl finds it when None
    (--socket, $REYN_SOCKET, reynd.toml, the user path, the system path).
    `session_settings`: as the SDK's own sessions (its `limit` is get_items'
    default). The SDK's methods are async; each runs the blocking client in a
    worker thread, one call at a time per session.
    """

    def __init__(
        self,
        session_id: str,
        socket: str | None = None,
        *,
        timeout: float | None = 30.0,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings: SessionSettings | None = session_settings or SessionSettings()
        self.agent = KIND.agent_name(session_id)  # the reynd agent that holds it
        self._store = ThreadStore(KIND, SessionView, socket, timeout=timeout, phases=True)
        self._lock = self._store.lock

    def close(self) -> None:
        """Close the connection to the daemon (a later call opens a new one)."""
        self._store.close()

    def __enter__(self) -> ReyndSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _view(self) -> SessionView:
        """The session as the daemon has it now (one wal.read when nothing changed)."""
        return self._store.read(self.session_id)[1].view

    # -- the SDK's Session, blocking -----------------------------------------------------

    def items(self, limit: int | None = None) -> list[Any]:
        """The newest `limit` items (all when None and no settings limit), oldest first."""
        n = resolve_session_limit(limit, self.session_settings)
        with self._lock:
            held = self._view().items
            chosen = held if n is None else held[max(len(held) - n, 0) :] if n > 0 else []
            # A copy the caller may change: the SDK edits the items it is handed.
            return list(_copy([i.value for i in chosen]))

    def add(self, items: list[Any]) -> None:
        """Append `items`: one atomic batch (one fsync); a user message starts a turn."""
        if not items:
            return
        for item in items:
            if not isinstance(item, dict):
                raise TypeError(f"a session item is a dict (a response input item), not {item!r}")
        values = _copy(items)  # refused here if not JSON
        # Under the lock: a batch of its own, built on the view the previous one left (two
        # adds sharing a batch would both be numbered from the same view).
        with self._lock:
            self._store.submit(Op(self.session_id, lambda _, view: added(view, values)))

    def pop(self) -> Any:
        """Remove the newest item and return it (None when there is none): a `pop` record."""
        popped: list[Any] = []

        def build(_: str, view: SessionView) -> list[Event]:
            popped[:] = [view.items[-1].value] if view.items else []
            return [step({"oa": "pop"})] if view.items else []

        with self._lock:
            self._view()  # fenced on the tip: a pop is of the newest item the daemon has
            self._store.submit(Op(self.session_id, build, opens=False))
        return _copy(popped[0]) if popped else None

    def clear(self) -> None:
        """Forget every item and turn: a `clear` record (rewinding to before it undoes it)."""
        with self._lock:
            if self._view().items:
                self._store.submit(
                    Op(self.session_id, constant([step({"oa": "clear"})]), opens=False)
                )

    # -- the SDK's Session, async ----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The newest `limit` items, oldest first (the SDK's Session.get_items)."""
        return await asyncio.to_thread(self.items, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append items, all or none (the SDK's Session.add_items)."""
        await asyncio.to_thread(self.add, items)

    async def pop_item(self) -> Any:
        """Remove and return the newest item, or None (the SDK's Session.pop_item)."""
        return await asyncio.to_thread(self.pop)

    async def clear_session(self) -> None:
        """Forget every item (the SDK's Session.clear_session)."""
        await asyncio.to_thread(self.clear)

    # -- turns, usage and branches -------------------------------------------------------

    def turns(self) -> list[dict[str, Any]]:
        """The session's turns on the active branch: number, user message, generation seq
        (`reynctl rewind` to it branches from that message), tokens when stored."""
        with self._lock:
            return [
                {"turn": t.number, "content": t.message, "seq": t.seq, "usage": _copy(t.usage)}
                for t in self._view().turns
            ]

    def find_turns(self, text: str) -> list[dict[str, Any]]:
        """The turns whose user message contains `text` (case-insensitive), as turns() has
        them: the turn to branch from when you know what was said."""
        needle = text.casefold()
        return [t for t in self.turns() if needle in t["content"].casefold()]

    def store_usage(self, result: RunResultBase) -> None:
        """Keep `result`'s token usage with the current turn (as AdvancedSQLiteSession's
        store_run_usage)."""
        u = result.context_wrapper.usage
        totals = {f: int(getattr(u, f)) for f in USAGE_FIELDS}

        def build(_: str, view: SessionView) -> list[Event]:
            return [usage(view.turns[-1].number, totals)] if view.turns else []

        with self._lock:
            self._view()
            self._store.submit(Op(self.session_id, build, opens=False))

    def turn_usage(self, turn: int | None = None) -> dict[int, dict[str, int]]:
        """Tokens by turn (of `turn` only, when given), as stored with store_usage."""
        with self._lock:
            turns = self._view().turns
        return {
            t.number: _copy(t.usage)
            for t in turns
            if t.usage is not None and (turn is None or t.number == turn)
        }

    def usage(self) -> dict[str, int] | None:
        """The session's tokens on the active branch, summed over its turns (None: none kept)."""
        by_turn = self.turn_usage()
        if not by_turn:
            return None
        return {f: sum(u.get(f, 0) for u in by_turn.values()) for f in USAGE_FIELDS}

    def branch_from_turn(self, turn: int, *, reason: str = "") -> m.RewindResult:
        """Go back to just before turn `turn`'s user message, on a new branch: a rewind of the
        whole system to that turn's generation (every agent and the workspace move with it;
        the abandoned branch stays, `branches()` lists it)."""
        with self._lock:
            found = self._view().turn(turn)
            if found is None:
                raise ValueError(f"session {self.session_id!r} has no turn {turn}: see turns()")
            why = reason or f"branch session {self.session_id} from turn {turn}"
            result = self._store.conn().rewind(seq=found.seq, reason=why)
            self._view()  # on the new branch: the next write is fenced on it
            return result

    def branches(self) -> m.BranchesResult:
        """reynd's branches (the system's lineage, every session's with it)."""
        with self._lock:
            return self._store.conn().branches()

    def switch_branch(self, branch: int, *, reason: str = "") -> m.RewindResult:
        """Make branch `branch` active again, at its tip: a checkout of the whole system."""
        with self._lock:
            tips = {b.id: b.tip for b in self._store.conn().branches().branches}
            if branch not in tips:
                raise ValueError(f"no branch {branch}: see branches()")
            why = reason or f"switch session {self.session_id} to branch {branch}"
            result = self._store.conn().checkout(seq=tips[branch], reason=why)
            self._view()
            return result

    # The same, async, named as AdvancedSQLiteSession names them.

    async def get_conversation_turns(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.turns)

    async def find_turns_by_content(self, text: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.find_turns, text)

    async def store_run_usage(self, result: RunResultBase) -> None:
        await asyncio.to_thread(self.store_usage, result)

    async def get_turn_usage(self, turn: int | None = None) -> dict[int, dict[str, int]]:
        return await asyncio.to_thread(self.turn_usage, turn)

    async def get_session_usage(self) -> dict[str, int] | None:
        return await asyncio.to_thread(self.usage)

    async def create_branch_from_turn(self, turn: int, *, reason: str = "") -> m.RewindResult:
        return await asyncio.to_thread(lambda: self.branch_from_turn(turn, reason=reason))

    async def list_branches(self) -> m.BranchesResult:
        return await asyncio.to_thread(self.branches)

    async def switch_to_branch(self, branch: int, *, reason: str = "") -> m.RewindResult:
        return await asyncio.to_thread(lambda: self.switch_branch(branch, reason=reason))


def _copy(value: Any) -> Any:
    """A deep copy of JSON-like data the caller may change (the view's stays as read)."""
    return msgspec.json.decode(msgspec.json.encode(value))

"""`state.get` and `state.diff`: the runtime state at the tip or as of any retained seq."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from reynd.core.conversation import split_histories
from reynd.core.diff import agent_changes, escape, json_patch
from reynd.daemon.addresses import Addresses
from reynd.daemon.as_of import ReadAsOf
from reynd.daemon.context import CallContext
from reynd.daemon.rpc import Handler
from reynd.daemon.tipreply import TipReply
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.state import RuntimeState
from reynd.storage.store import Store

__all__ = ["FilesDiff", "StateApi", "at_tip"]

# The workspace files that differ between two seqs (None: workspace rewind is off).
FilesDiff = Callable[[int, int], Awaitable[list[m.FileChange] | None]]


def at_tip(p: m.StateParams, head: int) -> bool:
    """A `state.get` of the whole state at the tip: answered from the reply kept for `head`."""
    whole = p.agent is None and p.history_last is None
    return whole and p.at is None and p.tag is None and (p.seq is None or p.seq == head)


class StateApi:
    def __init__(
        self, store: Store, as_of: ReadAsOf, addresses: Addresses, files: FilesDiff
    ) -> None:
        self._store = store
        self._files = files
        self._as_of = as_of
        self._tip = TipReply()  # state.get at the tip, encoded once per head
        self._addresses = addresses

    def handlers(self) -> dict[str, Handler]:
        return {"state.get": self._get, "state.diff": self._diff}

    async def _get(self, p: m.StateParams, ctx: CallContext) -> m.StateResult | msgspec.Raw:
        store = self._store
        head = store.head
        if at_tip(p, head):
            # The hot read (a UI polling the tip): encoded once per head.
            return self._tip.get(head, lambda: self._result(head, store.state))
        seq = head if p.seq is None else p.seq
        if p.at is not None:  # where the tip was at that time, on whatever branch
            seq = self._addresses.tip_at(self._addresses.time(p.at))
        elif p.tag is not None:
            seq = self._addresses.tagged(p.tag)
        state = await self._as_of(seq)
        agents = state.agents
        if p.agent is not None:
            if p.agent not in agents:
                raise errors.UnknownAgent(
                    f"no agent {p.agent!r} as of seq {seq}", {"agent": p.agent, "seq": seq}
                )
            agents = {p.agent: agents[p.agent]}
        result = self._result(seq, state, agents)
        if p.history_last is not None:
            _keep_last(result, p.history_last)
        return result

    def _result(
        self, seq: int, state: RuntimeState, agents: dict[str, Any] | None = None
    ) -> m.StateResult:
        lineage = self._store.lineage
        return m.StateResult(
            seq=seq,
            active=lineage.is_active(seq),
            branch=lineage.branch_of(seq),
            agents=state.agents if agents is None else agents,
        )

    async def _diff(self, p: m.DiffParams, ctx: CallContext) -> m.DiffResult:
        from_seq = self._addresses.seq_or_tag(p.from_seq, p.from_tag)
        to_seq = self._addresses.seq_or_tag(p.to_seq, p.to_tag)
        # The tip's state is the live one, which a commit changes while the other side is
        # rebuilt: so the tip is read last, once nothing is awaited any more.
        if from_seq == self._store.head:
            after_state = await self._as_of(to_seq)
            before_state = await self._as_of(from_seq)
        else:
            before_state = await self._as_of(from_seq)
            after_state = await self._as_of(to_seq)
        conversations = _conversations(before_state, after_state, p.agent)
        before, after = before_state.agents, after_state.agents
        if p.agent is not None:
            if p.agent not in before and p.agent not in after:
                raise errors.UnknownAgent(
                    f"no agent {p.agent!r} as of seq {from_seq} or {to_seq}", {"agent": p.agent}
                )
            before = {p.agent: before[p.agent]} if p.agent in before else {}
            after = {p.agent: after[p.agent]} if p.agent in after else {}
        agents: dict[str, list[m.Change]] = {}
        whole: list[tuple[str, str, Any, Any]] = []  # every agent's, for the patch
        for name in sorted(before.keys() | after.keys()):
            if name not in before:  # born between the two seqs
                changes = [("", "add", None, msgspec.to_builtins(after[name]))]
            elif name not in after:  # not yet born as of to_seq (a diff backwards)
                changes = [("", "remove", msgspec.to_builtins(before[name]), None)]
            else:
                changes = agent_changes(before[name], after[name])
            whole.extend((f"/{escape(name)}{path}", op, b, a) for path, op, b, a in changes)
            if changes:
                agents[name] = [
                    m.Change(path=path or "/", op=op, before=b, after=a)  # type: ignore[arg-type]
                    for path, op, b, a in changes
                ]
        return m.DiffResult(
            from_seq=from_seq,
            to_seq=to_seq,
            agents=agents,
            fork=self._store.lineage.common(from_seq, to_seq),
            conversations=conversations,
            files=await self._files(from_seq, to_seq) if p.files else None,
            patch=json_patch(whole) if p.patch else None,
        )


def _keep_last(result: m.StateResult, n: int) -> None:
    """Cut each agent's history to its last `n` messages, in copies: `result.agents` may be
    the live state's own dict, which no read may change."""
    agents = dict(result.agents)
    for name, agent in result.agents.items():
        cut = len(agent.history) - n
        if cut > 0:
            agents[name] = msgspec.structs.replace(agent, history=agent.history[cut:])
            result.history_from[name] = cut
    result.agents = agents


def _conversations(
    before: RuntimeState, after: RuntimeState, only: str | None
) -> dict[str, m.Conversation]:
    """Per agent whose messages differ: the shared start, what only each side has."""
    out: dict[str, m.Conversation] = {}
    for name in sorted(before.agents.keys() | after.agents.keys()):
        if only is not None and name != only:
            continue
        a, b = before.agents.get(name), after.agents.get(name)
        common, removed, added = split_histories(a.history if a else [], b.history if b else [])
        if removed or added:
            out[name] = m.Conversation(common=common, removed=removed, added=added)
    return out

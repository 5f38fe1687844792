"""Method handlers of the agent runtime: agents.*, interventions.*, act_turn.rewind."""

from __future__ import annotations

from reynd.daemon.as_of import ReadAsOf
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Coordinator
from reynd.daemon.follow import Follow
from reynd.daemon.reset_api import reset_note
from reynd.daemon.rpc import Handler
from reynd.protocol import agent_methods as a
from reynd.protocol import errors
from reynd.protocol.events import StepCommitted
from reynd.runtime.registry import AgentRegistry
from reynd.storage.store import Store

__all__ = ["RuntimeApi"]


class RuntimeApi:
    def __init__(
        self,
        registry: AgentRegistry,
        store: Store,
        as_of: ReadAsOf,
        coordinator: Coordinator,
    ) -> None:
        """`as_of` and `coordinator` serve act_turn.rewind; the rest is the registry's."""
        self._registry = registry
        self._store = store
        self._as_of = as_of
        self._coordinator = coordinator

    def handlers(self) -> dict[str, Handler]:
        return {
            "agents.create": self._create,
            "agents.configure": self._configure,
            "agents.list": self._list,
            "agents.get": self._get,
            "agents.send": self._send,
            "agents.cancel": self._cancel,
            "agents.resolve": self._resolve,
            "interventions.list": self._interventions,
            "interventions.answer": self._answer,
            "act_turn.rewind": self._act_turn_rewind,
        }

    async def _create(self, p: a.AgentsCreateParams, ctx: CallContext) -> a.AgentInfo:
        return await self._registry.create(p.name, p.executor, p.options, p.session)

    async def _configure(self, p: a.AgentsConfigureParams, ctx: CallContext) -> a.AgentInfo:
        return await self._registry.configure(p.agent, p.executor, p.options)

    async def _list(self, p: a.AgentsListParams, ctx: CallContext) -> a.AgentsListResult:
        return a.AgentsListResult(agents=self._registry.infos(p.session))

    async def _get(self, p: a.AgentsGetParams, ctx: CallContext) -> a.AgentInfo:
        return self._registry.info(p.agent)

    async def _send(self, p: a.AgentsSendParams, ctx: CallContext) -> a.AgentsSendResult:
        return await self._registry.send(p.agent, p.text, wait=p.wait, wait_seconds=p.timeout)

    async def _cancel(self, p: a.AgentsCancelParams, ctx: CallContext) -> a.AgentsCancelResult:
        return a.AgentsCancelResult(cancelled=await self._registry.cancel(p.agent))

    async def _resolve(self, p: a.AgentsResolveParams, ctx: CallContext) -> a.AgentInfo:
        return self._registry.resolve(p.agent, p.action)

    async def _interventions(
        self, p: a.InterventionsListParams, ctx: CallContext
    ) -> a.InterventionsListResult:
        return a.InterventionsListResult(interventions=self._registry.interventions(p.agent))

    async def _answer(
        self, p: a.InterventionsAnswerParams, ctx: CallContext
    ) -> a.InterventionsAnswerResult:
        seq, buffered = await self._registry.answer(p.agent, p.intervention_id, p.answer)
        return a.InterventionsAnswerResult(seq=seq, buffered=buffered)

    async def _act_turn_rewind(
        self, p: a.ActTurnRewindParams, ctx: CallContext
    ) -> a.ActTurnRewindResult:
        self._check_target(p.seq)
        at = await self._as_of(p.seq)
        agent = at.agents.get(p.agent)
        if agent is None:
            raise errors.UnknownAgent(
                f"no agent {p.agent!r} as of seq {p.seq}", {"agent": p.agent, "seq": p.seq}
            )
        if not agent.pending_chains:
            raise errors.InvalidEvent(
                f"at seq {p.seq} agent {p.agent!r} has no turn in flight: an act-turn rewind "
                f"lands between two steps of a turn (use `rewind {p.seq}` for a boundary)",
                {"agent": p.agent, "seq": p.seq},
            )
        chain = agent.pending_chains[0]
        rerun = self._steps_committed_after(p.agent, chain.turn_id, p.seq)
        note = reset_note(ctx, p.reason)
        follow = None if p.then is None else Follow(self._store, self._registry, p.then, None)
        result = await self._coordinator.request(
            "act_turn", p.seq, agent=p.agent, note=note, then=follow, dry_run=p.dry_run
        )
        if follow is not None:
            result = await follow.answer(result)
        return a.ActTurnRewindResult(
            reset_seq=result.reset_seq,
            target=result.target,
            branch=result.branch,
            turn_id=chain.turn_id,
            ghost_replayed=len(chain.steps),
            rerun=rerun,
            cancelled=[{"agent": c.agent, "turn_id": c.turn_id} for c in result.cancelled],
            duration_ms=result.duration_ms,
            reason=result.reason,
            effects=result.effects,
            dry_run=result.dry_run,
            preview=result.preview,
            sent=result.sent,
        )

    def _check_target(self, seq: int) -> None:
        """Refuse a seq no act-turn rewind can land on, naming a command that would work.

        In the order of Store.prepare_reset (which checks again in the coordinator).
        """
        store = self._store
        head = store.head
        below = "no seq: the log is empty"
        if head:
            below = f"a seq in 0..{head - 1}, below the tip {head}"
        if seq > head:
            raise errors.SeqOutOfRange(
                f"seq {seq} is beyond the tip; an act-turn rewind lands on {below}",
                {"seq": seq, "head": head},
            )
        if seq == head:
            raise errors.NothingToDo(
                f"seq {seq} is already the tip; an act-turn rewind lands on {below}",
                {"seq": seq, "head": head},
            )
        store.plan(seq)  # BelowFloor: collected history, where `checkout` cannot help either
        if not store.lineage.is_active(seq):
            raise errors.NotActive(
                f"seq {seq} is not on the active branch; act-turn rewinds stay on it "
                f"(use `checkout {seq}` to switch to its branch)",
                {"seq": seq, "branch": store.lineage.branch_of(seq)},
            )

    def _steps_committed_after(self, agent: str, turn_id: str, seq: int) -> int:
        """Steps of `turn_id` committed on the active branch after `seq` (they will re-run)."""
        store = self._store
        count = 0
        for lo, hi in store.lineage.iter_intervals(store.head):
            if hi <= seq:
                break
            for event in store.wal.read(max(lo, seq + 1), hi):
                if (
                    isinstance(event, StepCommitted)
                    and event.agent == agent
                    and event.turn_id == turn_id
                ):
                    count += 1
        return count

"""The AgentRegistry: every agent's runner, and the runtime's methods.

Runners live in one nursery owned by the registry. A rewind stops them all
(`cancel_all`, under the coordinator's exclusive write gate, so nothing is
half-appended) and starts fresh ones from the rebuilt state (`restart`):
turns in flight as of the target continue by ghost replay of their memos.
At start-up (`restore_all`) the same happens from the recovered state, and a
step left open by a crash is reported as ambiguous for the operator; one that
a clean stop cut (`cut_steps`, see reynd.runtime.clean_stop) runs again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import structlog
import trio

from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol import methods as m
from reynd.protocol.agent_methods import (
    AgentInfo,
    AgentsSendResult,
    AmbiguousStep,
    InterventionInfo,
)
from reynd.protocol.executor import EXTERNAL
from reynd.protocol.state import AgentState, RuntimeState
from reynd.runtime.agent import AgentRunner, Append, Resolution, turn_id_for
from reynd.runtime.clean_stop import CutStep, open_steps
from reynd.runtime.executors import Executor, make_executor, validate_options
from reynd.runtime.procs import ProcessGroups
from reynd.storage.store import Store

__all__ = ["AgentRegistry"]


log = structlog.get_logger("reynd.registry")


class _TurnWaiter:
    """A `send --wait` caller: woken when its turn ends, asks a question, or is abandoned."""

    __slots__ = (
        "abandoned",
        "asked",
        "done",
        "ended",
        "error",
        "message_id",
        "message_seq",
        "redelivered",
    )

    def __init__(self, message_seq: int, message_id: str) -> None:
        self.message_seq = message_seq
        self.message_id = message_id
        self.redelivered: int | None = None  # the seq a rewind delivered it again at
        self.done = trio.Event()
        self.ended: ev.TurnEnded | None = None
        self.asked: ev.InterventionAsked | None = None
        self.error: errors.ReyndError | None = None  # the turn failed for storage
        self.abandoned = False


class AgentRegistry:
    def __init__(
        self,
        store: Store,
        append: Append,
        publish: Callable[[str, int, dict[str, Any]], None] = lambda topic, seq, data: None,
        groups: ProcessGroups | None = None,
    ) -> None:
        self._store = store
        self._groups = groups  # where command executors record their processes
        self._append = append
        self._runners: dict[str, AgentRunner] = {}
        self._publish = publish
        self._ghost: dict[str, int] = {}  # ghost-replayed steps of stopped runners
        self._executors: dict[str, tuple[bytes, Executor]] = {}
        self._calls: dict[str, int] = {}  # executor calls per agent since start
        self._waiters: dict[str, _TurnWaiter] = {}
        # Per agent, the step.started seqs of steps a crash left open that the
        # operator has not resolved yet, noted by cancel_all for restart.
        self._held: dict[str, set[int | None]] = {}
        self._nursery: trio.Nursery | None = None

    # -- lifecycle ----------------------------------------------------------------------

    async def run(
        self,
        *,
        resume: frozenset[CutStep] = frozenset(),
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Own the runners' nursery; restore every agent, then run until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.restore_all(resume)
            task_status.started()
            await trio.sleep_forever()

    def restore_all(self, resume: frozenset[CutStep] = frozenset()) -> None:
        """Start a runner per agent of the tip's state (crash recovery = reconstruct(head)).

        An open step is re-run when the daemon cut it on purpose: the log's
        last record is a reset record, or a clean stop listed it (`resume`,
        checked against this state by clean_stop.take). Otherwise it may have
        had effects before a crash, and the operator decides.
        """
        state = self._store.state
        rerun = self._store.lineage.is_reset(self._store.head)
        for name in state.agents:
            cut = set(open_steps(state, [name]))
            if cut and cut <= resume:
                log.info("agent.resume_cut_step", agent=name, steps=len(cut))
            self._start(name, rerun_open_step=rerun or cut <= resume)

    def cut_steps(self) -> list[CutStep]:
        """The open steps this daemon's runners were running or about to run.

        Called once the runners are stopped and the last append is durable
        (a clean stop): the daemon cancelled these itself. A step held as
        ambiguous for the operator is not among them.
        """
        owners = [name for name, r in self._runners.items() if r.rerun_open_step]
        return open_steps(self._store.state, owners)

    def restart(self) -> None:
        """After a rewind: fresh runners from the rebuilt state.

        A step open as of the target was cut by the daemon and runs again,
        unless it is a step left open by a crash that the operator has not
        resolved yet: a rewind that keeps it does not decide for them.
        """
        held, self._held = self._held, {}
        for name, agent in self._store.state.agents.items():
            open_seqs = {c.open_step_seq for c in agent.pending_chains if c.open_step is not None}
            self._start(name, rerun_open_step=not open_seqs & held.get(name, set()))
        # A `send --wait` whose message the rewind abandoned will never see its turn end;
        # one the rewind delivered again (reapply, issue 25) is told where it went.
        lineage = self._store.lineage
        for turn_id, waiter in list(self._waiters.items()):
            if not lineage.is_active(waiter.message_seq):
                del self._waiters[turn_id]
                waiter.redelivered = self._inbox_seq(waiter.message_id)
                waiter.abandoned = True
                waiter.done.set()

    def _inbox_seq(self, message_id: str) -> int | None:
        """The seq of the tip's inbox item `message_id`, if a reset just delivered it again."""
        for agent in self._store.state.agents.values():
            for item in agent.inbox:
                if item.message_id == message_id:
                    return item.seq
        return None

    def _start(self, name: str, *, rerun_open_step: bool) -> None:
        assert self._nursery is not None
        agent = self._store.state.agents.get(name)
        if agent is None or agent.executor == EXTERNAL or name in self._runners:
            return  # an external runtime drives this agent through wal.append
        runner = AgentRunner(
            name,
            lambda: self._store.state,
            self._append,
            self._executor_for,
            rerun_open_step=rerun_open_step,
        )
        runner.on_status = self._status_changed
        runner.on_turn_error = self._turn_error
        self._runners[name] = runner
        self._nursery.start_soon(runner.run, name=f"agent:{name}")

    def _status_changed(self, runner: AgentRunner) -> None:
        self._publish(
            "agents",
            self._store.head,
            {
                "agent": runner.name,
                "status": runner.status,
                "turn_id": runner.turn_id,
                "step": runner.step,
            },
        )

    def in_flight(self) -> list[m.CancelledChain]:
        """Every turn in flight that a runner is driving (not one held as ambiguous):
        what a rewind now would cancel."""
        agents = self._store.state.agents
        return [
            m.CancelledChain(agent=name, turn_id=chain.turn_id)
            for name, runner in self._runners.items()
            if runner.status != "ambiguous" and name in agents
            for chain in agents[name].pending_chains
        ]

    async def cancel_all(self) -> list[m.CancelledChain]:
        """Stop every runner (a rewind); returns the turns that were in flight."""
        cancelled = self.in_flight()
        self._held = {}
        for runner in self._runners.values():
            agent = self._store.state.agents.get(runner.name)
            if agent is not None and not runner.rerun_open_step:
                self._held[runner.name] = {
                    c.open_step_seq for c in agent.pending_chains if c.open_step is not None
                }
        for runner in self._runners.values():
            runner.scope.cancel()
        for runner in self._runners.values():
            await runner.stopped.wait()
            self._ghost[runner.name] = (
                self._ghost.get(runner.name, 0) + runner.counters.ghost_replayed
            )
        self._runners.clear()
        return cancelled

    def on_commit(self, events: Sequence[ev.Event]) -> None:
        """Wake the runners whose agent changed; wake `send --wait` callers whose turn
        ended or asked the operator (the turn then waits: so would the caller)."""
        for event in events:
            if isinstance(event, ev.AgentCreated | ev.AgentConfigured) and self._nursery:
                self._start(event.agent, rerun_open_step=True)
            agent = getattr(event, "agent", None)
            runner = self._runners.get(agent) if agent else None
            if runner is not None:
                runner.kick()
            if isinstance(event, ev.TurnEnded):
                waiter = self._waiters.pop(event.turn_id, None)
                if waiter is not None:
                    waiter.ended = event
                    waiter.done.set()
            elif isinstance(event, ev.InterventionAsked) and self._waits_for(event):
                waiter = self._waiters.pop(event.turn_id or "", None)
                if waiter is not None:
                    waiter.asked = event
                    waiter.done.set()

    def _turn_error(self, turn_id: str, err: errors.ReyndError) -> None:
        """A turn failed for storage: its `send --wait` caller gets `err` now, before
        anything else is tried (the turn's end may not be writable either)."""
        waiter = self._waiters.pop(turn_id, None)
        if waiter is not None:
            waiter.error = err
            waiter.done.set()

    def fail_waiters(self, err: errors.ReyndError) -> None:
        """Answer every `send --wait` caller with `err` (the WAL failed: the daemon stops)."""
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.error = err
            waiter.done.set()

    def _waits_for(self, asked: ev.InterventionAsked) -> bool:
        """Whether the question is still open (an answer sent early closes it at once)."""
        agent = self._store.state.agents.get(asked.agent)
        return agent is not None and asked.intervention_id in agent.interventions

    def _executor_for(self, agent: AgentState) -> Executor:
        config = msgspec.json.encode([agent.executor, agent.options])
        cached = self._executors.get(agent.name)
        if cached is None or cached[0] != config:
            if cached is not None:
                self._calls[agent.name] = self._calls.get(agent.name, 0) + cached[1].calls
            cached = (config, make_executor(agent.executor, agent.options, self._groups))
            self._executors[agent.name] = cached
        return cached[1]

    def executor_calls(self, name: str) -> int:
        cached = self._executors.get(name)
        return self._calls.get(name, 0) + (cached[1].calls if cached else 0)

    # -- queries --------------------------------------------------------------------------

    def _agent(self, name: str) -> AgentState:
        agent = self._store.state.agents.get(name)
        if agent is None:
            raise errors.UnknownAgent(
                f"no agent {name!r}: create it with `reynctl agents create {name}`", {"agent": name}
            )
        return agent

    def info(self, name: str) -> AgentInfo:
        agent = self._agent(name)
        runner = self._runners.get(name)
        return AgentInfo(
            name=agent.name,
            session=agent.session,
            executor=agent.executor,
            options=agent.options,
            status=runner.status if runner else "idle",
            created_seq=agent.created_seq,
            applied_seq=agent.applied_seq,
            inbox=len(agent.inbox),
            turn_id=runner.turn_id if runner else None,
            step=runner.step if runner else None,
            turns_completed=agent.turns_completed,
            tokens_in=agent.tokens_in,
            tokens_out=agent.tokens_out,
            ambiguous=runner.ambiguous if runner else None,
            waiting_for=runner.waiting_for if runner else None,
            last_error=runner.last_error if runner else None,
            executor_calls=self.executor_calls(name),
            ghost_replayed=self._ghost.get(name, 0)
            + (runner.counters.ghost_replayed if runner else 0),
        )

    def infos(self, session: str | None = None) -> list[AgentInfo]:
        return [
            self.info(name)
            for name, a in sorted(self._store.state.agents.items())
            if session is None or a.session == session
        ]

    def ambiguous(self) -> list[AmbiguousStep]:
        return [r.ambiguous for r in self._runners.values() if r.ambiguous is not None]

    def interventions(self, agent: str | None) -> list[InterventionInfo]:
        agents = [self._agent(agent)] if agent else list(self._store.state.agents.values())
        return [
            InterventionInfo(
                agent=a.name,
                intervention_id=i.intervention_id,
                question=i.question,
                asked_seq=i.asked_seq,
                turn_id=i.turn_id,
            )
            for a in agents
            for i in a.interventions.values()
        ]

    # -- commands --------------------------------------------------------------------------

    async def create(
        self, name: str, executor: str, options: dict[str, object], session: str
    ) -> AgentInfo:
        validate_options(executor, dict(options))
        if name in self._store.state.agents:
            raise errors.AgentExists(f"agent {name!r} already exists", {"agent": name})
        await self._append(
            [ev.AgentCreated(agent=name, session=session, executor=executor, options=dict(options))]
        )
        return self.info(name)

    async def configure(
        self, name: str, executor: str | None, options: dict[str, object] | None
    ) -> AgentInfo:
        agent = self._agent(name)
        validate_options(
            executor or agent.executor, dict(options if options is not None else agent.options)
        )
        await self._append(
            [
                ev.AgentConfigured(
                    agent=name,
                    executor=executor,
                    options=dict(options) if options is not None else None,
                )
            ]
        )
        return self.info(name)

    async def send(
        self, name: str, text: str, *, wait: bool, wait_seconds: float
    ) -> AgentsSendResult:
        received = self.message(name, text)
        (durable,) = await self._append([received])
        assert isinstance(durable, ev.MessageReceived)
        return await self.delivered(durable, wait=wait, wait_seconds=wait_seconds)

    def message(
        self, name: str, text: str, state: RuntimeState | None = None
    ) -> ev.MessageReceived:
        """The record that puts `text` in `name`'s inbox, for `state` (default the tip's).

        Raises UnknownAgent when `name` does not exist in `state`: a rewind that
        delivers a message (issue 25) checks it against the state as of its target.
        """
        agents = (self._store.state if state is None else state).agents
        if name not in agents:
            self._agent(name)  # the tip's error, saying how to create it
            raise errors.UnknownAgent(
                f"no agent {name!r} as of the rewind's target: it was created later "
                "or on another branch",
                {"agent": name},
            )
        return ev.MessageReceived(agent=name, message_id=f"m{uuid.uuid4().hex[:12]}", text=text)

    def redelivery(self, old: ev.MessageReceived, state: RuntimeState) -> ev.MessageReceived:
        """`old` (from a branch a move abandons) delivered again: same id, text and sender.

        Raises UnknownAgent when its agent does not exist in `state` (the
        target's): a reapply never drops a message silently.
        """
        if old.agent not in state.agents:
            raise errors.UnknownAgent(
                f"the message at seq {old.seq} cannot be delivered again: no agent "
                f"{old.agent!r} as of the target; move without reapply to drop it",
                {"agent": old.agent, "seq": old.seq},
            )
        return ev.MessageReceived(
            agent=old.agent, message_id=old.message_id, text=old.text, sender=old.sender
        )

    def delivery(self, received: ev.MessageReceived) -> AgentsSendResult:
        """What agents.send answers at once for the durable `received`."""
        return AgentsSendResult(
            message_id=received.message_id, seq=received.seq, turn_id=turn_id_for(received.seq)
        )

    async def delivered(
        self, received: ev.MessageReceived, *, wait: bool, wait_seconds: float
    ) -> AgentsSendResult:
        """What agents.send answers for the durable `received`; with `wait`, once its turn
        ended, asked a question, or was abandoned (or `wait_seconds` passed).

        A turn ends only after more durable appends than the one that delivered the
        message, so a caller that comes here straight from that append is in time.
        """
        name = received.agent
        result = self.delivery(received)
        turn_id = result.turn_id
        if not wait:
            return result
        waiter = self._waiters.setdefault(turn_id, _TurnWaiter(received.seq, received.message_id))
        try:
            with trio.move_on_after(wait_seconds):
                await waiter.done.wait()
        finally:
            if self._waiters.get(turn_id) is waiter and not waiter.done.is_set():
                del self._waiters[turn_id]  # timed out or the caller went away
        if waiter.error is not None:
            err = waiter.error
            raise type(err)(
                f"agent {name!r}: {err.message} (the message is durable, seq {received.seq})",
                {**err.data, "agent": name, "turn_id": turn_id, "message_seq": received.seq},
            )
        if waiter.ended is not None:
            result.boundary_seq = waiter.ended.seq
            result.outcome = waiter.ended.outcome
            result.reply = waiter.ended.reply
        elif waiter.asked is not None:
            result.intervention_id = waiter.asked.intervention_id
            result.question = waiter.asked.question
        elif waiter.redelivered is not None:
            result.outcome = "redelivered"  # abandoned, and delivered again after the reset
            result.redelivered_seq = waiter.redelivered
        elif waiter.abandoned:
            result.outcome = "abandoned"  # a rewind abandoned the message before its turn ended
        return result

    async def cancel(self, name: str) -> list[dict[str, str]]:
        self._agent(name)
        runner = self._runners.get(name)
        turn_id = runner.cancel_turn() if runner else None
        return [{"agent": name, "turn_id": turn_id}] if turn_id else []

    def resolve(self, name: str, action: Resolution) -> AgentInfo:
        self._agent(name)
        runner = self._runners.get(name)
        if runner is None or runner.ambiguous is None:
            raise errors.NothingToDo(
                f"agent {name!r} has no ambiguous step to resolve", {"agent": name}
            )
        runner.resolve(action)
        return self.info(name)

    async def answer(self, name: str, intervention_id: str, answer: str) -> tuple[int, bool]:
        agent = self._agent(name)
        buffered = intervention_id not in agent.interventions
        (event,) = await self._append(
            [ev.InterventionAnswered(agent=name, intervention_id=intervention_id, answer=answer)]
        )
        return event.seq, buffered

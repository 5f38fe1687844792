"""One agent's runner: a trio task that takes messages and runs their turns.

A turn is a sequence of act-steps. Each step appends `step.started`, calls
the executor, and appends its memo (`step.committed`, plus the events its
directives ask for) before the next step begins; `turn.ended` is the turn's
generation boundary.

Cancellation, the three kinds told apart:
- `agents.cancel`: the runner cancels its own turn scope; the turn is aborted
  at whatever await it is in (mid-executor call, mid-subprocess) and ends
  with outcome `cancelled`.
- a rewind: the registry cancels the runner's outer scope; nothing more is
  appended, and a new runner continues from the rebuilt state.
- the daemon itself being cancelled (shutdown): propagates untouched; the
  turn stays in flight in the log and resumes on the next start, its open
  step re-run (the daemon lists it in `state/clean-stop`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import msgspec
import structlog
import trio

from reynd.core.reduce import find_chain
from reynd.protocol import errors
from reynd.protocol import events as ev
from reynd.protocol.agent_methods import AgentStatus, AmbiguousStep
from reynd.protocol.executor import StepRequest, StepResult
from reynd.protocol.limits import MAX_COUNT, MAX_DEPTH, nesting_exceeds
from reynd.protocol.state import AgentState, Chain, RuntimeState
from reynd.runtime import resume
from reynd.runtime.executors import Executor, StepFailed
from reynd.runtime.history import SanitizedHistory

__all__ = ["AgentRunner", "Append"]

log = structlog.get_logger("reynd.agent")


class Append(Protocol):
    """The runtime's path to the WAL (daemon/writer.py): the events with their seqs, once durable.

    `files=False`: without the workspace's changes (they stay pending).
    """

    def __call__(
        self, events: Sequence[ev.Event], *, files: bool = True
    ) -> Awaitable[list[ev.Event]]: ...


Resolution = Literal["retry", "skip", "abort"]


def turn_id_for(message_seq: int) -> str:
    """A turn is named after the seq of the message it answers: known at send time."""
    return f"t{message_seq}"


@dataclass(slots=True)
class _Counters:
    ghost_replayed: int = 0
    steps_run: int = 0


class AgentRunner:
    """Runs the turns of one agent, one at a time."""

    def __init__(
        self,
        name: str,
        state: Callable[[], RuntimeState],
        append: Append,
        executor_for: Callable[[AgentState], Executor],
        *,
        rerun_open_step: bool,
    ) -> None:
        self.name = name
        self._state = state
        self._append = append
        self.scope = trio.CancelScope()  # cancelled by the registry (rewind)
        self.stopped = trio.Event()
        self._status: AgentStatus = "idle"
        self.on_status: Callable[[AgentRunner], None] = lambda runner: None
        # A turn failed for storage (turn id, error): its `send --wait` caller hears first.
        self.on_turn_error: Callable[[str, errors.ReyndError], None] = lambda turn, err: None
        self.turn_id: str | None = None
        self.step: int | None = None
        self.waiting_for: str | None = None
        self.last_error: str | None = None
        self.ambiguous: AmbiguousStep | None = None
        self.counters = _Counters()
        self._kick = trio.Event()
        self._history = SanitizedHistory()
        self._turn_scope: trio.CancelScope | None = None
        self._rerun_open_step = rerun_open_step
        self._resolution: Resolution | None = None
        self._executor_for = executor_for

    @property
    def status(self) -> AgentStatus:
        return self._status

    @status.setter
    def status(self, value: AgentStatus) -> None:
        # Assigned last wherever turn_id/step change with it, so that the
        # callback sees a consistent runner.
        if value != self._status:
            self._status = value
            self.on_status(self)

    # -- control (registry) ----------------------------------------------------------

    @property
    def rerun_open_step(self) -> bool:
        """False while a step open in the log may have run before a crash (operator decides)."""
        return self._rerun_open_step

    def kick(self) -> None:
        """Something about this agent changed: look again."""
        self._kick.set()

    def cancel_turn(self) -> str | None:
        """Hard-cancel the turn in flight (agents.cancel); returns its id."""
        if self._turn_scope is None or self.turn_id is None:
            return None
        self._turn_scope.cancel()
        return self.turn_id

    def resolve(self, action: Resolution) -> None:
        self._resolution = action
        self.kick()

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            with self.scope:
                try:
                    await self._loop()
                except errors.StorageFailed as exc:
                    # The WAL failed (rule 5): the daemon stops by itself and
                    # recovers on restart. Not this runner's own failure: it
                    # reports and waits to be cancelled instead of dying.
                    self._storage_error(exc, "stopped")
                    self.status = "failed"
                    await trio.sleep_forever()
        finally:
            self.status = "idle" if self.status != "failed" else "failed"
            self.stopped.set()

    def _agent(self) -> AgentState | None:
        return self._state().agents.get(self.name)

    async def _loop(self) -> None:
        while True:
            self._kick = trio.Event()
            agent = self._agent()
            if agent is None:
                return  # gone as of the current state (a rewind before its creation)
            chain = agent.pending_chains[0] if agent.pending_chains else None
            if chain is None and agent.inbox:
                item = agent.inbox[0]
                await self._append(
                    [
                        ev.TurnStarted(
                            agent=self.name,
                            turn_id=turn_id_for(item.seq),
                            message_id=item.message_id,
                        )
                    ]
                )
                continue
            if chain is None:
                self.turn_id, self.step, self.status = None, None, "idle"
                await self._kick.wait()
                continue
            if chain.open_step is not None and not self._rerun_open_step:
                if not await self._settle_ambiguous(agent, chain):
                    await self._kick.wait()
                continue
            await self._run_turn(chain.turn_id)

    async def _settle_ambiguous(self, agent: AgentState, chain: Chain) -> bool:
        """Report a step left open by a crash; act once the operator resolved it."""
        assert chain.open_step is not None
        self.turn_id, self.step, self.status = chain.turn_id, chain.open_step, "ambiguous"
        self.ambiguous = AmbiguousStep(
            agent=self.name,
            turn_id=chain.turn_id,
            step=chain.open_step,
            input=chain.open_step_input or {},
            started_seq=chain.open_step_seq or 0,
        )
        action, self._resolution = self._resolution, None
        if action is None:
            return False
        log.info(
            "agent.ambiguous_resolved",
            agent=self.name,
            turn_id=chain.turn_id,
            step=chain.open_step,
            action=action,
        )
        resolution: ev.Event
        if action == "retry":
            self._rerun_open_step = True
            self.ambiguous = None
            return True
        if action == "skip":
            resolution = ev.StepCommitted(
                agent=self.name,
                turn_id=chain.turn_id,
                step=chain.open_step,
                output={"skipped": True},
            )
        else:
            resolution = ev.TurnEnded(
                agent=self.name,
                turn_id=chain.turn_id,
                outcome="aborted",
                reply="aborted by the operator",
            )
        try:
            await self._append([resolution])
        except errors.StorageUnavailable as exc:
            # Nothing was written: the step stays ambiguous, to resolve again.
            self._storage_error(exc, "was not resolved", tell=False)
            return False
        self.ambiguous = None
        return True

    async def _run_turn(self, turn_id: str) -> None:
        self.turn_id, self.status = turn_id, "running"
        scope = self._turn_scope = trio.CancelScope()
        try:
            with scope:
                await self._turn_body(turn_id)
        except errors.StorageUnavailable as exc:
            await self._fail_unstored(turn_id, exc)
            return
        finally:
            self._turn_scope = None
        if scope.cancelled_caught:
            # Our own cancel (agents.cancel): close the turn. A rewind or a
            # shutdown cancels an outer scope and never reaches this line.
            log.info("agent.turn_cancelled", agent=self.name, turn_id=turn_id, step=self.step)
            ended = ev.TurnEnded(
                agent=self.name, turn_id=turn_id, outcome="cancelled", reply="cancelled"
            )
            try:
                await self._append([ended])
            except errors.StorageUnavailable as exc:
                self._storage_error(exc, "was cancelled", tell=False)
                await self._append([ended], files=False)  # its files stay pending

    async def _turn_body(self, turn_id: str) -> None:
        agent = self._agent()
        chain = find_chain(agent, turn_id) if agent else None
        if agent is None or chain is None:
            return
        plan = resume.analyze(chain)
        # Ghost replay: committed steps come from their memos, 0 executor calls.
        self.counters.ghost_replayed += len(plan.committed)
        missing = resume.missing_directives(agent, chain)
        if missing:
            await self._append(missing)
        step = plan.open_step if plan.open_step is not None else plan.next_step
        while True:
            agent = self._agent()
            chain = find_chain(agent, turn_id) if agent else None
            if agent is None or chain is None:
                return
            waiting = [
                i.intervention_id for i in agent.interventions.values() if i.turn_id == turn_id
            ]
            if waiting:
                self.waiting_for, self.status = waiting[0], "waiting"
                self._kick = trio.Event()
                await self._kick.wait()
                continue
            self.waiting_for, self.step, self.status = None, step, "running"
            try:
                executor = self._executor_for(agent)  # the agent's config may have changed
            except errors.InvalidParams as exc:
                # A configuration in the log that no executor takes (an older
                # wal.append let it in): this turn fails, never the daemon.
                await self._fail_turn(turn_id, step, f"executor error: {exc.message}")
                return
            request = StepRequest(
                agent=self.name,
                turn_id=turn_id,
                step=step,
                text=chain.text,
                history=self._history.of(agent.history, keep_open_tail=True),
                previous=[m.output for m in chain.steps],
                answers=dict(chain.answers),
                options=agent.options,
            )
            # From here on, an open step is ours: set before the append, so a
            # step.started that a clean stop lets become durable counts as ours.
            self._rerun_open_step = True
            if chain.open_step != step:
                await self._append(
                    [
                        ev.StepStarted(
                            agent=self.name,
                            turn_id=turn_id,
                            step=step,
                            input={"text": chain.text, "step": step},
                        )
                    ]
                )
            try:
                result = _within_limits(await executor.step(request))
            except Exception as exc:
                # StepFailed is the executor's own report. Anything else is a bug
                # in one executor: it fails this turn, never the whole daemon.
                # (Cancellation is a BaseException and passes through untouched.)
                # What it did is recorded with the failure; a bug's is unknown.
                reported = isinstance(exc, StepFailed)
                error = str(exc) if reported else f"executor error: {exc!r}"
                effect = (
                    executor.effect(request, None, exc) if isinstance(exc, StepFailed) else None
                )
                await self._fail_turn(turn_id, step, error, traceback=not reported, effect=effect)
                return
            self.counters.steps_run += 1
            await self._append(
                [
                    self._memo(turn_id, step, result, executor.effect(request, result, None)),
                    *resume.directive_events(self.name, turn_id, step, result),
                ]
            )
            if result.done:
                await self._append(
                    [
                        ev.TurnEnded(
                            agent=self.name, turn_id=turn_id, reply=result.reply, label=result.label
                        )
                    ]
                )
                return
            step += 1

    async def _fail_unstored(self, turn_id: str, exc: errors.StorageUnavailable) -> None:
        """What a record of this turn needed could not be stored: nothing of it was
        written (the WAL untouched). The turn ends failed, its caller told first.

        The end is recorded without the workspace's changes, which the store
        cannot take either: they stay pending for the next record. The open
        step is no longer open, so no restart finds it ambiguous.
        """
        err = self._storage_error(exc, "failed")
        await self._append(
            [ev.TurnEnded(agent=self.name, turn_id=turn_id, outcome="failed", reply=err.message)],
            files=False,
        )

    def _storage_error(
        self, exc: errors.ReyndError, what: str, *, tell: bool = True
    ) -> errors.ReyndError:
        """Log a storage error of the turn in flight, and with `tell` its `send --wait`
        caller; the error as told (it names the turn and step).

        `what`: what became of the turn ("failed", "stopped"...).
        """
        where = f"turn {self.turn_id} {what} at step {self.step}: " if self.turn_id else ""
        err = type(exc)(
            where + exc.message,
            {**exc.data, "agent": self.name, "turn_id": self.turn_id, "step": self.step},
        )
        self.last_error = err.message
        log.error(
            "agent.storage_error",
            agent=self.name,
            turn_id=self.turn_id,
            step=self.step,
            error=exc.name,
            reason=exc.data.get("reason"),
        )
        if tell and self.turn_id is not None:
            self.on_turn_error(self.turn_id, err)
        return err

    async def _fail_turn(
        self,
        turn_id: str,
        step: int,
        error: str,
        *,
        traceback: bool = False,
        effect: ev.Effect | None = None,
    ) -> None:
        """End the turn as failed, with `error` as its reply and the agent's last error;
        `effect`: what the failed step did, kept in that record."""
        self.last_error = error
        log.warning(
            "agent.step_failed",
            agent=self.name,
            turn_id=turn_id,
            step=step,
            error=error,
            exc_info=traceback,
        )
        await self._append(
            [
                ev.TurnEnded(
                    agent=self.name, turn_id=turn_id, outcome="failed", reply=error, effect=effect
                )
            ]
        )

    def _memo(
        self, turn_id: str, step: int, result: StepResult, effect: ev.Effect
    ) -> ev.StepCommitted:
        output = msgspec.to_builtins(result)
        output.pop("messages", None)  # kept once, in `messages`
        return ev.StepCommitted(
            agent=self.name,
            turn_id=turn_id,
            step=step,
            output=output,
            messages=tuple(result.messages),
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            effect=effect,
        )


def _within_limits(result: StepResult) -> StepResult:
    """The result, or StepFailed when its memo could not be written or held.

    Too deeply nested, or a count out of range: the same limits as a record
    that wal.append takes (reynd.protocol.limits).
    """
    if nesting_exceeds(msgspec.json.encode(result)):
        raise StepFailed(f"the step's result nests more than {MAX_DEPTH} levels deep")
    for name in _COUNTS:
        value = getattr(result, name)
        if value is not None and not 0 <= value <= MAX_COUNT:
            raise StepFailed(f"the step's result has {name} outside 0 to {MAX_COUNT}")
    return result


# The integers of a StepResult: they reach the memo, the agent's sums and snapshots.
_COUNTS = ("tokens_in", "tokens_out", "plan_step_done")

"""From `wal.append` params to a checked event, every refusal naming the param at fault.

Two gates: the strict types of reynd.protocol.appendable (shape, names,
identifiers: -32602 invalid_params), then, against the tip, reduce.check
(does it apply: -32012, -32006, -32007) and the executor an agent would be
run with. Both put the param path in `data.field`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import msgspec

from reynd.core.reduce import apply, check
from reynd.protocol import appendable, errors
from reynd.protocol import methods as m
from reynd.protocol.events import AgentConfigured, AgentCreated, AgentEvent, Event
from reynd.protocol.executor import AGENT_EXECUTORS, EXTERNAL
from reynd.protocol.limits import MAX_APPEND_EVENTS
from reynd.protocol.state import AgentState, Chain, Plan, RuntimeState, SkillRun
from reynd.protocol.validation import validation_details
from reynd.runtime.executors import validate_options

__all__ = ["batch_events", "check_applies", "check_batch", "event_of", "param_path"]

T = TypeVar("T")

_OWN_PARAMS = ("kind", "agent")
_ASSIGNED = ("seq", "ts", "more")


def event_of(p: m.WalAppendParams) -> Event:
    """The event `p` describes; InvalidParams (with `field`, `reason`) when it is not one.

    The plain event types decode the log and accept names older versions
    wrote; the strict ones hold what a writer may add today.
    """
    for reserved in (*_OWN_PARAMS, *_ASSIGNED):
        if reserved in p.data:
            reason = (
                "seq, ts and more are assigned by the daemon"
                if reserved in _ASSIGNED
                else f"pass {reserved} as its own param"
            )
            raise errors.InvalidParams(
                f"data.{reserved} is not allowed: {reason}",
                {"field": f"data.{reserved}", "reason": reason},
            )
    if p.kind not in appendable.KINDS:
        reason = f"unknown event kind {p.kind!r}"
        if p.kind == "rewind":
            reason += " (reset records are written by `rewind` and `checkout`)"
        raise errors.InvalidParams(
            f"{reason}: wal.append takes one of {', '.join(appendable.KINDS)}",
            {"field": "kind", "reason": reason, "valid": list(appendable.KINDS)},
        )
    fields: dict[str, Any] = {"kind": p.kind, "agent": p.agent, **p.data}
    if p.kind == "agent.created":
        # An agent created by an outside runtime is driven by it, not by reynd.
        fields.setdefault("executor", EXTERNAL)
    strict, plain = appendable.BY_KIND[p.kind]
    try:
        msgspec.convert(fields, strict)  # strict: a count is a JSON integer
        event: Event = msgspec.convert(fields, plain)
    except msgspec.ValidationError as exc:
        field, reason = validation_details(exc)
        field = param_path(field)
        raise errors.InvalidParams(
            f"invalid {p.kind!r} event (field `{field}`): {reason}",
            {"kind": p.kind, "field": field, "reason": reason},
        ) from None
    return event


def check_applies(state: RuntimeState, event: Event) -> None:
    """reduce.check, with the event field it names turned into the param path.

    An agent.created or agent.configured must also leave the agent with an
    executor reynd can build (or `external`): the agent would otherwise fail
    every turn it is given.
    """
    try:
        check(state, event)
    except errors.ReyndError as exc:
        field = exc.data.get("field")
        if isinstance(field, str):
            exc.data["field"] = param_path(field)
        raise
    if isinstance(event, AgentCreated | AgentConfigured):
        _check_executor(state, event)


def _check_executor(state: RuntimeState, event: AgentCreated | AgentConfigured) -> None:
    before = state.agents.get(event.agent)
    executor = event.executor or (before.executor if before else EXTERNAL)
    if executor not in AGENT_EXECUTORS:
        reason = f"unknown executor {executor!r}"
        raise errors.InvalidParams(
            f"{reason}: use one of {', '.join(AGENT_EXECUTORS)}",
            {"field": "data.executor", "reason": reason, "valid": list(AGENT_EXECUTORS)},
        )
    if executor == EXTERNAL:
        return  # its options are the outside runtime's business
    options = event.options if event.options is not None else (before.options if before else {})
    validate_options(executor, dict(options), field="data.options")


def param_path(event_field: str) -> str:
    """Where an event's field came from in wal.append's params: `kind`, `agent` or `data.*`."""
    if not event_field or event_field in _OWN_PARAMS:
        return event_field
    return f"data.{event_field}"


def batch_events(p: m.WalAppendBatchParams) -> list[Event]:
    """The events of a wal.append_batch, each checked as `event_of` checks one.

    A refusal names the event: `data.field` is `events[k].kind`,
    `events[k].data.*` (the batch's own `agent` stays `agent`).
    """
    if len(p.events) > MAX_APPEND_EVENTS:
        raise errors.LimitExceeded(
            f"{len(p.events)} events in one wal.append_batch: at most {MAX_APPEND_EVENTS}; "
            "split them into several batches",
            {"limit_name": "max_append_events", "limit": MAX_APPEND_EVENTS},
        )
    out: list[Event] = []
    for k, item in enumerate(p.events):
        with _member(k):
            out.append(event_of(m.WalAppendParams(agent=p.agent, kind=item.kind, data=item.data)))
    return out


def check_batch(state: RuntimeState, events: Sequence[Event]) -> None:
    """check_applies for each event against the state the ones before it leave.

    The tip's state is not touched: the agent a batch changes is copied
    (once per batch), and only the copy sees the batch's earlier events.
    """
    scratch = RuntimeState(seq=state.seq, agents=dict(state.agents))
    for k, event in enumerate(events):
        with _member(k):
            check_applies(scratch, event)
        if k == len(events) - 1:
            break
        if isinstance(event, AgentEvent):
            own = scratch.agents.get(event.agent)
            if own is not None and own is state.agents.get(event.agent):
                scratch.agents[event.agent] = _copy(own)
        apply(scratch, msgspec.structs.replace(event, seq=scratch.seq + 1))


def _copy(agent: AgentState) -> AgentState:
    """A copy reduce.apply may change without touching `agent`, in O(agent's entries).

    The containers are copied, and in full the Structs the reducer changes in
    place (chains, plans, skill runs); messages, inbox items and
    interventions are shared, as the reducer only adds or drops them (a
    deep copy of a long history would cost a batch more than its fsync).
    """
    return msgspec.structs.replace(
        agent,
        inbox=list(agent.inbox),
        history=list(agent.history),
        pending_chains=_deep(agent.pending_chains, list[Chain]),
        skill_runs=_deep(agent.skill_runs, dict[str, SkillRun]),
        interventions=dict(agent.interventions),
        buffered_answers=dict(agent.buffered_answers),
        plans=_deep(agent.plans, dict[str, Plan]),
    )


def _deep(value: T, tp: type[T]) -> T:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(value), type=tp)


@contextmanager
def _member(k: int) -> Iterator[None]:
    """Name batch member k in the field of a refusal raised inside."""
    try:
        yield
    except errors.ReyndError as exc:
        field = exc.data.get("field")
        if field != "agent":
            exc.data["field"] = f"events[{k}]" + (f".{field}" if field else "")
        exc.data["index"] = k
        exc.message = f"events[{k}]: {exc.message}"
        raise

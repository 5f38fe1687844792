"""What history an executor may see: never half a tool cycle (pure).

A rewind can land between a model's tool call and its result, and a turn can
be cancelled or aborted there. Providers reject a history where an assistant
message's tool calls are not all answered, or where a tool result has no
call: such a cycle is kept whole or dropped whole.

One exception, asked for by the runner: the cycle the turn in flight has open
at the very end of the history (its last step made tool calls, the next step
answers them). Dropping it would hide the calls from the step that must run
them, and the executor would ask the model again, forever.
"""

from __future__ import annotations

from collections.abc import Sequence

from reynd.protocol.events import Message

__all__ = ["SanitizedHistory", "complete_tool_cycles"]


def complete_tool_cycles(
    history: Sequence[Message], *, keep_open_tail: bool = False
) -> list[Message]:
    """`history` minus every tool cycle that is not complete, calls and results together.

    A cycle is an assistant message with tool calls and the tool messages
    right after it; it is complete when those answer every call. Providers
    match results to calls by position, not only by id (ids may repeat across
    turns), so a tool message anywhere else is an orphan and is dropped, and
    so are duplicate or foreign results inside a cycle.

    With `keep_open_tail`, an incomplete cycle at the very end (the last
    assistant message with tool calls, followed by nothing but tool messages)
    is kept with the results it has.
    """
    out: list[Message] = []
    i, n = 0, len(history)
    while i < n:
        m = history[i]
        i += 1
        if m.role == "tool":
            continue  # no call right before it
        if m.role != "assistant" or not m.tool_calls:
            out.append(m)
            continue
        ids = {c.id for c in m.tool_calls}
        results: dict[str, Message] = {}
        while i < n and history[i].role == "tool":
            r = history[i]
            if r.tool_call_id in ids and r.tool_call_id not in results:
                results[r.tool_call_id] = r
            i += 1
        if len(results) == len(ids) or (keep_open_tail and i == n):
            out.append(m)
            out.extend(results.values())  # in the order they came
    return out


class SanitizedHistory:
    """complete_tool_cycles of a history that only grows, in time proportional to the growth.

    The result splits at any cycle boundary (a message that is neither a tool
    result nor an assistant message with tool calls): what lies before the
    last boundary never changes again, so it is computed once and kept. A
    different list (a rewind rebuilt the state) starts over.
    """

    __slots__ = ("_prefix", "_source", "_upto")

    def __init__(self) -> None:
        self._source: Sequence[Message] | None = None
        self._upto = 0  # history[:_upto] is done, and _upto is at a boundary
        self._prefix: list[Message] = []

    def of(self, history: Sequence[Message], *, keep_open_tail: bool = False) -> list[Message]:
        if history is not self._source or len(history) < self._upto:
            self._source, self._upto, self._prefix = history, 0, []
        boundary = self._upto
        for k in range(len(history) - 1, self._upto - 1, -1):
            m = history[k]
            if m.role != "tool" and not (m.role == "assistant" and m.tool_calls):
                boundary = k + 1
                break
        if boundary > self._upto:
            self._prefix.extend(complete_tool_cycles(history[self._upto : boundary]))
            self._upto = boundary
        tail = complete_tool_cycles(history[self._upto :], keep_open_tail=keep_open_tail)
        return self._prefix + tail

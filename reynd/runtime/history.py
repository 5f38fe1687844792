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

__all__ = ["complete_tool_cycles"]


def complete_tool_cycles(
    history: Sequence[Message], *, keep_open_tail: bool = False
) -> list[Message]:
    """`history` minus every tool cycle that is not complete, calls and results together.

    With `keep_open_tail`, an open cycle at the end (the last assistant message
    with tool calls, followed by nothing but results of those calls) is kept.
    """
    tail: list[Message] = []
    if keep_open_tail:
        for i in range(len(history) - 1, -1, -1):
            m = history[i]
            if m.role == "assistant" and m.tool_calls:
                ids = {c.id for c in m.tool_calls}
                if all(r.role == "tool" and r.tool_call_id in ids for r in history[i + 1 :]):
                    history, tail = history[:i], list(history[i:])
                break
            if m.role != "tool":
                break
    answered = {m.tool_call_id for m in history if m.role == "tool"}
    out: list[Message] = []
    open_ids: set[str] = set()  # calls of kept assistant messages
    for m in history:
        if m.role == "assistant" and m.tool_calls:
            ids = {c.id for c in m.tool_calls}
            if not ids <= answered:
                continue  # dropped, and below its partial results with it
            open_ids |= ids
        elif m.role == "tool":
            if m.tool_call_id not in open_ids:
                continue  # a result whose call was dropped, or never made
            open_ids.discard(m.tool_call_id)
        out.append(m)
    return out + tail

"""The embedded default executor: deterministic, and honest about being a demo.

It calls no model. Each turn is a few act-steps that look like an agent's:
a tool call (`notes.lookup`), its result, then a reply that says it comes
from the demo executor. Messages may ask for more structure:

- `/plan a; b; c`  a plan with one act-step per item (plan-step boundaries)
- `/skill NAME`    a skill run through the phases plan, act, review (phase boundaries)
- `/ask QUESTION`  an intervention: the turn waits for the operator's answer

`delay` (seconds per step) makes work in flight observable and cancellable.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import trio

from reynd.protocol.events import Effect, Message, ToolCall
from reynd.protocol.executor import BuiltinOptions, StepRequest, StepResult
from reynd.runtime.executors.base import StepFailed

__all__ = ["BuiltinExecutor"]

PHASES = ("plan", "act", "review")


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class BuiltinExecutor:
    """Deterministic: the same request always gives the same result."""

    def __init__(self, options: BuiltinOptions) -> None:
        self.options = options
        self.calls = 0

    async def step(self, request: StepRequest) -> StepResult:
        self.calls += 1
        if self.options.delay:
            await trio.sleep(self.options.delay)
        text = request.text.strip()
        if text.startswith("/plan"):
            return self._plan(request, [p.strip() for p in text[5:].split(";") if p.strip()])
        if text.startswith("/skill"):
            return self._skill(request, text[6:].strip() or "task")
        if text.startswith("/ask"):
            return self._ask(request, text[4:].strip() or "Proceed?")
        return self._chat(request, text)

    def effect(
        self, request: StepRequest, result: StepResult | None, failure: StepFailed | None
    ) -> Effect:
        """None outside reynd: no model, no program; its tool call is pretend."""
        return Effect(executor="builtin")

    def _result(self, request: StepRequest, content: str, **kw: Any) -> StepResult:
        msg = Message(role="assistant", content=content)
        return StepResult(
            messages=[msg], tokens_in=_tokens(request.text), tokens_out=_tokens(content), **kw
        )

    def _chat(self, request: StepRequest, text: str) -> StepResult:
        call_id = f"{request.turn_id}.lookup"
        if request.step == 0:
            call = ToolCall(
                id=call_id,
                name="notes.lookup",
                arguments=msgspec.json.encode({"query": text[:40]}).decode(),
            )
            return StepResult(
                messages=[Message(role="assistant", tool_calls=(call,))],
                tokens_in=_tokens(text),
                tokens_out=3,
            )
        if request.step == 1:
            digest = hashlib.sha256(text.encode()).hexdigest()[:8]
            return StepResult(
                messages=[
                    Message(role="tool", tool_call_id=call_id, content=f"no notes for {digest}")
                ]
            )
        reply = (
            f"[builtin demo executor, no model] You said: {text!r}. "
            f"This is turn {request.turn_id}, step {request.step}, "
            f"with {len(request.history)} messages of history."
        )
        return self._result(request, reply, done=True, reply=reply, label=text[:60])

    def _plan(self, request: StepRequest, items: list[str]) -> StepResult:
        items = items or ["step"]
        if request.step == 0:
            return self._result(
                request, f"[builtin demo executor] plan: {'; '.join(items)}", plan=items
            )
        index = request.step - 1
        if index < len(items):
            return self._result(
                request,
                f"[builtin demo executor] done: {items[index]}",
                plan_step_done=index,
                label=items[index][:60],
            )
        reply = f"[builtin demo executor] finished the plan of {len(items)} steps"
        return self._result(request, reply, done=True, reply=reply, label="plan finished")

    def _skill(self, request: StepRequest, name: str) -> StepResult:
        if request.step == 0:
            return self._result(request, f"[builtin demo executor] skill {name} starts", skill=name)
        if request.step <= len(PHASES):
            phase = PHASES[request.step - 1]
            return self._result(
                request, f"[builtin demo executor] skill {name}: {phase}", phase=phase, label=phase
            )
        reply = f"[builtin demo executor] skill {name} done"
        return self._result(
            request, reply, skill_end=True, done=True, reply=reply, label=f"{name} done"
        )

    def _ask(self, request: StepRequest, question: str) -> StepResult:
        if request.step == 0:
            return self._result(
                request, f"[builtin demo executor] asking: {question}", ask=question
            )
        answer = next(iter(request.answers.values()), "(no answer)")
        reply = f"[builtin demo executor] the operator answered: {answer}"
        return self._result(request, reply, done=True, reply=reply, label=question[:60])

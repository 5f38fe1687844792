"""An OpenAI-compatible chat-completions endpoint (llama.cpp, Ollama, vLLM, ...).

One act-step is one POST to `{base_url}/chat/completions` with the agent's
history. A reply with tool calls is committed as is; the next step runs the
tools the runtime knows (a tiny built-in set) and sends their results back.
Timeouts, connection failures, HTTP errors and malformed replies become step
errors that say what happened. httpx runs on trio through anyio, and its
requests are cancelled at once by a rewind.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
import msgspec

from reynd.protocol.events import Effect, Message, ToolCall
from reynd.protocol.executor import OpenAIOptions, StepRequest, StepResult
from reynd.runtime.executors.base import StepFailed

__all__ = ["OpenAIExecutor", "TOOLS"]


def _tool_time(arguments: dict[str, Any]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _tool_echo(arguments: dict[str, Any]) -> str:
    return str(arguments.get("text", ""))


TOOLS = {
    "time_now": (_tool_time, "The current UTC time.", {}),
    "echo": (_tool_echo, "Repeat a text.", {"text": {"type": "string"}}),
}


class _Fn(msgspec.Struct):
    name: str
    arguments: str = "{}"


class _Call(msgspec.Struct):
    id: str
    function: _Fn
    type: str = "function"


class _Msg(msgspec.Struct):
    role: str = "assistant"
    content: str | None = None
    tool_calls: list[_Call] | None = None


class _Choice(msgspec.Struct):
    message: _Msg


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None


_decoder = msgspec.json.Decoder(_Completion)


def _wire(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def _due_tool_calls(request: StepRequest) -> tuple[ToolCall, ...]:
    """The tool calls this step must run: the model's, when they end the history."""
    last = request.history[-1] if request.history else None
    if last is not None and last.role == "assistant" and last.tool_calls:
        return last.tool_calls
    return ()


class OpenAIExecutor:
    def __init__(self, options: OpenAIOptions) -> None:
        self.options = options
        self.calls = 0

    async def step(self, request: StepRequest) -> StepResult:
        calls = _due_tool_calls(request)
        if calls:
            return self._run_tools(calls)
        self.calls += 1
        return await self._complete(request)

    def effect(
        self, request: StepRequest, result: StepResult | None, failure: StepFailed | None
    ) -> Effect:
        """The tools the step ran, or its one model call (made even when it failed)."""
        calls = _due_tool_calls(request)
        if calls:
            return Effect(executor="openai", tools=tuple(c.name for c in calls))
        return Effect(
            executor="openai",
            model_calls=1,
            tokens_in=result.tokens_in if result else 0,
            tokens_out=result.tokens_out if result else 0,
        )

    def _run_tools(self, calls: tuple[ToolCall, ...]) -> StepResult:
        out = []
        for call in calls:
            tool = TOOLS.get(call.name)
            try:
                args = msgspec.json.decode(call.arguments or "{}", type=dict[str, Any])
                content = tool[0](args) if tool else f"error: unknown tool {call.name!r}"
            except (msgspec.DecodeError, TypeError) as exc:
                content = f"error: bad arguments for {call.name}: {exc}"
            out.append(Message(role="tool", tool_call_id=call.id, content=content))
        return StepResult(messages=out)

    async def _complete(self, request: StepRequest) -> StepResult:
        opts = self.options
        messages = [_wire(m) for m in request.history]
        if opts.system:
            messages.insert(0, {"role": "system", "content": opts.system})
        body: dict[str, Any] = {"model": opts.model, "messages": messages}
        if opts.temperature is not None:
            body["temperature"] = opts.temperature
        if opts.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": desc,
                        "parameters": {"type": "object", "properties": props},
                    },
                }
                for name, (_, desc, props) in TOOLS.items()
            ]
        headers = {"content-type": "application/json"}
        key = os.environ.get(opts.api_key_env)
        if key:
            headers["authorization"] = f"Bearer {key}"
        url = opts.base_url.rstrip("/") + "/chat/completions"
        try:
            async with httpx.AsyncClient(timeout=opts.timeout) as client:
                response = await client.post(
                    url, content=msgspec.json.encode(body), headers=headers
                )
        except httpx.TimeoutException:
            raise StepFailed(f"{url} did not answer within {opts.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise StepFailed(f"cannot reach {url}: {exc}") from None
        except (httpx.InvalidURL, UnicodeError) as exc:
            # A URL httpx refuses, or a key from the environment that is not ASCII.
            raise StepFailed(f"cannot send a request to {url}: {exc}") from None
        if response.status_code != 200:
            raise StepFailed(f"{url} answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            completion = _decoder.decode(response.content)
            choice = completion.choices[0].message
        except (msgspec.DecodeError, IndexError) as exc:
            raise StepFailed(f"{url} sent a reply that is not a chat completion: {exc}") from None
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in choice.tool_calls or ()
        )
        message = Message(role="assistant", content=choice.content or "", tool_calls=calls)
        usage = completion.usage or _Usage()
        done = not calls
        return StepResult(
            messages=[message],
            done=done,
            reply=message.content if done else None,
            label=(message.content or "")[:60],
            tokens_in=usage.prompt_tokens,
            tokens_out=usage.completion_tokens,
        )

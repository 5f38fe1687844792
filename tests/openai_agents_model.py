"""A model for the OpenAI Agents SDK that needs no network: it counts its calls.

It implements the SDK's `Model` interface, streaming too; each call answers with the next
scripted reply (or `reply <n>`), and keeps the input it was given, so a test
sees exactly what history the Runner handed the model.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from typing_extensions import override

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # no trace uploads: before agents is imported

from agents import Agent, Model, ModelResponse, ModelSettings, Usage, set_tracing_disabled
from agents.models.interface import ModelTracing
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

set_tracing_disabled(True)

T = TypeVar("T")

__all__ = ["CountingModel", "agent", "run", "text"]


class CountingModel(Model):
    """Answers each call with the next of `replies` (then `reply <n>`); counts the calls."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.calls = 0
        self.inputs: list[list[dict[str, Any]]] = []  # what each call was given

    def _answer(self, input: str | list[Any]) -> tuple[ResponseOutputMessage, int]:
        """The next reply, and the tokens in (10 per item handed): one call counted."""
        self.calls += 1
        given = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(given)
        text = self.replies.pop(0) if self.replies else f"reply {self.calls}"
        message = ResponseOutputMessage(
            id=f"msg_{self.calls}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        )
        return message, 10 * len(given)

    @override  # the SDK's signature, positional arguments and all
    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
        **kwargs: Any,
    ) -> ModelResponse:
        message, tokens_in = self._answer(input)
        usage = Usage(
            requests=1, input_tokens=tokens_in, output_tokens=3, total_tokens=tokens_in + 3
        )
        return ModelResponse(output=[message], usage=usage, response_id=None)

    @override
    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        message, tokens_in = self._answer(input)
        usage = ResponseUsage(
            input_tokens=tokens_in,
            output_tokens=3,
            total_tokens=tokens_in + 3,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )
        response = Response(
            id=f"resp_{self.calls}",
            created_at=0,
            model="counting",
            object="response",
            output=[message],
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
            usage=usage,
        )
        yield ResponseCompletedEvent(
            response=response, sequence_number=0, type="response.completed"
        )

    def contents(self, call: int = -1) -> list[Any]:
        """The text of each item the model was given in call `call` (the last by default)."""
        return [text(item) for item in self.inputs[call]]


def agent(model: CountingModel) -> Agent[Any]:
    return Agent(name="assistant", instructions="Answer briefly.", model=model)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run an SDK coroutine to its end on a fresh asyncio loop (the tests run under trio)."""
    return asyncio.run(coro)


def text(item: dict[str, Any]) -> Any:
    """A message item's text: its content, or its text parts joined."""
    content = item.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content

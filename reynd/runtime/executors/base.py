"""The executor interface, and the validation of an agent's executor options."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from reynd.protocol import errors
from reynd.protocol.events import Effect
from reynd.protocol.executor import (
    EXECUTOR_NAMES,
    EXECUTOR_OPTIONS,
    AnyOptions,
    StepRequest,
    StepResult,
    is_executor,
)
from reynd.protocol.validation import validation_details

__all__ = ["Executor", "StepFailed", "validate_options"]


class StepFailed(Exception):
    """The executor could not produce a result; the message says why, for the operator.

    `exit_code`: the status a program the step ran exited with, when it exited.
    """

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Executor(Protocol):
    """Runs one act-step. Must be cancellable at every await (hard cancel)."""

    calls: int

    async def step(self, request: StepRequest) -> StepResult: ...

    def effect(
        self, request: StepRequest, result: StepResult | None, failure: StepFailed | None
    ) -> Effect:
        """What the step `request` did outside reynd, given how it ended (issue 25)."""
        ...


def _options_type(name: str) -> type[AnyOptions]:
    if not is_executor(name):
        raise errors.InvalidParams(
            f"unknown executor {name!r}: use {', '.join(EXECUTOR_NAMES)}", {"executor": name}
        )
    return EXECUTOR_OPTIONS[name]


def validate_options(name: str, options: dict[str, Any], field: str = "options") -> AnyOptions:
    """Decode an agent's executor options, or raise InvalidParams naming the field.

    `field`: where the options sit in the request (`data.field` is `options.delay`, say).
    """
    try:
        return msgspec.convert(options, _options_type(name))
    except msgspec.ValidationError as exc:
        inner, reason = validation_details(exc)
        where = f"{field}.{inner}" if inner else field
        raise errors.InvalidParams(
            f"invalid options for the {name} executor (field `{where}`): {reason}",
            {"executor": name, "field": where, "reason": reason},
        ) from None

"""The executor interface and the factory that builds one from an agent's config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from reynd.protocol import errors
from reynd.protocol.executor import (
    EXECUTOR_NAMES,
    EXECUTOR_OPTIONS,
    AnyOptions,
    BuiltinOptions,
    CommandOptions,
    StepRequest,
    StepResult,
    is_executor,
)
from reynd.protocol.validation import validation_details

if TYPE_CHECKING:
    from reynd.runtime.procs import ProcessGroups

__all__ = ["Executor", "StepFailed", "make_executor", "validate_options"]


class StepFailed(Exception):
    """The executor could not produce a result; the message says why, for the operator."""


class Executor(Protocol):
    """Runs one act-step. Must be cancellable at every await (hard cancel)."""

    calls: int

    async def step(self, request: StepRequest) -> StepResult: ...


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


def make_executor(
    name: str, options: dict[str, Any], groups: ProcessGroups | None = None
) -> Executor:
    """Build the executor an agent is configured with.

    `groups` records the processes a `command` executor spawns (crash-time cleanup).
    Dispatched on the options type the name maps to (EXECUTOR_OPTIONS): mypy
    checks that every type of AnyOptions gets its executor. Imported here: the
    command and openai executors import this module (StepFailed).
    """
    opts = validate_options(name, options)
    if isinstance(opts, BuiltinOptions):
        from reynd.runtime.executors.builtin import BuiltinExecutor

        return BuiltinExecutor(opts)
    if isinstance(opts, CommandOptions):
        from reynd.runtime.executors.command import CommandExecutor

        return CommandExecutor(opts, groups)
    from reynd.runtime.executors.openai import OpenAIExecutor

    return OpenAIExecutor(opts)

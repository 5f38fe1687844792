"""The factory that builds the executor an agent is configured with.

Apart from base.py, which the executors themselves import (StepFailed), so
that no import circle runs through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reynd.protocol.executor import BuiltinOptions, CommandOptions
from reynd.runtime.executors.base import Executor, validate_options

if TYPE_CHECKING:
    from reynd.runtime.procs import ProcessGroups

__all__ = ["make_executor"]


def make_executor(
    name: str, options: dict[str, Any], groups: ProcessGroups | None = None
) -> Executor:
    """Build the executor an agent is configured with.

    `groups` records the processes a `command` executor spawns (crash-time cleanup).
    Dispatched on the options type the name maps to (EXECUTOR_OPTIONS): mypy
    checks that every type of AnyOptions gets its executor. Each is imported
    when first built: the openai executor loads httpx, which a daemon whose
    agents never use it need not pay for at start.
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

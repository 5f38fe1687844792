"""Options whose bounds and default are a method's params field: declared once, in protocol/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import msgspec
import msgspec.inspect as mi

from reynd.protocol.agent_methods import AgentsSendParams

__all__ = ["field_option", "wait_timeout_option"]

F = TypeVar("F", bound=Callable[..., Any])


def field_option(
    params: type[msgspec.Struct], field: str, *decls: str, **kw: Any
) -> Callable[[F], F]:
    """A click option for `params.field`: its numeric bounds as the type, its default shown.

    `decls` and `kw` as click.option takes them (help, the parameter's name...).
    """
    struct = mi.type_info(params)
    assert isinstance(struct, mi.StructType)
    info = next(f for f in struct.fields if f.name == field)
    kind = info.type
    if not isinstance(kind, mi.IntType | mi.FloatType) or info.required:
        raise TypeError(f"{params.__name__}.{field} is not a number with a default")
    bounds: dict[str, Any] = {
        "min": kind.gt if kind.ge is None else kind.ge,
        "max": kind.lt if kind.le is None else kind.le,
        "min_open": kind.gt is not None,
        "max_open": kind.lt is not None,
    }
    ptype = click.IntRange(**bounds) if isinstance(kind, mi.IntType) else click.FloatRange(**bounds)
    return click.option(*decls, type=ptype, default=info.default, show_default=True, **kw)


def wait_timeout_option(help_text: str) -> Callable[[F], F]:
    """--timeout of a command that waits in the daemon (not reynctl's per-answer --timeout):
    `agents.send`'s, into the parameter `wait_timeout`."""
    return field_option(AgentsSendParams, "timeout", "--timeout", "wait_timeout", help=help_text)

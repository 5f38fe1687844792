"""`--only runtime|workspace` of rewind and checkout (issue 25): what a move restores."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from reynd.protocol import methods as m

__all__ = ["check_only", "only_option", "only_what"]

F = TypeVar("F", bound=Callable[..., object])


def only_option(f: F) -> F:
    """--only runtime|workspace: what the move restores (both by default)."""
    return click.option(
        "--only",
        type=click.Choice(["runtime", "workspace"]),
        default=None,
        help="Restore only the conversation and agent state (runtime: the workspace's files "
        "stay as they are) or only the files (workspace: as of SEQ; the conversation stays at "
        "the tip). Default: both (the files when workspace rewind is on).",
    )(f)


def only_what(what: str, only: m.Only | None) -> str:
    """The move as the confirmation question names it, with --only."""
    if only == "workspace":
        return f"{what}, the workspace's files only"
    if only == "runtime":
        return f"{what}, the conversation and agents only (the files stay)"
    return what


def check_only(only: m.Only | None, then: object, reapply: m.Reapply | None) -> None:
    """--only workspace leaves the conversation at the tip: --send/--reapply need it moved."""
    if only == "workspace" and (then is not None or reapply is not None):
        which = "--send" if then is not None else "--reapply"
        raise click.UsageError(
            f"--only workspace leaves the conversation at the tip, so {which} has nothing to "
            f"follow: drop {which}, or use --only runtime (or no --only)"
        )

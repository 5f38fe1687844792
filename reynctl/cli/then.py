"""`--send AGENT TEXT` of rewind and checkout (issue 25): a message delivered with the move.

The daemon appends the reset record and the message as one atomic batch
(`then` of rewind/checkout), so no other client's record comes between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from reynctl import render
from reynctl.cli.fields import wait_timeout_option
from reynctl.render import Style
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m

__all__ = [
    "reapplied_text",
    "reapply_option",
    "send_option",
    "send_options",
    "sent_text",
    "then_of",
    "wait_options",
]

F = TypeVar("F", bound=Callable[..., object])


def wait_options(f: F) -> F:
    """--wait/--no-wait and --timeout, as `reynctl send` has them."""
    f = wait_timeout_option(
        "With --wait, seconds to wait for the turn to end (it keeps running after)."
    )(f)
    return click.option(
        "--wait/--no-wait",
        default=None,
        help="With a message: wait for its turn to end and print its reply [default: wait].",
    )(f)


def reapply_option(f: F) -> F:
    """--reapply messages."""
    return click.option(
        "--reapply",
        type=click.Choice(["messages"]),
        default=None,
        help="Deliver again, in the same atomic batch, the messages received on the "
        "branch the move abandons (after the new message; an edited one is not).",
    )(f)


def send_option(f: F) -> F:
    """--send AGENT TEXT, with the wait options."""
    return click.option(
        "--send",
        nargs=2,
        type=(str, str),
        default=None,
        metavar="AGENT TEXT",
        help="Then deliver TEXT to AGENT, in the same atomic batch as the reset record; "
        "its turn starts at once.",
    )(wait_options(f))


def send_options(f: F) -> F:
    """--send AGENT TEXT, with the wait options, and --reapply messages."""
    return send_option(reapply_option(f))


def then_of(
    send: tuple[str, str] | None, wait: bool | None, wait_timeout: float
) -> a.AgentsSendParams | None:
    """The `then` param for --send AGENT TEXT (usage errors for an empty text, or a lone --wait)."""
    if send is None:
        if wait is not None:
            raise click.UsageError("--wait/--no-wait need --send AGENT TEXT")
        return None
    agent, text = send
    if not text:
        raise click.BadParameter("the message is empty", param_hint="--send AGENT TEXT")
    return a.AgentsSendParams(agent=agent, text=text, wait=wait is not False, timeout=wait_timeout)


def sent_text(
    res: m.RewindResult | a.ActTurnRewindResult, then: a.AgentsSendParams | None, style: Style
) -> str:
    """The delivered message's lines, after the move's (empty without one)."""
    if res.sent is None or then is None:
        return ""
    waited = then.timeout if then.wait else None
    return "\n" + render.send_text(res.sent, style, waited=waited)


def reapplied_text(res: m.RewindResult) -> str:
    """One line per message `--reapply` delivered again (empty without any)."""
    return "".join(
        f"\nmessage {r.message_id} to {r.agent} delivered again: seq {r.from_seq} -> {r.seq}"
        for r in res.reapplied
    )

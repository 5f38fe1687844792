"""`reynctl edit SEQ TEXT` (issue 25): deliver TEXT in place of the message received at SEQ.

A message.received record is never a reset record, so its parent is SEQ-1:
the state as of SEQ-1 is exactly the state the message arrived into. `edit`
is `checkout SEQ-1` with the new message in the reset record's atomic batch.
A checkout, not a rewind, so that a message on an abandoned branch can be
edited too (from the same point); for one on the active branch it is the
same move as `rewind SEQ-1` (mode undo).
"""

from __future__ import annotations

import click

from reynctl import render
from reynctl.cli.completion import _complete_seq
from reynctl.cli.group import cli
from reynctl.cli.options import (
    SEQ,
    Options,
    confirm_move,
    examples,
    json_option,
    pass_opts,
    reason_option,
)
from reynctl.cli.then import reapplied_text, reapply_option, sent_text, then_of, wait_options
from reynctl.cli.timeline import _YES, move
from reynctl.client import Client
from reynd.protocol import methods as m

__all__ = ["edit"]


def _sender_of(c: Client, seq: int) -> str:
    """The agent that received a message at `seq`; a usage error when `seq` is no such record.

    As of `seq` the message is still in its agent's inbox (its turn starts
    at a later seq), and each inbox item keeps the seq that delivered it.
    """
    state = c.call("state.get", m.StateParams(seq=seq), m.StateResult).value
    for name, agent in state.agents.items():
        if any(item.seq == seq for item in agent.inbox):
            return name
    raise click.BadParameter(
        f"seq {seq} is not a received message (a message.received record); "
        "`reynctl generations` lists the turns, `reynctl show SEQ` a state",
        param_hint="SEQ",
    )


@cli.command(
    epilog=examples(
        'reynctl edit 42 "Plan a weekend in Kyoto, by train."   # asks, then retries',
        'reynctl edit 42 "Shorter, please." --yes --no-wait',
    )
)
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@click.argument("text")
@_YES
@wait_options
@reapply_option
@reason_option
@json_option
@pass_opts
def edit(
    opts: Options,
    seq: int,
    text: str,
    yes: bool,
    reason: str,
    *,
    wait: bool | None,
    wait_timeout: float,
    reapply: m.Reapply | None,
) -> None:
    """Replace the message received at SEQ with TEXT and run its turn again.

    Moves the tip to SEQ-1, just before the message (its parent: the state it
    arrived into), and delivers TEXT to the same agent in the same atomic
    batch: `checkout SEQ-1 --send AGENT TEXT`. The old message and what
    followed it stay on the abandoned branch (`reynctl checkout` brings them
    back). With --wait (the default) it returns once the new turn ended.
    --reapply messages delivers again the messages received after SEQ on the
    branch it abandons, but not the one at SEQ: TEXT replaces it.
    """
    if seq < 1:
        raise click.BadParameter("seq 0 is genesis, not a message", param_hint="SEQ")
    confirm_move(yes, "edit")
    with opts.client() as c:
        agent = _sender_of(c, seq)
    then = then_of((agent, text), wait, wait_timeout)
    assert then is not None
    params = m.CheckoutParams(
        seq=seq - 1,
        reason=reason or f"edit of message {seq}",
        then=then,
        reapply=reapply,
        replaces=seq,
    )
    dry = m.CheckoutParams(seq=seq - 1, dry_run=True)  # what the question says is not undone
    move(
        opts,
        yes=yes,
        what=f"replace the message at seq {seq} (checkout seq {seq - 1})",
        call=lambda c: c.call("checkout", params, m.RewindResult),
        dry=lambda c: c.call("checkout", dry, m.RewindResult),
        human=lambda res: (
            render.rewind_text(res, opts.style)
            + sent_text(res, then, opts.style)
            + reapplied_text(res)
        ),
        agent=agent,
        at_least=wait_timeout + 10 if then.wait else None,
    )

"""The tip's moves: `reynctl reflog` lists them, `reynctl undo` goes back (issue 24)."""

from __future__ import annotations

import click

from reynctl import render
from reynctl.cli.group import cli
from reynctl.cli.options import (
    Options,
    confirm_move,
    dry_run_option,
    examples,
    json_option,
    next_page,
    pass_opts,
    reason_option,
)
from reynctl.cli.then import send_option, sent_text, then_of
from reynctl.cli.timeline import move, no_follow, preview_move
from reynd.protocol import methods as m
from reynd.protocol import moves


@cli.command(
    epilog=examples(
        "reynctl reflog                 # every move of the tip, newest first",
        "reynctl reflog --json | jq '.entries[0]'",
    )
)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", type=click.IntRange(0), help="Continue from a previous page's cursor.")
@json_option
@pass_opts
def reflog(opts: Options, limit: int, cursor: int | None) -> None:
    """List every move of the tip, newest first: rewinds, checkouts, undos.

    Each row is one reset record in the WAL: when, from which tip to which
    seq, who (uid, pid, client) and why (`--reason`), and the turns it
    cancelled. `reynctl undo` goes back to before the newest one.
    """
    with opts.client() as c:
        reply = c.call(
            "reflog.list", moves.ReflogParams(cursor=cursor, limit=limit), moves.ReflogResult
        )
    opts.emit(reply, lambda: render.reflog_table(reply.value, opts.style))
    if reply.value.next_cursor is not None and not opts.json:
        opts.note(f"more: {next_page(reply.value.next_cursor)}")


@cli.command(
    epilog=examples(
        "reynctl undo                   # back to where the tip was before the last move",
        "reynctl undo                   # again: back again (like `cd -`)",
        "reynctl undo --steps 3 --yes   # before the third-newest move, in a script",
        "reynctl undo --dry-run         # which move it undoes, and what that changes",
        'reynctl undo --send ada "Go on."   # then a message, atomically',
    )
)
@click.option(
    "--steps",
    type=click.IntRange(1, moves.MAX_UNDO_STEPS),
    default=1,
    show_default=True,
    help="Go back to before the Nth newest move (see `reynctl reflog`).",
)
@click.option(
    "--yes", "-y", is_flag=True, help="Do not ask for confirmation (required off a terminal)."
)
@send_option
@dry_run_option
@reason_option
@json_option
@pass_opts
def undo(
    opts: Options,
    steps: int,
    yes: bool,
    reason: str,
    *,
    send: tuple[str, str] | None,
    wait: bool | None,
    wait_timeout: float,
    dry_run: bool,
) -> None:
    """Move the tip back to where it was before the last move.

    A checkout of the seq the newest reset record superseded, written as one
    more reset record: so `undo` again returns, and `--steps N` walks the
    reflog N moves back. The daemon picks the move and checks out in one
    step, so two clients that undo at once do not undo the same move twice.
    --send AGENT TEXT delivers a message in the reset record's atomic batch,
    as `rewind --send` does. --dry-run: as for rewind; the question asked
    before the move names what it cannot undo too.
    """
    then = then_of(send, wait, wait_timeout)
    no_follow(dry_run, then, None)
    what = "undo of the last move" if steps == 1 else f"undo of the last {steps} moves"
    dry = moves.UndoParams(steps=steps, reason=reason, dry_run=True)
    if dry_run:
        preview_move(opts, what, lambda c: c.call("undo", dry, m.RewindResult), target_named=False)
        return
    confirm_move(yes, "undo")
    params = moves.UndoParams(steps=steps, reason=reason, then=then)
    move(
        opts,
        yes=yes,
        what=what,
        call=lambda c: c.call("undo", params, m.RewindResult),
        dry=lambda c: c.call("undo", dry, m.RewindResult),
        human=lambda res: render.rewind_text(res, opts.style) + sent_text(res, then, opts.style),
        at_least=wait_timeout + 10 if then and then.wait else None,
    )

"""Time travel: list checkpoints, rewind, check out, the branch tree, state and diffs."""

from __future__ import annotations

import sys
from typing import Any

import click

from reynctl import render
from reynctl.cli.completion import _complete_seq
from reynctl.cli.group import cli
from reynctl.cli.options import EXIT_DECLINED, SEQ, Options, json_option, pass_opts, width
from reynd.protocol import methods as m


@cli.command()
@click.option("--agent", help="Only this agent's generations.")
@click.option("--kind", type=click.Choice(["turn", "plan_step", "phase"]), help="Only this kind.")
@click.option("--all-branches", is_flag=True, help="Include abandoned branches.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", type=SEQ, help="Continue from a previous page's next cursor.")
@json_option
@pass_opts
def generations(
    opts: Options,
    *,
    agent: str | None,
    kind: Any,
    all_branches: bool,
    limit: int,
    cursor: int | None,
) -> None:
    """List checkpoints, newest first.

    Generations are cut at turn, plan-step and phase boundaries; by default
    only those on the active lineage are listed.
    """
    params = m.GenerationsParams(
        agent=agent, kind=kind, all_branches=all_branches, limit=limit, cursor=cursor
    )
    with opts.client() as c:
        reply = c.call("generations.list", params, m.GenerationsResult)
    opts.emit(reply, lambda: render.generations_table(reply.value, opts.style))
    if reply.value.next_cursor is not None and not opts.json:
        opts.note(f"more: reynctl generations --cursor {reply.value.next_cursor}")


@cli.command()
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@json_option
@pass_opts
def rewind(opts: Options, seq: int) -> None:
    """Move the tip back to SEQ, an active seq below it.

    Nothing is deleted: the seqs after SEQ become an abandoned branch that
    `reynctl checkout` can bring back. For a seq on an abandoned branch, use
    checkout.
    """
    with opts.client() as c:
        reply = c.call("rewind", m.RewindParams(seq=seq), m.RewindResult)
    opts.emit(reply, lambda: render.rewind_text(reply.value, opts.style))


@cli.command()
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--force",
    is_flag=True,
    help="With workspace rewind on: restore the files even over changes reynd did not "
    "record (they are recorded first, just before the reset record R: `checkout R-1` "
    "brings them back).",
)
@json_option
@pass_opts
def checkout(opts: Options, seq: int, yes: bool, force: bool) -> None:
    """Undo to SEQ, or switch to the abandoned branch that holds it.

    Every agent's state moves to SEQ and turns in flight are cancelled.
    Asks first on a terminal; elsewhere pass --yes.
    """
    if not yes and not sys.stdin.isatty():
        raise click.UsageError(
            "checkout moves every agent's state: pass --yes to confirm "
            "(stdin is not a terminal, so reynctl cannot ask)"
        )
    with opts.client() as c:
        if not yes:
            head = c.status().head
            if not click.confirm(
                f"checkout seq {seq}: every agent moves to its state as of seq {seq} and turns "
                f"in flight are cancelled (`reynctl checkout {head}` comes back). Continue?",
                err=True,
            ):
                opts.note("cancelled: nothing changed")
                sys.exit(EXIT_DECLINED)
        reply = c.call("checkout", m.CheckoutParams(seq=seq, force=force), m.RewindResult)
    opts.emit(reply, lambda: render.rewind_text(reply.value, opts.style))


@cli.command()
@json_option
@pass_opts
def branches(opts: Options) -> None:
    """Draw the branch tree; the checked-out branch is marked."""
    with opts.client() as c:
        reply = c.call("branches.list", m.BranchesParams(), m.BranchesResult)
    opts.emit(reply, lambda: render.branch_tree(reply.value, opts.style))


@cli.command()
@click.argument("seq", type=SEQ, required=False, shell_complete=_complete_seq)
@click.option("--agent", help="Only this agent.")
@json_option
@pass_opts
def show(opts: Options, seq: int | None, agent: str | None) -> None:
    """Show the state as of SEQ (default: the tip).

    A read: it never moves the tip, and works for any retained seq, active
    or abandoned.
    """
    with opts.client() as c:
        reply = c.call("state.get", m.StateParams(seq=seq, agent=agent), m.StateResult)
    opts.emit(reply, lambda: render.state_text(reply.value, opts.style, width()))


@cli.command()
@click.argument("from_seq", metavar="FROM", type=SEQ, shell_complete=_complete_seq)
@click.argument("to_seq", metavar="TO", type=SEQ, shell_complete=_complete_seq)
@click.option("--agent", help="Only this agent.")
@json_option
@pass_opts
def diff(opts: Options, from_seq: int, to_seq: int, agent: str | None) -> None:
    """Show what differs between the states as of FROM and TO."""
    params = m.DiffParams(from_seq=from_seq, to_seq=to_seq, agent=agent)
    with opts.client() as c:
        reply = c.call("state.diff", params, m.DiffResult)
    opts.emit(reply, lambda: render.diff_text(reply.value, opts.style, width()))

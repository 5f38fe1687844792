"""Time travel: list checkpoints, rewind, check out, the branch tree, state and diffs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import click

from reynctl import render
from reynctl.cli.completion import _complete_seq
from reynctl.cli.fields import field_option
from reynctl.cli.group import cli
from reynctl.cli.options import (
    SEQ,
    SEQ_OR_TAG,
    Options,
    ask_move,
    columns,
    confirm_move,
    dry_run_option,
    examples,
    json_option,
    next_page,
    pass_opts,
    reason_option,
    seq_or_tag,
    width,
)
from reynctl.cli.scope import check_only, only_option, only_what
from reynctl.cli.then import reapplied_text, send_options, sent_text, then_of
from reynctl.cli.times import AT_HELP, TIME, addressed, one_of
from reynctl.client import Client, Reply
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError


@cli.command(
    epilog=examples(
        "reynctl generations                       # checkpoints on the active branch",
        "reynctl generations --agent ada --kind plan_step",
        "reynctl generations --all-branches --limit 10",
        "reynctl generations --after 2h --before 1h   # made between 2 and 1 hours ago",
    )
)
@click.option("--agent", help="Only this agent's generations.")
@click.option("--kind", type=click.Choice(["turn", "plan_step", "phase"]), help="Only this kind.")
@click.option("--all-branches", is_flag=True, help="Include abandoned branches.")
@field_option(m.GenerationsParams, "limit", "--limit")
@click.option("--cursor", type=SEQ, help="Continue from a previous page's next cursor.")
@click.option("--before", type=TIME, help="Only checkpoints made before this TIME.")
@click.option("--after", type=TIME, help="Only checkpoints made after this TIME.")
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
    before: float | str | None,
    after: float | str | None,
) -> None:
    """List checkpoints, newest first.

    Generations are cut at turn, plan-step and phase boundaries; by default
    only those on the active lineage are listed.
    """
    params = m.GenerationsParams(
        agent=agent,
        kind=kind,
        all_branches=all_branches,
        limit=limit,
        cursor=cursor,
        before=before,
        after=after,
    )
    with opts.client() as c:
        reply = c.call("generations.list", params, m.GenerationsResult)
    opts.emit(reply, lambda: render.generations_table(reply.value, opts.style))
    if reply.value.next_cursor is not None and not opts.json:
        opts.note(f"more: {next_page(reply.value.next_cursor)}")


_YES = click.option(
    "--yes", "-y", is_flag=True, help="Do not ask for confirmation (required off a terminal)."
)

R = TypeVar("R", m.RewindResult, a.ActTurnRewindResult)


def _where(seq: int | str) -> str:
    return f"seq {seq}" if isinstance(seq, int) else f"tag {seq}"


def move(
    opts: Options,
    *,
    yes: bool,
    what: str,
    call: Callable[[Client], Reply[R]],
    human: Callable[[R], str],
    agent: str | None = None,
    at_least: float | None = None,
    dry: Callable[[Client], Reply[R]] | None = None,
    only: m.Only | None = None,
    forced: bool = False,
) -> None:
    """A rewind, checkout or act-turn rewind: ask (unless --yes), move, say what runs again.

    The caller checked `confirm_move` before connecting. `dry`: the move's dry
    run; the question says first what the move cannot undo (issue 25) and the
    workspace changes that refuse it (or, `forced`, that it records first). After
    the move, the human output adds the agents that take work up at once (the
    state as of the target, one more read) and, on stderr, the checkout that
    undoes it.
    """
    with opts.client(at_least=at_least) as c:
        if not yes:
            detail = ""
            if dry is not None:
                preview = dry(c).value
                said: str = render.effects_text(preview.effects, opts.style)
                unrecorded: list[str] = render.unrecorded_lines(preview.preview, forced=forced)
                detail = "\n".join([*([said] if said else []), *unrecorded])
            ask_move(opts, c.status().head, what, detail, only=only)
        reply = call(c)
        res = reply.value
        state: m.StateResult | None = None
        # The move is done: a failed read only leaves out the note of what runs again.
        with contextlib.suppress(ReyndError):
            if not opts.json and only != "workspace":  # else no agent moved
                state = c.call("state.get", m.StateParams(seq=res.target), m.StateResult).value
    again: list[str] = render.runs_again(state, columns(), skip=agent) if state else []
    opts.emit(reply, lambda: "\n".join([human(res), *again]))
    if not opts.json:
        opts.note(f"undo: reynctl checkout {res.reset_seq - 1}")
        if again:
            opts.note("wait for it: reynctl agents wait")


def preview_move(
    opts: Options,
    what: str,
    call: Callable[[Client], Reply[R]],
    *,
    forced: bool = False,
    target_named: bool = True,
) -> None:
    """--dry-run: what the move would change and cannot undo; nothing is written or asked.
    `forced`: a checkout with --force; `target_named`: `what` names the target seq."""
    with opts.client() as c:
        reply = call(c)
    text = partial(render.preview_text, forced=forced, target_named=target_named)
    opts.emit(reply, lambda: text(what, reply.value, opts.style))


def no_follow(
    dry_run: bool,
    then: a.AgentsSendParams | None,
    reapply: m.Reapply | None,
    only: m.Only | None = None,
) -> None:
    """--dry-run previews the move alone (the daemon refuses `dry_run` with `then`, `reapply`
    or `only`)."""
    given = [f for f, v in (("--send", then), ("--reapply", reapply), ("--only", only)) if v]
    if dry_run and given:
        which = given[0]
        raise click.UsageError(
            f"--dry-run previews the move alone: drop {which} to preview, "
            f"then move with {which} (and without --dry-run)"
        )


@cli.command(
    epilog=examples(
        "reynctl rewind 42 --dry-run # what it would change and what it cannot undo",
        "reynctl rewind 42           # asks, then moves every agent back to seq 42",
        "reynctl rewind 42 --yes     # in a script: no question",
        "reynctl checkout 57         # undo: back to the seq the tip was at",
        "reynctl rewind --at 10m     # the newest checkpoint of ten minutes ago",
        "reynctl rewind --back 2     # two checkpoints back",
        'reynctl rewind 41 --send ada "Try it in Rust."   # then a message, atomically',
    )
)
@click.argument("seq", type=SEQ_OR_TAG, required=False, shell_complete=_complete_seq)
@_YES
@click.option("--at", type=TIME, help=AT_HELP + " The newest checkpoint at or before it.")
@click.option("--back", type=click.IntRange(min=1), help="N checkpoints back on the active branch.")
@send_options
@dry_run_option
@only_option
@reason_option
@json_option
@pass_opts
def rewind(
    opts: Options,
    seq: int | str | None,
    yes: bool,
    reason: str,
    *,
    at: float | str | None,
    back: int | None,
    send: tuple[str, str] | None,
    wait: bool | None,
    wait_timeout: float,
    reapply: m.Reapply | None,
    dry_run: bool,
    only: m.Only | None,
) -> None:
    """Move the tip back to SEQ, an active seq below it.

    Every agent's state moves to SEQ and turns in flight are cancelled; work
    pending at SEQ (a turn in flight, a message not taken yet) runs again at
    once. Nothing is deleted: the seqs after SEQ become an abandoned branch
    that `reynctl checkout` brings back. For a seq on an abandoned branch,
    use checkout. Asks first on a terminal; elsewhere pass --yes.

    Instead of SEQ: --at TIME, the newest checkpoint on the active branch at
    or before TIME; --back N, N checkpoints back on the active branch.

    --send AGENT TEXT delivers a message right after the reset record, in one
    atomic batch (both are written or neither); with --wait (the default with
    --send) the command returns once its turn ended, as `reynctl send` does.
    --reapply messages delivers again, in that batch, every message received
    after SEQ on the branch the rewind abandons.

    --dry-run says what the rewind would change (turns and agents abandoned,
    turns cancelled, workspace files) and what it cannot undo: the commands,
    model calls and tool calls of the branch it leaves. The question asked
    before a rewind names those too.

    --only runtime moves the conversation and agent state and leaves the
    workspace's files as they are; --only workspace restores the files as of
    SEQ and leaves the conversation at the tip (a reset record to the tip
    itself, so the reflog shows it and `reynctl undo` brings the files back).
    """
    one_of(seq=seq, at=at, back=back)
    then = then_of(send, wait, wait_timeout)
    no_follow(dry_run, then, reapply, only)
    check_only(only, then, reapply)
    by_seq, tag = seq_or_tag(seq)
    params = m.RewindParams(
        seq=by_seq,
        tag=tag,
        at=at,
        back=back,
        reason=reason,
        then=then,
        reapply=reapply,
        only=only,
    )
    dry = m.RewindParams(seq=by_seq, tag=tag, at=at, back=back, reason=reason, dry_run=True)
    what = _what("rewind to", seq, at, back)
    if dry_run:
        preview_move(
            opts,
            what,
            lambda c: c.call("rewind", dry, m.RewindResult),
            target_named=at is None and back is None,
        )
        return
    confirm_move(yes, "rewind")
    _reset_move(
        opts,
        yes=yes,
        what=only_what(what, only),
        call=lambda c: c.call("rewind", params, m.RewindResult),
        then=then,
        wait_timeout=wait_timeout,
        dry=lambda c: c.call("rewind", dry, m.RewindResult),
        only=only,
    )


def _reset_move(
    opts: Options,
    *,
    yes: bool,
    what: str,
    call: Callable[[Client], Reply[m.RewindResult]],
    then: a.AgentsSendParams | None,
    wait_timeout: float,
    dry: Callable[[Client], Reply[m.RewindResult]],
    only: m.Only | None,
    forced: bool = False,
) -> None:
    """A rewind or checkout: `move`, and what --send and --reapply delivered (issue 25)."""
    move(
        opts,
        yes=yes,
        what=what,
        call=call,
        forced=forced,
        # A workspace-only restore abandons nothing: no effects to warn of.
        dry=None if only == "workspace" else dry,
        only=only,
        human=lambda res: (
            render.rewind_text(res, opts.style)
            + addressed(res)
            + sent_text(res, then, opts.style)
            + reapplied_text(res)
        ),
        at_least=wait_timeout + 10 if then and then.wait else None,
    )


def _what(move: str, seq: int | str | None, at: float | str | None, back: int | None = None) -> str:
    """The move as the confirmation question names it."""
    if at is not None:
        return f"{move} the checkpoint at {at}"
    if back is not None:
        return f"{move} {back} checkpoint(s) back"
    assert seq is not None
    return f"{move} {_where(seq)}"


@cli.command(
    epilog=examples(
        "reynctl checkout 57         # back to the tip before a rewind (undo)",
        "reynctl checkout 23 --yes   # switch to the abandoned branch holding seq 23",
        "reynctl checkout --at 2026-12-06T09:30   # where the tip was then, on any branch",
    )
)
@click.argument("seq", type=SEQ_OR_TAG, required=False, shell_complete=_complete_seq)
@_YES
@click.option("--at", type=TIME, help=AT_HELP + " Where the tip was then, on any branch.")
@click.option(
    "--force",
    is_flag=True,
    help="With workspace rewind on: restore the files even over changes reynd did not "
    "record (they are recorded first, just before the reset record R: `checkout R-1` "
    "brings them back).",
)
@send_options
@dry_run_option
@only_option
@reason_option
@json_option
@pass_opts
def checkout(
    opts: Options,
    seq: int | str | None,
    yes: bool,
    force: bool,
    reason: str,
    *,
    at: float | str | None,
    send: tuple[str, str] | None,
    wait: bool | None,
    wait_timeout: float,
    reapply: m.Reapply | None,
    dry_run: bool,
    only: m.Only | None,
) -> None:
    """Undo to SEQ, or switch to the abandoned branch that holds it.

    Every agent's state moves to SEQ and turns in flight are cancelled; work
    pending at SEQ runs again at once. Asks first on a terminal; elsewhere
    pass --yes. Instead of SEQ, --at TIME goes where the tip was at TIME.
    --send AGENT TEXT, --reapply messages and --only: as for rewind, in the
    reset record's batch. --dry-run: as for rewind (what a checkout of an
    abandoned branch restores, too).
    """
    one_of(seq=seq, at=at)
    then = then_of(send, wait, wait_timeout)
    no_follow(dry_run, then, reapply, only)
    check_only(only, then, reapply)
    by_seq, tag = seq_or_tag(seq)
    params = m.CheckoutParams(
        seq=by_seq,
        tag=tag,
        force=force,
        at=at,
        reason=reason,
        then=then,
        reapply=reapply,
        only=only,
    )
    dry = m.CheckoutParams(seq=by_seq, tag=tag, at=at, reason=reason, dry_run=True)
    what = _what("checkout", seq, at)
    if dry_run:
        preview_move(
            opts,
            what,
            lambda c: c.call("checkout", dry, m.RewindResult),
            forced=force,
            target_named=at is None,
        )
        return
    confirm_move(yes, "checkout")
    _reset_move(
        opts,
        yes=yes,
        what=only_what(what, only),
        call=lambda c: c.call("checkout", params, m.RewindResult),
        then=then,
        wait_timeout=wait_timeout,
        dry=lambda c: c.call("checkout", dry, m.RewindResult),
        only=only,
        forced=force,
    )


@cli.group(
    invoke_without_command=True,
    epilog=examples(
        "reynctl branches", "reynctl branches --json | jq .head", "reynctl branches diff 0 16"
    ),
)
@json_option
@click.pass_context
def branches(ctx: click.Context) -> None:
    """Draw the branch tree; the checked-out branch is marked."""
    if ctx.invoked_subcommand is not None:
        return
    opts = ctx.find_object(Options)
    assert opts is not None
    with opts.client() as c:
        reply = c.call("branches.list", m.BranchesParams(), m.BranchesResult)
    opts.emit(reply, lambda: render.branch_tree(reply.value, opts.style))


@branches.command(
    "diff",
    epilog=examples("reynctl branches diff 11 16   # what each branch did after they forked"),
)
@click.argument("first", type=click.IntRange(min=0))
@click.argument("second", type=click.IntRange(min=0))
@click.option("--agent", help="Only this agent.")
@click.option("--stat", is_flag=True, help="Files as one line each, with counts of lines.")
@json_option
@pass_opts
def branches_diff(opts: Options, first: int, second: int, agent: str | None, stat: bool) -> None:
    """Compare the tips of branches FIRST and SECOND (ids as `reynctl branches` shows them):
    from their fork point, what only FIRST has is removed, what only SECOND has is added."""
    with opts.client() as c:
        tree = c.call("branches.list", m.BranchesParams(), m.BranchesResult).value
        tips = {b.id: b.tip for b in tree.branches}
        for given in (first, second):
            if given not in tips:
                known = ", ".join(str(i) for i in sorted(tips))
                raise click.BadParameter(
                    f"no branch {given}: the branches are {known} (see `reynctl branches`)"
                )
        params = m.DiffParams(
            from_seq=tips[first], to_seq=tips[second], agent=agent, files=True, patch=opts.json
        )
        _show_diff(opts, c, params, stat)


@cli.command(
    epilog=examples(
        "reynctl show                # the state at the tip",
        "reynctl show 11 --agent ada   # ada as of seq 11, on any branch",
        "reynctl show --at 1h          # the state the tip had an hour ago",
    )
)
@click.argument("seq", type=SEQ_OR_TAG, required=False, shell_complete=_complete_seq)
@click.option("--agent", help="Only this agent.")
@click.option("--at", type=TIME, help=AT_HELP + " Where the tip was then, on any branch.")
@json_option
@pass_opts
def show(
    opts: Options, seq: int | str | None, agent: str | None, *, at: float | str | None
) -> None:
    """Show the state as of SEQ (default: the tip).

    A read: it never moves the tip, and works for any retained seq, active
    or abandoned.
    """
    if seq is not None and at is not None:
        one_of(seq=seq, at=at)
    with opts.client() as c:
        by_seq, tag = seq_or_tag(seq)
        params = m.StateParams(seq=by_seq, tag=tag, agent=agent, at=at)
        reply = c.call("state.get", params, m.StateResult)
    opts.emit(reply, lambda: render.state_text(reply.value, opts.style, width()))


@cli.command(
    epilog=examples(
        "reynctl diff 11 27              # what changed from seq 11 to seq 27",
        "reynctl diff 27 57 --agent ada  # two futures of one agent",
        "reynctl diff good 57 --stat     # files as a summary: one line each",
        "reynctl diff 11 27 --json | jq .patch  # the state as an RFC 6902 JSON Patch",
    )
)
@click.argument("from_seq", metavar="FROM", type=SEQ_OR_TAG, shell_complete=_complete_seq)
@click.argument("to_seq", metavar="TO", type=SEQ_OR_TAG, shell_complete=_complete_seq)
@click.option("--agent", help="Only this agent.")
@click.option("--stat", is_flag=True, help="Files as one line each, with counts of lines.")
@json_option
@pass_opts
def diff(
    opts: Options, from_seq: int | str, to_seq: int | str, agent: str | None, stat: bool
) -> None:
    """Show what differs between FROM and TO (seqs or tags, on any branch): per agent the
    conversation and the state, then the workspace's files (when workspace rewind is on)."""
    (a_seq, a_tag), (b_seq, b_tag) = seq_or_tag(from_seq), seq_or_tag(to_seq)
    params = m.DiffParams(
        from_seq=a_seq,
        from_tag=a_tag,
        to_seq=b_seq,
        to_tag=b_tag,
        agent=agent,
        files=True,
        patch=opts.json,
    )
    with opts.client() as c:
        _show_diff(opts, c, params, stat)


def _show_diff(opts: Options, c: Client, params: m.DiffParams, stat: bool) -> None:
    """state.diff, as JSON (with its JSON Patch) or in words."""
    reply = c.call("state.diff", params, m.DiffResult)
    opts.emit(reply, lambda: render.diff_text(reply.value, opts.style, width(), stat))

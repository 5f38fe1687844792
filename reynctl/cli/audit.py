"""The audit log and the replay debugger (read-only)."""

from __future__ import annotations

import click

from reynctl import render
from reynctl.cli.fields import field_option
from reynctl.cli.group import cli
from reynctl.cli.options import SEQ, Options, examples, json_option, next_page, pass_opts, width
from reynd.protocol import audit_methods as am

__all__ = ["parse_event_point", "parse_point"]


def parse_point(text: str) -> am.Point:
    """SEQ, RUN:INDEX, branch:ID, or RUN alone (a whole run)."""
    if text.isdigit():
        return am.Point(seq=int(text))
    head, sep, tail = text.rpartition(":")
    if sep and head == "branch" and tail.isdigit():
        return am.Point(branch=int(tail))
    if sep and head and tail.isdigit():
        return am.Point(run=head, index=int(tail))
    if text.startswith("run-") and not sep:
        return am.Point(run=text)
    raise click.BadParameter(f"{text!r} is not SEQ, RUN:INDEX, branch:ID or RUN")


def parse_event_point(text: str) -> am.Point:
    """SEQ or RUN:INDEX: one event's place, not a branch or a whole run."""
    point = parse_point(text)
    if point.branch is not None or (point.run is not None and point.index is None):
        raise click.BadParameter("give SEQ or RUN:INDEX", param_hint="SEQ|RUN:INDEX")
    return point


@cli.group(
    invoke_without_command=True,
    epilog=examples(
        "reynctl events --agent ada --kind turn.ended",
        "reynctl events runs                  # the daemon runs on disk",
        "reynctl events show 42",
    ),
)
@click.option("--run", help="Only this run (`reynctl events runs` lists them).")
@click.option("--agent", help="Only this agent's events.")
@click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable).")
@click.option("--branch", type=SEQ, help="Only events on this branch.")
@click.option("--from-seq", type=SEQ, help="Only seqs at or above.")
@click.option("--to-seq", type=SEQ, help="Only seqs at or below.")
@field_option(am.EventsListParams, "limit", "--limit")
@click.option("--cursor", metavar="RUN:INDEX", help="Continue from a previous page.")
@json_option
@click.pass_context
def events(
    ctx: click.Context,
    *,
    run: str | None,
    agent: str | None,
    kinds: tuple[str, ...],
    branch: int | None,
    from_seq: int | None,
    to_seq: int | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List the audit log's events, oldest first (the default); or its runs, or one event.

    The audit log records every user-visible event of each daemon run
    (turns, steps, rewinds, checkouts, questions, agent changes), apart from
    the WAL: it outlives WAL retention, and recovery never reads it.
    """
    if ctx.invoked_subcommand is not None:
        return
    opts = ctx.find_object(Options)
    assert opts is not None
    params = am.EventsListParams(
        run=run,
        agent=agent,
        kind=list(kinds),
        branch=branch,
        from_seq=from_seq,
        to_seq=to_seq,
        limit=limit,
        cursor=cursor,
    )
    with opts.client() as c:
        reply = c.call("events.list", params, am.EventsListResult)
    opts.emit(reply, lambda: render.events_table(reply.value, opts.style, width()))
    if reply.value.next_cursor is not None and not opts.json:
        opts.note(f"more: {next_page(reply.value.next_cursor)}")


@events.command("runs")
@json_option
@pass_opts
def events_runs(opts: Options) -> None:
    """List the daemon runs in the audit log, oldest first."""
    with opts.client() as c:
        reply = c.call("events.runs", am.EventsRunsParams(), am.EventsRunsResult)
    opts.emit(reply, lambda: render.runs_table(reply.value, opts.style))


@events.command("show")
@click.argument("where", metavar="SEQ|RUN:INDEX")
@json_option
@pass_opts
def events_show(opts: Options, where: str) -> None:
    """Show one event in full, by its seq or its position in a run."""
    point = parse_event_point(where)
    params = am.EventsGetParams(run=point.run, index=point.index, seq=point.seq)
    with opts.client() as c:
        reply = c.call("events.get", params, am.AuditEvent)
    opts.emit(reply, lambda: render.audit_event_text(reply.value, opts.style))


@cli.group(
    epilog=examples(
        "reynctl replay walk --limit 10",
        "reynctl replay seek 42 --agent ada",
        "reynctl replay compare 19 29         # two histories, step by step",
    )
)
def replay() -> None:
    """Walk, seek and compare past runs from the audit log (never moves the tip)."""


@replay.command("walk")
@click.option("--run", help="The run to walk (default: the current one).")
@click.option(
    "--index", type=click.IntRange(min=0), default=0, show_default=True, help="Start at this index."
)
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@click.option("--agent", help="Only this agent's events.")
@json_option
@pass_opts
def replay_walk(opts: Options, run: str | None, index: int, limit: int, agent: str | None) -> None:
    """Step through a run's events, each with what it changed."""
    params = am.ReplayWalkParams(run=run, index=index, limit=limit, agent=agent)
    with opts.client() as c:
        reply = c.call("replay.walk", params, am.ReplayWalkResult)
    opts.emit(reply, lambda: render.walk_text(reply.value, opts.style, width()))
    if reply.value.next_index is not None and not opts.json:
        opts.note(
            f"more: reynctl replay walk --run {reply.value.run} --index {reply.value.next_index}"
        )


@replay.command("seek")
@click.argument("where", metavar="SEQ|RUN:INDEX")
@click.option("--agent", help="Only this agent.")
@json_option
@pass_opts
def replay_seek(opts: Options, where: str, agent: str | None) -> None:
    """Show the agents as of a point, rebuilt from the audit log alone.

    Works for seqs whose WAL retention already collected (where `reynctl
    show` answers below_floor).
    """
    point = parse_event_point(where)
    params = am.ReplaySeekParams(run=point.run, index=point.index, seq=point.seq, agent=agent)
    with opts.client() as c:
        reply = c.call("replay.seek", params, am.ReplaySeekResult)
    opts.emit(reply, lambda: render.seek_text(reply.value, opts.style, width()))


@replay.command("compare")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--agent", help="Only this agent's events.")
@click.option(
    "--ignore",
    multiple=True,
    help="A field not to compare (repeatable; default: message_id and turn_id).",
)
@click.option("--all", "include_same", is_flag=True, help="Show the steps that are the same too.")
@field_option(am.ReplayCompareParams, "from_step", "--from-step")
@field_option(am.ReplayCompareParams, "limit", "--limit")
@json_option
@pass_opts
def replay_compare(
    opts: Options,
    *,
    a: str,
    b: str,
    agent: str | None,
    ignore: tuple[str, ...],
    include_same: bool,
    from_step: int,
    limit: int,
) -> None:
    """Compare A and B step by step: where they diverge and how.

    Each side is SEQ or RUN:INDEX (the history leading there), branch:ID
    (the branch's history up to its last seq), or a RUN id alone (the run's
    events as recorded).
    """
    params = am.ReplayCompareParams(
        a=parse_point(a),
        b=parse_point(b),
        agent=agent,
        from_step=from_step,
        limit=limit,
        include_same=include_same,
    )
    if ignore:
        params.ignore = list(ignore)
    with opts.client() as c:
        reply = c.call("replay.compare", params, am.ReplayCompareResult)
    opts.emit(reply, lambda: render.compare_text(reply.value, opts.style, width()))
    if reply.value.next_step is not None and not opts.json:
        opts.note(f"more: --from-step {reply.value.next_step}")

"""`reynctl bisect`: find the first bad checkpoint, by a command (`run`) or by hand.

Both forms only read: the tip never moves, nothing is appended, no executor runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import msgspec

from reynctl import render
from reynctl.bisect import progress as saved
from reynctl.bisect.checkout import Checkouts
from reynctl.bisect.history import NotAncestor, Range, checkpoints
from reynctl.bisect.results import Report, Step
from reynctl.bisect.run import BisectAborted, report, run_command
from reynctl.bisect.search import Inconsistent, Verdict, next_probe, outcome, untested
from reynctl.cli.group import cli
from reynctl.cli.options import (
    SEQ,
    SEQ_OR_TAG,
    Options,
    examples,
    json_option,
    pass_opts,
    seq_or_tag,
    width,
)
from reynctl.client import Client, find_socket

__all__ = ["bisect"]


@cli.group(
    epilog=examples(
        "reynctl bisect run --good 3 --bad 57 -- pytest -x   # the first checkpoint that fails",
        "reynctl bisect start --good v1 --bad 57   # by hand: test, then `bisect good|bad|skip`",
    )
)
def bisect() -> None:
    """Find the first bad checkpoint between a good and a bad one, with no model call.

    Each checkpoint tested is materialized in a fresh directory: the workspace's
    files as of it (when workspace rewind is on) and reyn-state.json, the state as
    of it (one agent's with --agent); REYN_SEQ and REYN_STATE name them. The tip
    never moves and nothing is appended.
    """


def _range(c: Client, good: int | str, bad: int | str, agent: str | None) -> Range:
    try:
        return checkpoints(c, seq_or_tag(good), seq_or_tag(bad), agent)
    except NotAncestor as exc:
        raise click.BadParameter(str(exc), param_hint="--good") from None


def _emit(opts: Options, r: Report) -> None:
    if opts.json:
        click.echo(msgspec.json.encode(r).decode())
    else:
        click.echo(render.bisect_text(r, opts.style, width()), color=opts.style.color)


_ENDS = [
    click.option("--good", required=True, type=SEQ_OR_TAG, help="A seq or tag known good."),
    click.option("--bad", required=True, type=SEQ_OR_TAG, help="A later seq or tag known bad."),
    click.option(
        "--agent", help="Only this agent's checkpoints; its state only in reyn-state.json."
    ),
]


def _ends(f: click.decorators.FC) -> click.decorators.FC:
    for option in reversed(_ENDS):
        f = option(f)
    return f


@bisect.command(
    "run",
    epilog=examples(
        "reynctl bisect run --good 3 --bad 57 -- pytest -x",
        "reynctl bisect run --good 3 --bad 57 --agent ada -- sh -c 'jq -e ... \"$REYN_STATE\"'",
    ),
)
@_ends
@click.argument("command", nargs=-1, required=True)
@json_option
@pass_opts
def bisect_run(
    opts: Options, good: int | str, bad: int | str, agent: str | None, command: tuple[str, ...]
) -> None:
    """Run COMMAND in each checkpoint tested: exit 0 good, 125 skip, 1-127 bad (git's
    convention); 128 and above stop the bisect. Prints the first bad checkpoint, the
    message that started its turn, and the diff from the last good one."""
    with opts.client() as c:
        span = _range(c, good, bad, agent)
        n, good_seq, bad_seq = len(span.candidates), span.good, span.bad
        opts.note(f"bisecting {n} checkpoints (seq {good_seq} good, seq {bad_seq} bad)")
        try:
            found, steps = run_command(
                c, span, command, agent, lambda s, left: opts.note(render.step_line(s, left))
            )
        except BisectAborted as exc:
            raise click.ClickException(str(exc)) from None
        _emit(opts, report(c, span, found, steps))


# -- the interactive form ------------------------------------------------------------------


def _progress_path(opts: Options) -> Path:
    return saved.path_for(find_socket(opts.socket))


def _load(path: Path) -> saved.Progress | None:
    try:
        return saved.load(path)
    except saved.Damaged as exc:
        raise click.UsageError(str(exc)) from None


def _under_way(opts: Options) -> tuple[Path, saved.Progress]:
    path = _progress_path(opts)
    p = _load(path)
    if p is None:
        raise click.UsageError("no bisect is under way: start one with `reynctl bisect start`")
    return path, p


def _advance(opts: Options, c: Client, path: Path, p: saved.Progress) -> None:
    """Check out the next checkpoint to test, or report what the search found."""
    try:
        seq = next_probe(p.candidates, p.verdicts())
    except Inconsistent as exc:
        raise click.UsageError(str(exc)) from None
    p.current = seq
    if seq is None:
        p.checkout = p.state_file = None
        saved.save(path, p)
        span = Range(p.good, p.bad, tuple(p.candidates), p.generations)
        _emit(opts, report(c, span, outcome(p.candidates, p.verdicts()), p.steps))
        return
    work, state_file = Checkouts(c, p.agent, Path(p.root)).make(seq)
    p.checkout, p.state_file = str(work), str(state_file)
    saved.save(path, p)
    left = len(untested(p.candidates, p.verdicts()))
    if opts.json:
        click.echo(
            msgspec.json.encode(
                {"seq": seq, "checkout": p.checkout, "state": p.state_file, "left": left}
            ).decode()
        )
        return
    click.echo(f"test {render.checkpoint_line(seq, p.generations.get(seq))}")
    click.echo(f"  in {work}")
    click.echo(f"  REYN_SEQ={seq} REYN_STATE={state_file}")
    opts.note(render.left_line(left))


@bisect.command("start", epilog=examples("reynctl bisect start --good 3 --bad 57"))
@_ends
@json_option
@pass_opts
def bisect_start(opts: Options, good: int | str, bad: int | str, agent: str | None) -> None:
    """Start a bisect by hand: check out the first checkpoint to test. The progress is
    kept between runs of reynctl (and across a daemon restart) until `bisect reset`."""
    path = _progress_path(opts)
    if _load(path) is not None:
        raise click.UsageError("a bisect is under way: `reynctl bisect reset` ends it first")
    with opts.client() as c:
        span = _range(c, good, bad, agent)
        root = Path(Checkouts(c, agent).root)
        p = saved.Progress(
            socket=str(find_socket(opts.socket)),
            good=span.good,
            bad=span.bad,
            agent=agent,
            candidates=list(span.candidates),
            generations=span.generations,
            root=str(root),
        )
        _advance(opts, c, path, p)


def _mark(opts: Options, verdict: Verdict, seq: int | None) -> None:
    path, p = _under_way(opts)
    target = p.current if seq is None else seq
    if target is None:
        raise click.UsageError("the search ended: see `reynctl bisect log`, or name a SEQ")
    if target not in p.candidates:
        raise click.UsageError(
            f"seq {target} is not a checkpoint of this bisect "
            "(`reynctl bisect log --json` lists them)"
        )
    if p.checkout is not None and target == p.current:
        shutil.rmtree(Path(p.checkout).parent, ignore_errors=True)
    p.steps = [s for s in p.steps if s.seq != target] + [Step(seq=target, verdict=verdict)]
    with opts.client() as c:
        _advance(opts, c, path, p)


for _verdict, _help in (
    ("good", "The checkpoint checked out (or SEQ) is good."),
    ("bad", "The checkpoint checked out (or SEQ) is bad."),
    ("skip", "The checkpoint checked out (or SEQ) cannot be tested."),
):

    def _command(opts: Options, seq: int | None, _v: Verdict = _verdict) -> None:  # type: ignore[assignment]
        _mark(opts, _v, seq)

    _command.__doc__ = _help
    bisect.command(_verdict)(
        click.argument("seq", type=SEQ, required=False)(json_option(pass_opts(_command)))
    )


@bisect.command("log")
@json_option
@pass_opts
def bisect_log(opts: Options) -> None:
    """The verdicts so far, oldest first, and where the search stands."""
    _, p = _under_way(opts)
    if opts.json:
        click.echo(msgspec.json.encode(p).decode())
        return
    click.echo(f"# good: seq {p.good}; bad: seq {p.bad}; {len(p.candidates)} checkpoints")
    for s in p.steps:
        code = "" if s.exit_code is None else f"  # exit {s.exit_code}"
        click.echo(f"{s.verdict} {s.seq}{code}")
    if p.current is not None:
        click.echo(f"# testing seq {p.current} in {p.checkout}")


@bisect.command("reset")
@pass_opts
def bisect_reset(opts: Options) -> None:
    """End the bisect: remove its checkouts and its progress (even a damaged one)."""
    path = _progress_path(opts)
    try:
        p = saved.load(path)
    except saved.Damaged:
        p = None  # its checkouts, if any, are in the temporary directory: left there
    else:
        if p is None:
            raise click.UsageError("no bisect is under way: nothing to reset")
        shutil.rmtree(p.root, ignore_errors=True)
    saved.remove(path)
    opts.note("bisect ended: its checkouts are removed")

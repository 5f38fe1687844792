"""The `reynctl` command line: one subcommand per daemon capability.

Data goes to stdout, everything else (prompts, hints, errors) to stderr.
`--json` prints exactly the JSON-RPC result. Exit codes: 0 ok, 1 the daemon
refused (its error name and code on stderr), 2 usage, 3 the daemon could not
be reached or understood.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click
from click.shell_completion import CompletionItem

from reynctl import __version__, render
from reynctl.client import Client, Reply, find_socket
from reynctl.errors import ClientError
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError

__all__ = ["EXIT_DAEMON", "EXIT_UNREACHABLE", "EXIT_USAGE", "REFUSALS", "Options", "cli", "main"]

EXIT_DAEMON = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_DECLINED = 1  # the user said no at a prompt (click's Abort uses 1 too)

F = TypeVar("F", bound=Callable[..., Any])

# Errors by which the daemon refuses the connection itself, not the request:
# to a script they mean the same as an absent daemon (exit 3).
REFUSALS = (errors.PermissionDenied, errors.ConnectionLimit, errors.ShuttingDown)


def use_color(choice: str, stream: Any, env: dict[str, str] | os._Environ[str]) -> bool:
    """--color: `always`/`never` win; `auto` colours a terminal unless NO_COLOR or TERM=dumb."""
    if choice != "auto":
        return choice == "always"
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


@dataclass
class Options:
    """Global options, shared by every subcommand through click's context."""

    socket: str | None
    json: bool
    color: str
    timeout: float | None

    @property
    def style(self) -> render.Style:
        return render.Style(use_color(self.color, sys.stdout, os.environ))

    @property
    def err_style(self) -> render.Style:
        return render.Style(use_color(self.color, sys.stderr, os.environ))

    def client(self) -> Client:
        """A connection to the daemon (raises a ClientError naming the cause)."""
        return Client(find_socket(self.socket), timeout=self.timeout)

    def emit(self, reply: Reply[Any], human: Callable[[], str]) -> None:
        """The result: raw JSON with --json, else the human rendering."""
        if self.json:
            click.echo(reply.raw.decode())
        else:
            click.echo(human(), color=self.style.color)

    def note(self, text: str) -> None:
        """A hint or progress line, on stderr."""
        click.echo(text, err=True, color=self.err_style.color)


def width() -> int:
    """Room for one truncated value on a line of the terminal."""
    return max(40, shutil.get_terminal_size((100, 24)).columns - 20)


def fail(opts: Options | None, exc: ClientError | ReyndError) -> NoReturn:
    """Report an error on stderr and exit with its code."""
    if isinstance(exc, ReyndError):
        code, name = exc.code, str(exc.data.get("error", exc.name))
        status = EXIT_UNREACHABLE if isinstance(exc, REFUSALS) else EXIT_DAEMON
    else:
        code, name, status = None, exc.name, EXIT_UNREACHABLE
    if opts is not None and opts.json:
        data = exc.data if isinstance(exc, ReyndError) else {}
        body = {"error": {"code": code, "name": name, "message": exc.message, "data": data}}
        click.echo(json.dumps(body, ensure_ascii=False), err=True)
    else:
        style = opts.err_style if opts else render.Style()
        where = f" ({name}, {code})" if code is not None else f" ({name})"
        click.echo(
            f"{style('error:', 'red', 'bold')} {exc.message}{where}", err=True, color=style.color
        )
    sys.exit(status)


class _Group(click.Group):
    """Maps daemon and client errors to exit codes 1 and 3."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ReyndError, ClientError) as exc:
            fail(ctx.obj if isinstance(ctx.obj, Options) else None, exc)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_object(Options).json = True  # type: ignore[union-attr]


def json_option(f: F) -> F:
    """Accept --json after the subcommand too (`reynctl status --json`)."""
    return click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print the JSON-RPC result exactly.",
    )(f)


def _complete_seq(ctx: click.Context, _p: click.Parameter, incomplete: str) -> list[CompletionItem]:
    # Best effort: offer the daemon's checkpoints; never fail a completion.
    root = ctx.find_root().params
    try:
        with Client(find_socket(root.get("socket_path")), timeout=1.0) as c:
            gens = c.generations(m.GenerationsParams(all_branches=True, limit=100))
    except (ClientError, ReyndError, OSError):
        return []
    return [
        CompletionItem(str(g.seq), help=f"{g.kind} of {g.agent}, branch {g.branch}")
        for g in gens.generations
        if str(g.seq).startswith(incomplete)
    ]


SEQ = click.IntRange(min=0)
pass_opts = click.make_pass_decorator(Options)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--socket",
    "socket_path",
    metavar="PATH",
    help="Daemon socket. Default: $REYN_SOCKET, else `socket` in reynd.toml, else "
    "$XDG_RUNTIME_DIR/reynd/reynd.sock, else /run/reynd/reynd.sock.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON-RPC result exactly.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour output (auto: on a terminal, unless NO_COLOR is set).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to wait for each answer; 0 waits forever.",
)
@click.version_option(__version__, prog_name="reynctl")
@click.pass_context
def cli(
    ctx: click.Context, socket_path: str | None, as_json: bool, color: str, timeout: float
) -> None:
    """Talk to reynd, the time-travel daemon for agent runs."""
    ctx.obj = Options(socket=socket_path, json=as_json, color=color, timeout=timeout or None)


@cli.command()
@json_option
@pass_opts
def status(opts: Options) -> None:
    """Show the daemon's head, branch and version."""
    with opts.client() as c:
        reply = c.call("daemon.status", m.StatusParams(), m.StatusResult)
    if reply.value.protocol != m.PROTOCOL_VERSION:
        opts.note(
            f"warning: the daemon speaks protocol {reply.value.protocol}, "
            f"this reynctl speaks {m.PROTOCOL_VERSION}: upgrade the older one"
        )
    opts.emit(reply, lambda: render.status_text(reply.value, opts.style))


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
@json_option
@pass_opts
def checkout(opts: Options, seq: int, yes: bool) -> None:
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
        reply = c.call("checkout", m.CheckoutParams(seq=seq), m.RewindResult)
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


@cli.command()
@click.option(
    "--topic",
    "topics",
    multiple=True,
    type=click.Choice(["records", "generations", "rewinds", "agents"]),
    help="Only these topics (repeatable; default: all).",
)
@json_option
@pass_opts
def watch(opts: Options, topics: tuple[str, ...]) -> None:
    """Stream the current state, then each change (Ctrl-C stops).

    Each change is tagged with its seq. With --json, one JSON object per line.
    """
    from reynctl.watch import Watcher

    try:
        Watcher(opts, list(topics) or None).run()  # type: ignore[arg-type]
    except KeyboardInterrupt:
        sys.exit(130)


@cli.command()
@click.argument("agent")
@click.argument("kind")
@click.option("--data", default="{}", metavar="JSON", help="The event's fields, a JSON object.")
@click.option("--based-on", type=SEQ, help="Refuse the append if SEQ is no longer active.")
@json_option
@pass_opts
def append(opts: Options, agent: str, kind: str, data: str, based_on: int | None) -> None:
    """Append one event to the WAL (for external agent runtimes).

    KIND is an event kind (message.received, turn.ended, ...); --data holds its
    fields. With --based-on, the daemon refuses the append (stale_branch) when
    that seq was abandoned by a rewind since.
    """
    try:
        fields = json.loads(data)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--data") from None
    if not isinstance(fields, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--data")
    params = m.WalAppendParams(agent=agent, kind=kind, data=fields, based_on=based_on)
    with opts.client() as c:
        reply = c.call("wal.append", params, m.WalAppendResult)
    opts.emit(reply, lambda: f"appended seq {reply.value.seq} on branch {reply.value.branch}")


@cli.command()
@json_option
@pass_opts
def discover(opts: Options) -> None:
    """Print the daemon's API as an OpenRPC document."""
    with opts.client() as c:
        reply = c.call("rpc.discover", m.RpcDiscoverParams(), dict)
    opts.emit(reply, lambda: json.dumps(reply.value, indent=2, ensure_ascii=False))


@cli.command()
@json_option
@pass_opts
def shutdown(opts: Options) -> None:
    """Stop the daemon cleanly."""
    with opts.client() as c:
        reply = c.call("daemon.shutdown", m.ShutdownParams(), m.OkResult)
    opts.emit(reply, lambda: "daemon is shutting down")


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary state directory and print it.")
@click.option(
    "--ready-timeout",
    type=click.FloatRange(min=1),
    default=20.0,
    show_default=True,
    help="Seconds to wait for the embedded daemon to be ready.",
)
@json_option
@pass_opts
def demo(opts: Options, keep: bool, ready_timeout: float) -> None:
    """A guided tour of time travel on a throwaway daemon.

    Starts a real `reynd serve` on a temporary state directory and drives it
    through its socket, exactly as any client would.
    """
    from reynctl.demo import run_demo

    run_demo(opts, keep=keep, ready_timeout=ready_timeout)


def main() -> None:
    """Console script entry point."""
    cli(prog_name="reynctl")

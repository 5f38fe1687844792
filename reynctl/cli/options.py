"""What every subcommand shares: the global options, exit codes, errors, `--json`."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click

from reynctl import render
from reynctl.client import Client, Reply, find_socket
from reynctl.errors import ClientError, NoDaemon, UntrustedDaemon
from reynd.protocol import errors
from reynd.protocol.errors import ReyndError
from reynd.protocol.names import TAG_NAME_PATTERN
from reynd.protocol.paths import SOCKET_ENV, find_state_dir

__all__ = [
    "EXIT_DAEMON",
    "EXIT_DECLINED",
    "EXIT_UNREACHABLE",
    "EXIT_UNTRUSTED",
    "EXIT_USAGE",
    "REFUSALS",
    "SEQ",
    "SEQ_OR_TAG",
    "Options",
    "ask_move",
    "columns",
    "confirm_move",
    "decline",
    "dry_run_option",
    "examples",
    "fail",
    "fail_here",
    "json_option",
    "next_page",
    "pass_opts",
    "reason_option",
    "seq_or_tag",
    "usage_error_json",
    "use_color",
    "width",
]


EXIT_DAEMON = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
# The socket is served by a uid we were not told to trust: not "no daemon"
# (retrying will not help), a decision for the user (--daemon-uid).
EXIT_UNTRUSTED = 4
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
    daemon_uid: int | None = None  # trusted besides our uid and root (--daemon-uid)

    @property
    def style(self) -> render.Style:
        return render.Style(use_color(self.color, sys.stdout, os.environ))

    @property
    def err_style(self) -> render.Style:
        return render.Style(use_color(self.color, sys.stderr, os.environ))

    def client(self, *, at_least: float | None = None) -> Client:
        """A connection to the daemon (raises a ClientError naming the cause).

        `at_least` raises the per-answer timeout for a call the daemon holds
        on purpose (`agents.send` with `wait`); 0 (None) still waits forever.
        """
        timeout = self.timeout
        if timeout is not None and at_least is not None:
            timeout = max(timeout, at_least)
        path = find_socket(self.socket)
        try:
            return Client(path, timeout=timeout, daemon_uid=self.daemon_uid, name="reynctl")
        except NoDaemon:
            if self.socket or os.environ.get(SOCKET_ENV):
                raise
            state = find_state_dir()
            why = (
                f" (the socket of the state dir {state})"
                if state
                else " (no .reyn directory here or above, so the per-user socket)"
            )
            raise NoDaemon(path, why) from None

    def emit(self, reply: Reply[Any], human: Callable[[], str]) -> None:
        """The result: raw JSON with --json, else the human rendering."""
        if self.json:
            click.echo(reply.raw.decode())
        else:
            click.echo(human(), color=self.style.color)

    def note(self, text: str) -> None:
        """A hint or progress line, on stderr."""
        click.echo(text, err=True, color=self.err_style.color)


def columns() -> int:
    """The terminal's width (100 when it is not a terminal and $COLUMNS is unset)."""
    return shutil.get_terminal_size((100, 24)).columns


def next_page(cursor: object, ctx: click.Context | None = None) -> str:
    """The command for the next page: this one with the options it was given, and --cursor.

    Only what was on the command line is repeated (`--all-branches --limit 5`,
    a `--socket` before the subcommand), so the next page lists the same thing.
    """
    ctx = ctx or click.get_current_context()
    chain: list[click.Context] = []
    node: click.Context | None = ctx
    while node is not None:
        chain.append(node)
        node = node.parent
    words = ["reynctl"]
    for level in reversed(chain):
        if level.parent is not None:
            words.append(level.info_name or level.command.name or "")
        words += _given(level)
    return shlex.join([*words, "--cursor", str(cursor)])


def _given(ctx: click.Context) -> list[str]:
    """The words of the options and arguments `ctx` got on the command line (not --cursor)."""
    words: list[str] = []
    for param in ctx.command.params:
        name = param.name
        if name is None or name == "cursor" or name not in ctx.params:
            continue
        if ctx.get_parameter_source(name) != click.core.ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[name]
        values = list(value) if param.multiple or param.nargs == -1 else [value]
        if isinstance(param, click.Argument):
            words += [str(v) for v in values]
        elif isinstance(param, click.Option) and param.is_flag and not param.count:
            on = bool(value) if param.is_bool_flag else value == param.flag_value
            words += [param.opts[0]] if on else param.secondary_opts[:1]
        else:
            for v in values:
                words += [param.opts[0], str(v)]
    return words


def width() -> int:
    """Room for one truncated value on a line of the terminal."""
    return max(40, columns() - 20)


def fail(opts: Options | None, exc: ClientError | ReyndError) -> NoReturn:
    """Report an error on stderr and exit with its code."""
    if isinstance(exc, ReyndError):
        code, name = exc.code, str(exc.data.get("error", exc.name))
        status = EXIT_UNREACHABLE if isinstance(exc, REFUSALS) else EXIT_DAEMON
    else:
        code, name = exc.code, exc.name  # the client's own code (reynctl.errors.CLIENT_CODES)
        status = EXIT_UNTRUSTED if isinstance(exc, UntrustedDaemon) else EXIT_UNREACHABLE
    if opts is not None and opts.json:
        data = exc.data if isinstance(exc, ReyndError) else {}
        _json_error(code, name, exc.message, data)
    else:
        style = opts.err_style if opts else render.Style()
        where = f" ({name}, {code})" if isinstance(exc, ReyndError) else f" ({name})"
        click.echo(
            f"{style('error:', 'red', 'bold')} {exc.message}{where}", err=True, color=style.color
        )
    sys.exit(status)


def _json_error(code: int | None, name: str, message: str, data: dict[str, Any]) -> None:
    """The one JSON line on stderr of a failure under --json."""
    body = {"error": {"code": code, "name": name, "message": message, "data": data}}
    click.echo(json.dumps(body, ensure_ascii=False), err=True)


def usage_error_json(exc: click.ClickException) -> None:
    """A usage error (exit 2) under --json: its message, the usage line and where help is."""
    data: dict[str, Any] = {}
    ctx = getattr(exc, "ctx", None)
    if isinstance(ctx, click.Context):
        data["usage"] = ctx.get_usage().removeprefix("Usage:").strip()
        data["help"] = f"{ctx.command_path} --help"
    name = "usage_error" if isinstance(exc, click.UsageError) else "error"
    _json_error(None, name, exc.format_message(), data)


def fail_here(opts: Options, name: str, message: str, status: int = EXIT_DAEMON) -> NoReturn:
    """A failure reynctl itself finds (not the daemon's refusal), reported as the others."""
    if opts.json:
        _json_error(None, name, message, {})
    else:
        style = opts.err_style
        click.echo(
            f"{style('error:', 'red', 'bold')} {message} ({name})", err=True, color=style.color
        )
    sys.exit(status)


def decline(opts: Options) -> NoReturn:
    """The user said no at a prompt: nothing changed, exit 1."""
    message = "cancelled at the prompt: nothing changed"
    if opts.json:
        _json_error(None, "declined", message, {})
    else:
        opts.note(message)
    sys.exit(EXIT_DECLINED)


def confirm_move(yes: bool, command: str) -> None:
    """The rule of every command that moves the tip: `--yes`, else ask, and only on a terminal.

    Called before connecting: off a terminal without --yes it is a usage
    error (exit 2), since nobody can answer.
    """
    if not yes and not sys.stdin.isatty():
        raise click.UsageError(
            f"{command} moves every agent's state: pass --yes to confirm "
            "(stdin is not a terminal, so reynctl cannot ask)"
        )


def ask_move(
    opts: Options, head: int, what: str, detail: str = "", *, only: str | None = None
) -> None:
    """Ask on the terminal whether to go on; exit 1 (nothing changed) unless yes.

    `detail`: said first (what the move cannot undo, issue 25). `only`: the move's
    scope (a workspace-only restore moves no agent and abandons nothing)."""
    if detail:
        click.echo(detail, err=True)
    if only == "workspace":
        what += (
            ": the workspace's files become those as of that seq, the conversation and the "
            "agents stay at the tip (`reynctl undo` brings the files back). Continue?"
        )
    else:
        what += (
            ": every agent moves to its state as of that seq, later seqs become an abandoned "
            f"branch and turns in flight are cancelled (`reynctl checkout {head}` comes back). "
            "Continue?"
        )
    if not click.confirm(what, err=True):
        decline(opts)


reason_option = click.option(
    "--reason",
    default="",
    help="Why (at most 256 characters): kept in the reset record, shown by `reynctl reflog`.",
)


dry_run_option = click.option(
    "--dry-run",
    is_flag=True,
    help="Say what the move would change and what it cannot undo (commands run, model "
    "and tool calls of the branch it leaves); write nothing, cancel nothing, ask nothing.",
)


def examples(*lines: str) -> str:
    """An `Examples:` epilog for --help, kept as written (click rewraps other paragraphs)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


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


class _Seq(click.ParamType[int, str | int]):
    """A seq: a whole number, 0 or above (the global record number), never relative."""

    name = "seq"

    def convert(
        self, value: str | int, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int) and value >= 0:
            return value
        try:
            seq = int(str(value), 10)
        except ValueError:
            seq = -1
        if seq < 0:
            self.fail(
                f"{value!r} is not a seq: a seq is a record's number, a whole number 0 or above "
                "(a relative move is `rewind --back N`; `reynctl generations` lists the "
                "checkpoints)",
                param,
                ctx,
            )
        return seq


class _SeqOrTag(click.ParamType[int | str, str | int]):
    """A seq, or a tag's name (anything not all digits; `reynctl tags` lists them)."""

    name = "seq|tag"

    def convert(
        self, value: str | int, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | str:
        if isinstance(value, str) and re.match(TAG_NAME_PATTERN, value):
            return value
        return SEQ.convert(value, param, ctx)


def seq_or_tag(value: int | str | None) -> tuple[int | None, str | None]:
    """(seq, tag): how params give SEQ_OR_TAG's result, one of them (or neither: None)."""
    if isinstance(value, str):
        return None, value
    return value, None


SEQ = _Seq()
SEQ_OR_TAG = _SeqOrTag()
pass_opts = click.make_pass_decorator(Options)

"""The `reynctl` group: global options, and daemon/client errors mapped to exit codes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from reynctl import __version__
from reynctl.cli.options import Options, fail, usage_error_json
from reynctl.errors import ClientError
from reynctl.trust import DAEMON_UID_ENV
from reynd.protocol.errors import ReyndError
from reynd.protocol.peer import parse_uid

__all__ = ["cli"]


class _Uid(click.ParamType[int, str | int]):
    """A user name or a numeric uid, as the uid."""

    name = "uid"

    def convert(
        self, value: str | int, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_uid(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


_NEGATIVE = re.compile(r"-[0-9]+")
_JSON = "reynctl.json"  # ctx.meta: --json given anywhere on the command line


def _json_requested(args: Sequence[str]) -> bool:
    """--json anywhere before `--`: known even when parsing stops before reaching it."""
    words = list(args)
    return "--json" in (words[: words.index("--")] if "--" in words else words)


COLORS = ("auto", "always", "never")


def _set_color(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    opts = ctx.find_object(Options)
    if value is not None and opts is not None:
        opts.color = value


def _accept_color(command: click.Command) -> None:
    """--color after the subcommand too (`reynctl status --color never`), like --json."""
    if not any(p.name == "color" for p in command.params):  # the root has its own
        command.params.append(
            click.Option(
                ["--color"],
                type=click.Choice(COLORS),
                expose_value=False,
                callback=_set_color,
                help="As the global --color (auto, always, never).",
            )
        )


class _Command(click.Command):
    """A negative number is an argument's value (`rewind -5` is a bad SEQ, not an option)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _accept_color(self)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, list(args))
        except click.NoSuchOption as exc:
            if not _NEGATIVE.fullmatch(exc.option_name):
                raise
        # No option looks like a number: parse again with the number as an argument,
        # so that its parameter's type says what it expects.
        ctx.ignore_unknown_options = True
        return super().parse_args(ctx, args)


class _Group(click.Group):
    """Maps daemon and client errors to exit codes 1, 3 and 4; usage errors under --json."""

    command_class = _Command
    group_class = type  # subgroups are _Groups too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _accept_color(self)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        as_json = _json_requested(args) or bool(parent and parent.meta.get(_JSON))
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            _usage_error(exc, as_json=as_json)
        ctx.meta[_JSON] = as_json
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ReyndError, ClientError) as exc:
            fail(ctx.obj if isinstance(ctx.obj, Options) else None, exc)
        except click.ClickException as exc:
            _usage_error(exc, as_json=bool(ctx.meta.get(_JSON)))


def _usage_error(exc: click.ClickException, *, as_json: bool) -> NoReturn:
    """Re-raise for click to print, or print it as JSON and exit with its code."""
    if not as_json:
        raise exc
    usage_error_json(exc)
    raise click.exceptions.Exit(exc.exit_code) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--socket",
    "socket_path",
    metavar="PATH",
    # The lookup of reynctl.client.find_socket (docs/cli.md, "Finding the daemon").
    help="Daemon socket. Default: $REYN_SOCKET, else `socket` in reynd.toml, else the "
    "socket of the state dir ($REYN_STATE_DIR, else the nearest .reyn/ from here up), "
    "else (outside any project) $XDG_RUNTIME_DIR/reynd/reynd.sock, or "
    "/run/reynd/reynd.sock when only that one exists.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON-RPC result exactly.")
@click.option(
    "--color",
    type=click.Choice(COLORS),
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
@click.option(
    "--daemon-uid",
    type=_Uid(),
    envvar=DAEMON_UID_ENV,
    metavar="USER",
    help="Also trust a daemon served by this user (name or uid), e.g. a system daemon "
    "running as its own user; yours and root's are always trusted. Default: $REYN_DAEMON_UID.",
)
@click.version_option(__version__, prog_name="reynctl")
@click.pass_context
def cli(
    ctx: click.Context,
    *,
    socket_path: str | None,
    as_json: bool,
    color: str,
    timeout: float,
    daemon_uid: int | None,
) -> None:
    """Talk to reynd, the time-travel daemon for agent runs."""
    ctx.obj = Options(
        socket=socket_path,
        json=as_json,
        color=color,
        timeout=timeout or None,
        daemon_uid=daemon_uid,
    )


@cli.command(
    "help",
    epilog="\b\nExamples:\n  reynctl help\n  reynctl help rewind\n  reynctl help agents create",
)
@click.argument("words", metavar="[COMMAND]...", nargs=-1)
@click.pass_context
def help_command(ctx: click.Context, words: tuple[str, ...]) -> None:
    """Show the help of reynctl, or of COMMAND (the same as `reynctl COMMAND --help`)."""
    target = ctx.find_root()
    for word in words:
        group = target.command
        sub = group.get_command(target, word) if isinstance(group, click.Group) else None
        if sub is None:
            raise click.UsageError(
                f"no command {' '.join(words)!r}: `reynctl help` lists the commands"
            )
        target = click.Context(sub, info_name=word, parent=target)
    click.echo(target.get_help(), color=ctx.color)

"""The `reynctl` group: global options, and daemon/client errors mapped to exit codes."""

from __future__ import annotations

from typing import Any

import click

from reynctl import __version__
from reynctl.cli.options import Options, fail
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


class _Group(click.Group):
    """Maps daemon and client errors to exit codes 1, 3 and 4."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ReyndError, ClientError) as exc:
            fail(ctx.obj if isinstance(ctx.obj, Options) else None, exc)


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

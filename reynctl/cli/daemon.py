"""The daemon itself: its status, its API, shutdown, and a raw WAL append."""

from __future__ import annotations

import json

import click

from reynctl import render
from reynctl.cli.arguments import json_object
from reynctl.cli.group import cli
from reynctl.cli.options import SEQ, Options, json_option, pass_opts
from reynd.protocol import methods as m


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
    fields = json_object(data, "--data")
    params = m.WalAppendParams(agent=agent, kind=kind, data=fields, based_on=based_on)
    with opts.client() as c:
        reply = c.call("wal.append", params, m.WalAppendResult)
    opts.emit(reply, lambda: f"appended seq {reply.value.seq} on branch {reply.value.branch}")

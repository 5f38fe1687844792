"""The daemon itself: its status, its API, shutdown, and a raw WAL append."""

from __future__ import annotations

import json
import sys

import click

from reynctl import render
from reynctl.cli.arguments import json_object
from reynctl.cli.group import cli
from reynctl.cli.options import SEQ, Options, examples, json_option, pass_opts
from reynd.protocol import methods as m
from reynd.protocol.appendable import KINDS


@cli.command(
    epilog=examples(
        "reynctl status                     # head seq and branch, agents, uptime",
        "reynctl status --json | jq .head   # in a script",
    )
)
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


@cli.command(
    epilog=examples(
        "reynctl discover | jq '.methods[].name'   # the methods",
        "reynctl --json discover > openrpc.json",
    )
)
@json_option
@pass_opts
def discover(opts: Options) -> None:
    """Print the daemon's API as an OpenRPC document."""
    with opts.client() as c:
        reply = c.call("rpc.discover", m.RpcDiscoverParams(), dict)
    opts.emit(reply, lambda: json.dumps(reply.value, indent=2, ensure_ascii=False))


@cli.command(epilog=examples("reynctl shutdown   # the same clean stop as SIGTERM"))
@json_option
@pass_opts
def shutdown(opts: Options) -> None:
    """Stop the daemon cleanly."""
    with opts.client() as c:
        reply = c.call("daemon.shutdown", m.ShutdownParams(), m.OkResult)
    opts.emit(reply, lambda: "daemon is shutting down")


def _kinds_help() -> str:
    """The kinds `wal.append` takes, wrapped for --help."""
    lines, line = [], "  "
    for kind in KINDS:
        if len(line) + len(kind) > 78:
            lines.append(line.rstrip())
            line = "  "
        line += kind + ", "
    return "\n".join([*lines, line.rstrip(", ")])


@cli.command(
    epilog="\b\nKINDS:\n"
    + _kinds_help()
    + "\n\n"
    + examples(
        "reynctl append scribe agent.created      # an agent driven from outside",
        'reynctl append scribe message.received --data \'{"message_id": "m1", "text": "hi"}\'',
        'echo \'{"message_id": "m2", "text": "hi"}\' \\',
        "  | reynctl append scribe message.received --data - --based-on 57   # fenced",
    )
)
@click.argument("agent")
@click.argument("kind")
@click.option(
    "--data",
    default="{}",
    metavar="JSON",
    help="The event's fields, a JSON object; `-` reads it from stdin.",
)
@click.option("--based-on", type=SEQ, help="Refuse the append if SEQ is no longer active.")
@json_option
@pass_opts
def append(opts: Options, agent: str, kind: str, data: str, based_on: int | None) -> None:
    """Append one event to the WAL (for external agent runtimes).

    KIND is an event kind (below); --data holds its fields. With --based-on,
    the daemon refuses the append (stale_branch) when that seq was abandoned
    by a rewind since.
    """
    fields = json_object(sys.stdin.read() if data == "-" else data, "--data")
    params = m.WalAppendParams(agent=agent, kind=kind, data=fields, based_on=based_on)
    with opts.client() as c:
        reply = c.call("wal.append", params, m.WalAppendResult)
    opts.emit(reply, lambda: f"appended seq {reply.value.seq} on branch {reply.value.branch}")

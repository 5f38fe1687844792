"""The daemon itself: its status, its API, shutdown, and a raw WAL append."""

from __future__ import annotations

import json
import sys

import click
import msgspec

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
        'reynctl append scribe --events \'[{"kind": "turn.started", "data": {...}}, ...]\'',
    )
)
@click.argument("agent")
@click.argument("kind", required=False)
@click.option(
    "--data",
    default="{}",
    metavar="JSON",
    help="The event's fields, a JSON object; `-` reads it from stdin.",
)
@click.option(
    "--events",
    metavar="JSON",
    help="Instead of KIND and --data: several events, a JSON array of "
    '{"kind", "data"} objects, appended all or nothing; `-` reads it from stdin.',
)
@click.option("--based-on", type=SEQ, help="Refuse the append if SEQ is no longer active.")
@json_option
@pass_opts
def append(
    opts: Options,
    agent: str,
    kind: str | None,
    *,
    data: str,
    events: str | None,
    based_on: int | None,
) -> None:
    """Append one event, or several all or nothing, to the WAL (for external agent runtimes).

    KIND is an event kind (below); --data holds its fields. --events takes
    several events instead (wal.append_batch: one fsync, none written unless
    all are valid). With --based-on, the daemon refuses the append
    (stale_branch) when that seq was abandoned by a rewind since.
    """
    if (kind is None) == (events is None):
        raise click.UsageError("give KIND (with --data) or --events, one of the two")
    if events is not None:
        _append_batch(opts, agent, events, based_on)
        return
    assert kind is not None
    fields = json_object(sys.stdin.read() if data == "-" else data, "--data")
    params = m.WalAppendParams(agent=agent, kind=kind, data=fields, based_on=based_on)
    with opts.client() as c:
        reply = c.call("wal.append", params, m.WalAppendResult)
    opts.emit(reply, lambda: f"appended seq {reply.value.seq} on branch {reply.value.branch}")


def _append_batch(opts: Options, agent: str, events: str, based_on: int | None) -> None:
    text = sys.stdin.read() if events == "-" else events
    try:
        batch = msgspec.json.decode(text, type=list[m.BatchEvent])
    except msgspec.DecodeError as exc:
        raise click.BadParameter(
            f'a JSON array of {{"kind", "data"}} objects: {exc}', param_hint="--events"
        ) from None
    params = m.WalAppendBatchParams(agent=agent, events=batch, based_on=based_on)
    with opts.client() as c:
        reply = c.call("wal.append_batch", params, m.WalAppendBatchResult)
    seqs, branch = reply.value.seqs, reply.value.branch
    span = f"seq {seqs[0]}" if len(seqs) == 1 else f"seqs {seqs[0]}-{seqs[-1]}"
    opts.emit(reply, lambda: f"appended {span} on branch {branch}")

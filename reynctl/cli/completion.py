"""Shell completion of SEQ and AGENT arguments from the daemon (best effort)."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

from reynctl.client import Client, find_socket
from reynctl.errors import ClientError
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError


def _client(root: dict[str, Any]) -> Client:
    path = find_socket(root.get("socket_path"))
    return Client(path, timeout=1.0, daemon_uid=root.get("daemon_uid"))


def _complete_seq(ctx: click.Context, _p: click.Parameter, incomplete: str) -> list[CompletionItem]:
    # Best effort: offer the daemon's checkpoints; never fail a completion.
    root = ctx.find_root().params
    try:
        with _client(root) as c:
            gens = c.generations(m.GenerationsParams(all_branches=True, limit=100))
    except (ClientError, ReyndError, OSError):
        return []
    return [
        CompletionItem(str(g.seq), help=f"{g.kind} of {g.agent}, branch {g.branch}")
        for g in gens.generations
        if str(g.seq).startswith(incomplete)
    ]


def _complete_agent(
    ctx: click.Context, _p: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    # Best effort, like SEQ: the daemon's agents, never a failed completion.
    root = ctx.find_root().params
    try:
        with _client(root) as c:
            found = c.agents()
    except (ClientError, ReyndError, OSError):
        return []
    return [
        CompletionItem(ag.name, help=f"{ag.executor}, {ag.status}")
        for ag in found.agents
        if ag.name.startswith(incomplete)
    ]

"""Shell completion: `reynctl completion SHELL`, and SEQ and AGENT from the daemon (best effort)."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem, get_completion_class

from reynctl.cli.group import cli
from reynctl.cli.options import examples
from reynctl.client import Client, find_socket
from reynctl.errors import ClientError
from reynd.protocol.errors import ReyndError

ACTIVE_ONLY = frozenset({"rewind"})  # commands whose SEQ must be on the active lineage


def _client(root: dict[str, Any]) -> Client:
    path = find_socket(root.get("socket_path"))
    return Client(path, timeout=1.0, daemon_uid=root.get("daemon_uid"))


def _complete_seq(ctx: click.Context, _p: click.Parameter, incomplete: str) -> list[CompletionItem]:
    # Best effort: offer the daemon's checkpoints; never fail a completion.
    # `rewind` accepts only seqs of the active lineage; `checkout` (and the rest) any.
    active_only = ctx.command.name in ACTIVE_ONLY
    root = ctx.find_root().params
    try:
        with _client(root) as c:
            gens = c.generations(all_branches=not active_only, limit=100)
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


COMPLETE_VAR = "_REYNCTL_COMPLETE"  # click's variable for `reynctl` (prog name, upper case)


def completion_script(cli: click.Command, shell: str) -> str:
    """The script click's mechanism prints for `_REYNCTL_COMPLETE={shell}_source reynctl`."""
    cls = get_completion_class(shell)
    assert cls is not None, shell
    return cls(cli, {}, "reynctl", COMPLETE_VAR).source()


@cli.command(
    epilog=examples(
        "source <(reynctl completion bash)     # this shell only",
        "reynctl completion bash > ~/.local/share/bash-completion/completions/reynctl",
        "reynctl completion zsh > ~/.zfunc/_reynctl       # fpath+=(~/.zfunc) before compinit",
        "reynctl completion fish > ~/.config/fish/completions/reynctl.fish",
    )
)
@click.argument("shell", metavar="SHELL", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL: bash, zsh or fish.

    It completes commands, options and choices, and asks the daemon for SEQ
    and AGENT arguments (checkpoints and agents, 1 s timeout; nothing is
    offered when no daemon answers). Written to a file once, it does not
    start Python at every shell start.
    """
    click.echo(completion_script(cli, shell), nl=False)

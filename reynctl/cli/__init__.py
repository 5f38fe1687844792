"""The `reynctl` command line: one subcommand per daemon capability.

Data goes to stdout, everything else (prompts, hints, errors) to stderr.
`--json` prints exactly the JSON-RPC result. Exit codes: 0 ok, 1 the daemon
refused (its error name and code on stderr), 2 usage, 3 the daemon could not
be reached or understood, 4 the socket is served by a uid not trusted.

The group and what its subcommands share live in `group` and `options`; each
other module adds the subcommands of one area to the group when imported.
"""

from __future__ import annotations

# Imported for their subcommands, which register on `cli` as they are defined.
from reynctl.cli import (  # noqa: F401
    agents,
    audit,
    bisect,
    completion,
    daemon,
    edit,
    frontends,
    moves,
    retention,
    tags,
    timeline,
)
from reynctl.cli.group import cli
from reynctl.cli.options import (
    EXIT_DAEMON,
    EXIT_UNREACHABLE,
    EXIT_UNTRUSTED,
    EXIT_USAGE,
    REFUSALS,
    Options,
    use_color,
)

__all__ = [
    "EXIT_DAEMON",
    "EXIT_UNREACHABLE",
    "EXIT_UNTRUSTED",
    "EXIT_USAGE",
    "REFUSALS",
    "Options",
    "cli",
    "main",
    "use_color",
]


def main() -> None:
    """Console script entry point."""
    cli(prog_name="reynctl")

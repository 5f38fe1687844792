"""Long-running views: the live stream, the guided demo and the TUI."""

from __future__ import annotations

import sys

import click

from reynctl.cli.group import cli
from reynctl.cli.options import Options, examples, json_option, pass_opts
from reynctl.client import find_socket


@cli.command(
    epilog=examples(
        "reynctl watch                                  # until Ctrl-C",
        "reynctl watch --topic rewinds --topic agents",
        "reynctl --json watch | jq -c 'select(.type == \"notify\")'",
        "reynctl watch --no-initial                     # only what changes from now on",
    )
)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    type=click.Choice(["records", "generations", "rewinds", "agents"]),
    help="Only these topics (repeatable; default: all).",
)
@click.option(
    "--no-initial",
    is_flag=True,
    help="Do not print the current state first: only the changes from now on.",
)
@json_option
@pass_opts
def watch(opts: Options, topics: tuple[str, ...], no_initial: bool) -> None:
    """Stream the current state, then each change (Ctrl-C stops).

    Each change is tagged with its seq. With --json, one JSON object per line.
    A resync (after a gap or a lag) prints the state even with --no-initial.
    """
    from reynctl.watch import Watcher

    try:
        Watcher(opts, list(topics) or None, initial=not no_initial).run()  # type: ignore[arg-type]
    except KeyboardInterrupt:
        sys.exit(130)


@cli.command(
    epilog=examples(
        "reynctl demo",
        "reynctl demo --keep          # keep the state directory to look at it",
        "reynctl --json demo | jq -c .method",
    )
)
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


@cli.command(epilog=examples("reynctl tui", "reynctl tui --agent ada"))
@click.option("--agent", help="The agent of the chat pane (default: the first one).")
@pass_opts
def tui(opts: Options, agent: str | None) -> None:
    """Live timeline, rewind picker (Esc Esc) and chat pane, in the terminal."""
    # Checked before connecting: a full-screen app on a pipe or file only fills it
    # with escape codes, and nobody can quit it there.
    if not sys.stdout.isatty():
        raise click.UsageError(
            "reynctl tui needs a terminal, and stdout is not a terminal "
            "(for a stream a script can read, use `reynctl --json watch`)"
        )
    from reynctl.tui import run

    run(find_socket(opts.socket), agent=agent, timeout=opts.timeout, daemon_uid=opts.daemon_uid)


@cli.command(
    epilog=examples(
        "reynctl web                          # opens the browser",
        "reynctl web --no-open --port 8765    # prints the URL only",
        "reynctl web --host 0.0.0.0           # other machines too (warns)",
    )
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0: any free port."
)
@click.option("--no-open", is_flag=True, help="Do not open a browser; only print the URL.")
@pass_opts
def web(opts: Options, host: str, port: int, no_open: bool) -> None:
    """The timeline, branch tree and rewinds in a browser, live.

    Prints the URL (with its access token) as the first line on stdout and
    serves until stopped. Loopback only unless --host says otherwise.
    """
    try:
        from reynctl.web import serve
    except ImportError as exc:
        raise click.ClickException(
            f"reynctl web needs the `web` extra: pip install 'reynd[web]' ({exc})"
        ) from None
    try:
        serve(
            find_socket(opts.socket),
            host=host,
            port=port,
            open_browser=not no_open,
            timeout=opts.timeout,
            daemon_uid=opts.daemon_uid,
        )
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        sys.exit(130)

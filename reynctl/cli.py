"""The `reynctl` command line: one subcommand per daemon capability.

Data goes to stdout, everything else (prompts, hints, errors) to stderr.
`--json` prints exactly the JSON-RPC result. Exit codes: 0 ok, 1 the daemon
refused (its error name and code on stderr), 2 usage, 3 the daemon could not
be reached or understood.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click
import msgspec
from click.shell_completion import CompletionItem

from reynctl import __version__, render
from reynctl.client import Client, Reply, find_socket
from reynctl.errors import ClientError
from reynd.protocol import agent_methods as a
from reynd.protocol import audit_methods as am
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError

__all__ = ["EXIT_DAEMON", "EXIT_UNREACHABLE", "EXIT_USAGE", "REFUSALS", "Options", "cli", "main"]

EXIT_DAEMON = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
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
        return Client(find_socket(self.socket), timeout=timeout)

    def emit(self, reply: Reply[Any], human: Callable[[], str]) -> None:
        """The result: raw JSON with --json, else the human rendering."""
        if self.json:
            click.echo(reply.raw.decode())
        else:
            click.echo(human(), color=self.style.color)

    def note(self, text: str) -> None:
        """A hint or progress line, on stderr."""
        click.echo(text, err=True, color=self.err_style.color)


def width() -> int:
    """Room for one truncated value on a line of the terminal."""
    return max(40, shutil.get_terminal_size((100, 24)).columns - 20)


def fail(opts: Options | None, exc: ClientError | ReyndError) -> NoReturn:
    """Report an error on stderr and exit with its code."""
    if isinstance(exc, ReyndError):
        code, name = exc.code, str(exc.data.get("error", exc.name))
        status = EXIT_UNREACHABLE if isinstance(exc, REFUSALS) else EXIT_DAEMON
    else:
        code, name, status = None, exc.name, EXIT_UNREACHABLE
    if opts is not None and opts.json:
        data = exc.data if isinstance(exc, ReyndError) else {}
        body = {"error": {"code": code, "name": name, "message": exc.message, "data": data}}
        click.echo(json.dumps(body, ensure_ascii=False), err=True)
    else:
        style = opts.err_style if opts else render.Style()
        where = f" ({name}, {code})" if code is not None else f" ({name})"
        click.echo(
            f"{style('error:', 'red', 'bold')} {exc.message}{where}", err=True, color=style.color
        )
    sys.exit(status)


class _Group(click.Group):
    """Maps daemon and client errors to exit codes 1 and 3."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ReyndError, ClientError) as exc:
            fail(ctx.obj if isinstance(ctx.obj, Options) else None, exc)


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


def _complete_seq(ctx: click.Context, _p: click.Parameter, incomplete: str) -> list[CompletionItem]:
    # Best effort: offer the daemon's checkpoints; never fail a completion.
    root = ctx.find_root().params
    try:
        with Client(find_socket(root.get("socket_path")), timeout=1.0) as c:
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
        with Client(find_socket(root.get("socket_path")), timeout=1.0) as c:
            found = c.agents()
    except (ClientError, ReyndError, OSError):
        return []
    return [
        CompletionItem(ag.name, help=f"{ag.executor}, {ag.status}")
        for ag in found.agents
        if ag.name.startswith(incomplete)
    ]


SEQ = click.IntRange(min=0)
EXECUTORS = click.Choice(["builtin", "command", "openai"])
pass_opts = click.make_pass_decorator(Options)


def _option_value(text: str) -> Any:
    """KEY=VALUE's value: JSON when it parses (0.5, true, [1]), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_options(pairs: tuple[str, ...], as_json: str | None) -> dict[str, Any] | None:
    """--option KEY=VALUE (repeatable) or --options JSON; None when neither is given."""
    if pairs and as_json is not None:
        raise click.UsageError("give either --option KEY=VALUE ... or --options JSON, not both")
    if as_json is not None:
        try:
            value = json.loads(as_json)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--options") from None
        if not isinstance(value, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--options")
        return value
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--option")
        options[key.strip()] = _option_value(value)
    return options


def options_decorators(f: F) -> F:
    """--option KEY=VALUE ... | --options JSON, shared by `agents create` and `configure`."""
    f = click.option(
        "--options",
        "options_json",
        metavar="JSON",
        help="The executor's options as one JSON object.",
    )(f)
    return click.option(
        "--option",
        "-o",
        "option_pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="One executor option (repeatable); VALUE is read as JSON when it parses "
        "(delay=0.5), else as a string (model=llama3).",
    )(f)


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
@click.version_option(__version__, prog_name="reynctl")
@click.pass_context
def cli(
    ctx: click.Context, socket_path: str | None, as_json: bool, color: str, timeout: float
) -> None:
    """Talk to reynd, the time-travel daemon for agent runs."""
    ctx.obj = Options(socket=socket_path, json=as_json, color=color, timeout=timeout or None)


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
@click.option("--agent", help="Only this agent's generations.")
@click.option("--kind", type=click.Choice(["turn", "plan_step", "phase"]), help="Only this kind.")
@click.option("--all-branches", is_flag=True, help="Include abandoned branches.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", type=SEQ, help="Continue from a previous page's next cursor.")
@json_option
@pass_opts
def generations(
    opts: Options,
    *,
    agent: str | None,
    kind: Any,
    all_branches: bool,
    limit: int,
    cursor: int | None,
) -> None:
    """List checkpoints, newest first.

    Generations are cut at turn, plan-step and phase boundaries; by default
    only those on the active lineage are listed.
    """
    params = m.GenerationsParams(
        agent=agent, kind=kind, all_branches=all_branches, limit=limit, cursor=cursor
    )
    with opts.client() as c:
        reply = c.call("generations.list", params, m.GenerationsResult)
    opts.emit(reply, lambda: render.generations_table(reply.value, opts.style))
    if reply.value.next_cursor is not None and not opts.json:
        opts.note(f"more: reynctl generations --cursor {reply.value.next_cursor}")


@cli.command()
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@json_option
@pass_opts
def rewind(opts: Options, seq: int) -> None:
    """Move the tip back to SEQ, an active seq below it.

    Nothing is deleted: the seqs after SEQ become an abandoned branch that
    `reynctl checkout` can bring back. For a seq on an abandoned branch, use
    checkout.
    """
    with opts.client() as c:
        reply = c.call("rewind", m.RewindParams(seq=seq), m.RewindResult)
    opts.emit(reply, lambda: render.rewind_text(reply.value, opts.style))


@cli.command()
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--force",
    is_flag=True,
    help="With workspace rewind on: restore the files even over changes reynd did not "
    "record (they are kept: checking the old tip out brings them back).",
)
@json_option
@pass_opts
def checkout(opts: Options, seq: int, yes: bool, force: bool) -> None:
    """Undo to SEQ, or switch to the abandoned branch that holds it.

    Every agent's state moves to SEQ and turns in flight are cancelled.
    Asks first on a terminal; elsewhere pass --yes.
    """
    if not yes and not sys.stdin.isatty():
        raise click.UsageError(
            "checkout moves every agent's state: pass --yes to confirm "
            "(stdin is not a terminal, so reynctl cannot ask)"
        )
    with opts.client() as c:
        if not yes:
            head = c.status().head
            if not click.confirm(
                f"checkout seq {seq}: every agent moves to its state as of seq {seq} and turns "
                f"in flight are cancelled (`reynctl checkout {head}` comes back). Continue?",
                err=True,
            ):
                opts.note("cancelled: nothing changed")
                sys.exit(EXIT_DECLINED)
        reply = c.call("checkout", m.CheckoutParams(seq=seq, force=force), m.RewindResult)
    opts.emit(reply, lambda: render.rewind_text(reply.value, opts.style))


@cli.command()
@json_option
@pass_opts
def branches(opts: Options) -> None:
    """Draw the branch tree; the checked-out branch is marked."""
    with opts.client() as c:
        reply = c.call("branches.list", m.BranchesParams(), m.BranchesResult)
    opts.emit(reply, lambda: render.branch_tree(reply.value, opts.style))


@cli.command()
@click.argument("seq", type=SEQ, required=False, shell_complete=_complete_seq)
@click.option("--agent", help="Only this agent.")
@json_option
@pass_opts
def show(opts: Options, seq: int | None, agent: str | None) -> None:
    """Show the state as of SEQ (default: the tip).

    A read: it never moves the tip, and works for any retained seq, active
    or abandoned.
    """
    with opts.client() as c:
        reply = c.call("state.get", m.StateParams(seq=seq, agent=agent), m.StateResult)
    opts.emit(reply, lambda: render.state_text(reply.value, opts.style, width()))


@cli.command()
@click.argument("from_seq", metavar="FROM", type=SEQ, shell_complete=_complete_seq)
@click.argument("to_seq", metavar="TO", type=SEQ, shell_complete=_complete_seq)
@click.option("--agent", help="Only this agent.")
@json_option
@pass_opts
def diff(opts: Options, from_seq: int, to_seq: int, agent: str | None) -> None:
    """Show what differs between the states as of FROM and TO."""
    params = m.DiffParams(from_seq=from_seq, to_seq=to_seq, agent=agent)
    with opts.client() as c:
        reply = c.call("state.diff", params, m.DiffResult)
    opts.emit(reply, lambda: render.diff_text(reply.value, opts.style, width()))


@cli.command()
@click.option(
    "--topic",
    "topics",
    multiple=True,
    type=click.Choice(["records", "generations", "rewinds", "agents"]),
    help="Only these topics (repeatable; default: all).",
)
@json_option
@pass_opts
def watch(opts: Options, topics: tuple[str, ...]) -> None:
    """Stream the current state, then each change (Ctrl-C stops).

    Each change is tagged with its seq. With --json, one JSON object per line.
    """
    from reynctl.watch import Watcher

    try:
        Watcher(opts, list(topics) or None).run()  # type: ignore[arg-type]
    except KeyboardInterrupt:
        sys.exit(130)


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
    try:
        fields = json.loads(data)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--data") from None
    if not isinstance(fields, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--data")
    params = m.WalAppendParams(agent=agent, kind=kind, data=fields, based_on=based_on)
    with opts.client() as c:
        reply = c.call("wal.append", params, m.WalAppendResult)
    opts.emit(reply, lambda: f"appended seq {reply.value.seq} on branch {reply.value.branch}")


# -- the agent runtime ------------------------------------------------------------------


@cli.group(invoke_without_command=True)
@click.option("--session", help="Only this session's agents.")
@json_option
@click.pass_context
def agents(ctx: click.Context, session: str | None) -> None:
    """List the agents (the default), or create, show or configure one.

    Agents run inside the daemon: each takes messages from its inbox and runs
    turns made of act-steps, each step one call to its executor.
    """
    if ctx.invoked_subcommand is None:
        _list_agents(ctx.find_object(Options), session)  # type: ignore[arg-type]


def _list_agents(opts: Options, session: str | None) -> None:
    with opts.client() as c:
        params = a.AgentsListParams(session=session)
        reply = c.call("agents.list", params, a.AgentsListResult)
    opts.emit(reply, lambda: render.agents_table(reply.value, opts.style))


@agents.command("list")
@click.option("--session", help="Only this session's agents.")
@json_option
@pass_opts
def agents_list(opts: Options, session: str | None) -> None:
    """List the agents with their status, turn in flight and counters."""
    _list_agents(opts, session)


@agents.command("create")
@click.argument("name")
@click.option(
    "--executor",
    type=EXECUTORS,
    default="builtin",
    show_default=True,
    help="What runs each act-step: the deterministic demo executor, a program, or an "
    "OpenAI-compatible endpoint.",
)
@options_decorators
@click.option("--session", default="default", show_default=True, help="The agent's session.")
@json_option
@pass_opts
def agents_create(
    opts: Options,
    *,
    name: str,
    executor: Any,
    option_pairs: tuple[str, ...],
    options_json: str | None,
    session: str,
) -> None:
    """Create agent NAME with its executor and options.

    \b
    builtin  delay (seconds per step; a deterministic demo, no model)
    command  argv (a JSON list), timeout, env, cwd: one program run per step,
             JSON request on stdin, JSON result on stdout
    openai   base_url, model, api_key_env, timeout, temperature, system, tools:
             an OpenAI-compatible chat-completions server (llama.cpp, Ollama, vLLM)
    """
    params = a.AgentsCreateParams(
        name=name,
        executor=executor,
        options=parse_options(option_pairs, options_json) or {},
        session=session,
    )
    with opts.client() as c:
        reply = c.call("agents.create", params, a.AgentInfo)
    opts.emit(reply, lambda: render.agent_text(reply.value, opts.style))


@agents.command("show")
@click.argument("name", shell_complete=_complete_agent)
@json_option
@pass_opts
def agents_show(opts: Options, name: str) -> None:
    """Show one agent: configuration, status, counters, what it waits for."""
    with opts.client() as c:
        reply = c.call("agents.get", a.AgentsGetParams(agent=name), a.AgentInfo)
    opts.emit(reply, lambda: render.agent_text(reply.value, opts.style))


@agents.command("configure")
@click.argument("name", shell_complete=_complete_agent)
@click.option("--executor", type=EXECUTORS, help="Switch the agent to this executor.")
@options_decorators
@json_option
@pass_opts
def agents_configure(
    opts: Options,
    *,
    name: str,
    executor: Any,
    option_pairs: tuple[str, ...],
    options_json: str | None,
) -> None:
    """Change agent NAME's executor or its options (recorded in the WAL).

    The options given replace the previous ones (`--options '{}'` resets them
    to the executor's defaults); the next step uses the new configuration.
    """
    options = parse_options(option_pairs, options_json)
    if executor is None and options is None:
        raise click.UsageError("nothing to change: give --executor, --option or --options")
    params = a.AgentsConfigureParams(agent=name, executor=executor, options=options)
    with opts.client() as c:
        reply = c.call("agents.configure", params, a.AgentInfo)
    opts.emit(reply, lambda: render.agent_text(reply.value, opts.style))


@cli.command()
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("text")
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait for the turn to end and print its reply, or return once it is queued.",
)
@click.option(
    "--timeout",
    "wait_timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="With --wait, seconds to wait for the turn to end (it keeps running after).",
)
@json_option
@pass_opts
def send(opts: Options, agent: str, text: str, wait: bool, wait_timeout: float) -> None:
    """Send TEXT to AGENT (`-` reads it from stdin); prints the turn id.

    With --wait (the default), also the turn's outcome, its reply and its
    boundary seq (the turn.ended record, a checkpoint to rewind to). A turn
    still in flight when the wait ends keeps running: `reynctl agents show`.
    """
    if text == "-":
        text = sys.stdin.read()
    if not text:
        raise click.BadParameter("the message is empty", param_hint="TEXT")
    params = a.AgentsSendParams(agent=agent, text=text, wait=wait, timeout=wait_timeout)
    try:
        with opts.client(at_least=wait_timeout + 10 if wait else None) as c:
            reply = c.call("agents.send", params, a.AgentsSendResult)
    except KeyboardInterrupt:
        opts.note(
            f"stopped waiting; a turn already started keeps running (reynctl agents show {agent})"
        )
        sys.exit(130)
    opts.emit(
        reply,
        lambda: render.send_text(reply.value, opts.style, waited=wait_timeout if wait else None),
    )
    if wait and reply.value.boundary_seq is None and not opts.json:
        opts.note(
            f"the turn is still in flight: `reynctl agents show {agent}` for its status, "
            f"`reynctl interventions --agent {agent}` if it asked a question"
        )


@cli.command()
@click.argument("agent", shell_complete=_complete_agent)
@json_option
@pass_opts
def cancel(opts: Options, agent: str) -> None:
    """Hard-cancel AGENT's turn in flight.

    The step being run is aborted wherever it waits (a subprocess is killed)
    and is not committed; the turn ends with outcome `cancelled`. The agent
    then takes its next message.
    """
    with opts.client() as c:
        reply = c.call("agents.cancel", a.AgentsCancelParams(agent=agent), a.AgentsCancelResult)
    opts.emit(reply, lambda: render.cancel_text(reply.value, agent, opts.style))


@cli.command()
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("action", type=click.Choice(["retry", "skip", "abort"]))
@json_option
@pass_opts
def resolve(opts: Options, agent: str, action: Any) -> None:
    """Settle AGENT's ambiguous step (started before a crash, no result).

    \b
    retry  run the step again (its first call may have had effects)
    skip   record it as skipped; the turn goes on
    abort  end the turn (outcome aborted)
    `reynctl status` lists ambiguous steps.
    """
    params = a.AgentsResolveParams(agent=agent, action=action)
    with opts.client() as c:
        reply = c.call("agents.resolve", params, a.AgentInfo)
    opts.emit(reply, lambda: render.resolve_text(reply.value, action, opts.style))


@cli.command()
@click.option("--agent", shell_complete=_complete_agent, help="Only this agent's questions.")
@json_option
@pass_opts
def interventions(opts: Options, agent: str | None) -> None:
    """List the questions agents wait on (answer with `reynctl answer`)."""
    params = a.InterventionsListParams(agent=agent)
    with opts.client() as c:
        reply = c.call("interventions.list", params, a.InterventionsListResult)
    opts.emit(reply, lambda: render.interventions_table(reply.value, opts.style))
    if reply.value.interventions and not opts.json:
        opts.note("answer with: reynctl answer AGENT ID TEXT")


@cli.command()
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("intervention_id", metavar="ID")
@click.argument("text")
@json_option
@pass_opts
def answer(opts: Options, agent: str, intervention_id: str, text: str) -> None:
    """Answer AGENT's question ID with TEXT; the waiting turn goes on.

    An answer to a question not asked yet is kept (buffered) and used when it
    is asked.
    """
    params = a.InterventionsAnswerParams(agent=agent, intervention_id=intervention_id, answer=text)
    with opts.client() as c:
        reply = c.call("interventions.answer", params, a.InterventionsAnswerResult)
    opts.emit(reply, lambda: render.answer_text(reply.value, agent, intervention_id, opts.style))


@cli.command("act-turn-rewind")
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@json_option
@pass_opts
def act_turn_rewind(opts: Options, agent: str, seq: int) -> None:
    """Rewind to SEQ inside one of AGENT's turns, between two act-steps.

    Like `rewind`, the tip moves back to SEQ (an active seq) and later seqs
    become an abandoned branch; then the turn resumes: steps up to SEQ are
    ghost-replayed from their memos (0 executor calls), later ones run again.
    `reynctl checkout` of the previous head comes back.
    """
    with opts.client() as c:
        params = a.ActTurnRewindParams(agent=agent, seq=seq)
        reply = c.call("act_turn.rewind", params, a.ActTurnRewindResult)
    opts.emit(reply, lambda: render.act_turn_text(reply.value, agent, opts.style))


# -- the audit log and the replay debugger (read-only) -----------------------------------


def parse_point(text: str) -> am.Point:
    """SEQ, RUN:INDEX, branch:ID, or RUN alone (a whole run)."""
    if text.isdigit():
        return am.Point(seq=int(text))
    head, sep, tail = text.rpartition(":")
    if sep and head == "branch" and tail.isdigit():
        return am.Point(branch=int(tail))
    if sep and head and tail.isdigit():
        return am.Point(run=head, index=int(tail))
    if text.startswith("run-") and not sep:
        return am.Point(run=text)
    raise click.BadParameter(f"{text!r} is not SEQ, RUN:INDEX, branch:ID or RUN")


@cli.group(invoke_without_command=True)
@click.option("--run", help="Only this run (`reynctl events runs` lists them).")
@click.option("--agent", help="Only this agent's events.")
@click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable).")
@click.option("--branch", type=SEQ, help="Only events on this branch.")
@click.option("--from-seq", type=SEQ, help="Only seqs at or above.")
@click.option("--to-seq", type=SEQ, help="Only seqs at or below.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--cursor", metavar="RUN:INDEX", help="Continue from a previous page.")
@json_option
@click.pass_context
def events(
    ctx: click.Context,
    *,
    run: str | None,
    agent: str | None,
    kinds: tuple[str, ...],
    branch: int | None,
    from_seq: int | None,
    to_seq: int | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List the audit log's events, oldest first (the default); or its runs, or one event.

    The audit log records every user-visible event of each daemon run
    (turns, steps, rewinds, checkouts, questions, agent changes), apart from
    the WAL: it outlives WAL retention, and recovery never reads it.
    """
    if ctx.invoked_subcommand is not None:
        return
    opts = ctx.find_object(Options)
    assert opts is not None
    params = am.EventsListParams(
        run=run,
        agent=agent,
        kind=list(kinds),
        branch=branch,
        from_seq=from_seq,
        to_seq=to_seq,
        limit=limit,
        cursor=cursor,
    )
    with opts.client() as c:
        reply = c.call("events.list", params, am.EventsListResult)
    opts.emit(reply, lambda: render.events_table(reply.value, opts.style, width()))
    if reply.value.next_cursor is not None and not opts.json:
        opts.note(f"more: reynctl events --cursor {reply.value.next_cursor}")


@events.command("runs")
@json_option
@pass_opts
def events_runs(opts: Options) -> None:
    """List the daemon runs in the audit log, oldest first."""
    with opts.client() as c:
        reply = c.call("events.runs", am.EventsRunsParams(), am.EventsRunsResult)
    opts.emit(reply, lambda: render.runs_table(reply.value, opts.style))


@events.command("show")
@click.argument("where", metavar="SEQ|RUN:INDEX")
@json_option
@pass_opts
def events_show(opts: Options, where: str) -> None:
    """Show one event in full, by its seq or its position in a run."""
    point = parse_point(where)
    if point.branch is not None or (point.run is not None and point.index is None):
        raise click.BadParameter("give SEQ or RUN:INDEX", param_hint="SEQ|RUN:INDEX")
    params = am.EventsGetParams(run=point.run, index=point.index, seq=point.seq)
    with opts.client() as c:
        reply = c.call("events.get", params, am.AuditEvent)
    opts.emit(reply, lambda: render.audit_event_text(reply.value, opts.style))


@cli.group()
def replay() -> None:
    """Walk, seek and compare past runs from the audit log (never moves the tip)."""


@replay.command("walk")
@click.option("--run", help="The run to walk (default: the current one).")
@click.option("--index", type=SEQ, default=0, show_default=True, help="Start at this index.")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@click.option("--agent", help="Only this agent's events.")
@json_option
@pass_opts
def replay_walk(opts: Options, run: str | None, index: int, limit: int, agent: str | None) -> None:
    """Step through a run's events, each with what it changed."""
    params = am.ReplayWalkParams(run=run, index=index, limit=limit, agent=agent)
    with opts.client() as c:
        reply = c.call("replay.walk", params, am.ReplayWalkResult)
    opts.emit(reply, lambda: render.walk_text(reply.value, opts.style, width()))
    if reply.value.next_index is not None and not opts.json:
        opts.note(
            f"more: reynctl replay walk --run {reply.value.run} --index {reply.value.next_index}"
        )


@replay.command("seek")
@click.argument("where", metavar="SEQ|RUN:INDEX")
@click.option("--agent", help="Only this agent.")
@json_option
@pass_opts
def replay_seek(opts: Options, where: str, agent: str | None) -> None:
    """Show the agents as of a point, rebuilt from the audit log alone.

    Works for seqs whose WAL retention already collected (where `reynctl
    show` answers below_floor).
    """
    point = parse_point(where)
    if point.branch is not None or (point.run is not None and point.index is None):
        raise click.BadParameter("give SEQ or RUN:INDEX", param_hint="SEQ|RUN:INDEX")
    params = am.ReplaySeekParams(run=point.run, index=point.index, seq=point.seq, agent=agent)
    with opts.client() as c:
        reply = c.call("replay.seek", params, am.ReplaySeekResult)
    opts.emit(reply, lambda: render.seek_text(reply.value, opts.style, width()))


@replay.command("compare")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--agent", help="Only this agent's events.")
@click.option(
    "--ignore",
    multiple=True,
    help="A field not to compare (repeatable; default: message_id and turn_id).",
)
@click.option("--all", "include_same", is_flag=True, help="Show the steps that are the same too.")
@click.option("--from-step", type=SEQ, default=0, show_default=True)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@json_option
@pass_opts
def replay_compare(
    opts: Options,
    *,
    a: str,
    b: str,
    agent: str | None,
    ignore: tuple[str, ...],
    include_same: bool,
    from_step: int,
    limit: int,
) -> None:
    """Compare A and B step by step: where they diverge and how.

    Each side is SEQ or RUN:INDEX (the history leading there), branch:ID
    (the branch's history up to its last seq), or a RUN id alone (the run's
    events as recorded).
    """
    params = am.ReplayCompareParams(
        a=parse_point(a),
        b=parse_point(b),
        agent=agent,
        from_step=from_step,
        limit=limit,
        include_same=include_same,
    )
    if ignore:
        params.ignore = list(ignore)
    with opts.client() as c:
        reply = c.call("replay.compare", params, am.ReplayCompareResult)
    opts.emit(reply, lambda: render.compare_text(reply.value, opts.style, width()))
    if reply.value.next_step is not None and not opts.json:
        opts.note(f"more: --from-step {reply.value.next_step}")


# -- retention ---------------------------------------------------------------------------


@cli.group(invoke_without_command=True)
@json_option
@click.pass_context
def retention(ctx: click.Context) -> None:
    """Show the retention policy and the floor (the default), change it, or collect now.

    Every seq from the floor to the tip can be read, rewound to and checked
    out, on any branch; below it, only the coarse points (kept snapshots).
    """
    if ctx.invoked_subcommand is None:
        _show_retention(ctx.find_object(Options))  # type: ignore[arg-type]


def _show_retention(opts: Options) -> None:
    with opts.client() as c:
        reply = c.call("retention.get", m.RetentionGetParams(), m.RetentionInfo)
    opts.emit(reply, lambda: render.retention_text(reply.value, opts.style))


@retention.command("show")
@json_option
@pass_opts
def retention_show(opts: Options) -> None:
    """Show the policy, floor, head, WAL bytes and coarse points."""
    _show_retention(opts)


RETENTION_KEYS = tuple(f for f in m.RetentionSetParams.__struct_fields__)


def parse_retention(pairs: tuple[str, ...]) -> m.RetentionSetParams:
    """KEY=VALUE pairs as retention.set params; a usage error names a bad key or value."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="KEY=VALUE")
        if key not in RETENTION_KEYS:
            raise click.BadParameter(
                f"unknown key {key!r} (one of: {', '.join(RETENTION_KEYS)})",
                param_hint="KEY=VALUE",
            )
        fields[key] = _option_value(value)
    try:
        return msgspec.convert(fields, m.RetentionSetParams)
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="KEY=VALUE") from None


@retention.command("set")
@click.argument("pairs", metavar="KEY=VALUE...", nargs=-1, required=True)
@json_option
@pass_opts
def retention_set(opts: Options, pairs: tuple[str, ...]) -> None:
    """Change the retention policy; only the keys given change.

    Stored in the state directory (state/config/config.db): it outlives
    restarts and overrides the same key of reynd.toml's [retention].

    \b
    wal_keep_records     keep at least this many newest records (0: off)
    wal_keep_age_s       keep records younger than this (seconds, 0: off)
    wal_keep_bytes       keep at least this many bytes of WAL (0: off)
    snapshot_keep        snapshots kept below the floor (coarse points)
    snapshot_keep_age_s  also keep snapshots younger than this (seconds, 0: off)
    gc_interval_s        collect every this many seconds (0: only on request)
    """
    params = parse_retention(pairs)
    with opts.client() as c:
        reply = c.call("retention.set", params, m.RetentionInfo)
    opts.emit(reply, lambda: render.retention_text(reply.value, opts.style))


@retention.command("gc")
@json_option
@pass_opts
def retention_gc(opts: Options) -> None:
    """Collect now what the policy no longer keeps; prints how far the floor moved."""
    with opts.client() as c:
        reply = c.call("retention.gc", m.RetentionGcParams(), m.GcResult)
    opts.emit(reply, lambda: render.gc_text(reply.value, opts.style))


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


@cli.command()
@click.option("--agent", help="The agent of the chat pane (default: the first one).")
@pass_opts
def tui(opts: Options, agent: str | None) -> None:
    """Live timeline, rewind picker (Esc Esc) and chat pane, in the terminal."""
    from reynctl.tui import run

    run(find_socket(opts.socket), agent=agent, timeout=opts.timeout)


def main() -> None:
    """Console script entry point."""
    cli(prog_name="reynctl")

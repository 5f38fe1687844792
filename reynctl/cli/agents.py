"""The agent runtime: agents, messages, cancels, ambiguous steps, questions, act-turn rewinds."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import click

from reynctl import render
from reynctl.cli.arguments import options_decorators, parse_options
from reynctl.cli.completion import _complete_agent, _complete_seq
from reynctl.cli.fields import wait_timeout_option
from reynctl.cli.group import cli
from reynctl.cli.options import (
    SEQ,
    Options,
    confirm_move,
    dry_run_option,
    examples,
    fail_here,
    json_option,
    pass_opts,
    reason_option,
)
from reynctl.cli.then import send_option, sent_text, then_of
from reynctl.cli.timeline import move, no_follow, preview_move
from reynctl.client import Client
from reynctl.errors import DaemonTimeout
from reynctl.jsonrpc import ServerMessage, decode_notification
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.executor import DEFAULT_EXECUTOR, EXECUTOR_NAMES
from reynd.protocol.state import AgentState

EXECUTORS = click.Choice(EXECUTOR_NAMES)


@cli.group(
    invoke_without_command=True,
    epilog=examples(
        "reynctl agents                          # the table",
        "reynctl agents create ada",
        "reynctl agents show ada",
        "reynctl agents configure ada -o delay=0.5",
    ),
)
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


@agents.command(
    "create",
    epilog=examples(
        "reynctl agents create ada",
        "reynctl agents create bo --executor openai -o base_url=http://127.0.0.1:11434/v1 "
        "-o model=llama3",
        'reynctl agents create cy --executor command --options \'{"argv": ["./my-step"]}\'',
    ),
)
@click.argument("name")
@click.option(
    "--executor",
    type=EXECUTORS,
    default=DEFAULT_EXECUTOR,
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


def _settled(info: a.AgentInfo, agent: AgentState | None) -> bool:
    """Nothing left that the agent does on its own (it may wait for the operator)."""
    if info.status in ("waiting", "ambiguous", "failed"):
        return True  # a question, an ambiguous step, a failed runner: the operator's move
    pending = agent is not None and bool(agent.inbox or agent.pending_chains)
    return info.status == "idle" and info.turn_id is None and not pending


@agents.command(
    "wait",
    epilog=examples(
        "reynctl rewind 11 --yes && reynctl agents wait   # until the re-run turn is done",
        "reynctl send ada hello --no-wait && reynctl agents wait ada --timeout 60",
    ),
)
@click.argument("names", metavar="[NAME]...", nargs=-1, shell_complete=_complete_agent)
@wait_timeout_option("Give up after this many seconds (exit 1).")
@json_option
@pass_opts
def agents_wait(opts: Options, names: tuple[str, ...], wait_timeout: float) -> None:
    """Wait until agents have nothing left to do on their own; then list them.

    An agent is done when it is idle with no turn in flight and an empty
    inbox, or when it waits for the operator (a question, an ambiguous step)
    or failed. Default: every agent the daemon runs (not those an external
    runtime drives). For scripts: after a rewind, checkout or act-turn rewind
    (work pending at the target runs again at once), or `send --no-wait`.
    """
    deadline = time.monotonic() + wait_timeout
    with opts.client() as c:
        for name in names:
            c.call("agents.get", a.AgentsGetParams(agent=name), a.AgentInfo)  # unknown_agent
        c.call("subscribe", m.SubscribeParams(topics=["agents"]), m.SubscribeResult)
        while True:
            # Subscribed first: a change after these reads is a notification below.
            state = c.call("state.get", m.StateParams(), m.StateResult).value
            reply = c.call("agents.list", a.AgentsListParams(), a.AgentsListResult)
            busy = [
                info.name
                for info in reply.value.agents
                if (info.name in names if names else info.executor in EXECUTOR_NAMES)
                and not _settled(info, state.agents.get(info.name))
            ]
            remaining = deadline - time.monotonic()
            if not busy or remaining <= 0:
                break
            # Woken by a status change; a second at most, should a notification be lost.
            with contextlib.suppress(DaemonTimeout):
                next(c.notifications(timeout=min(1.0, remaining)))
    if busy:
        fail_here(
            opts,
            "wait_timeout",
            f"still busy after {wait_timeout:g}s: {', '.join(busy)} (reynctl agents)",
        )
    opts.emit(reply, lambda: render.agents_table(reply.value, opts.style))


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


@cli.command(
    epilog=examples(
        'reynctl send ada "Plan a weekend in Kyoto."     # waits for the turn',
        'reynctl send ada "/plan book; visit; rest" --no-wait',
        "git diff | reynctl send ada -                  # the text from stdin",
        "reynctl --json send ada hello | jq .boundary_seq",
    )
)
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("text")
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait for the turn to end and print its reply, or return once it is queued.",
)
@wait_timeout_option("With --wait, seconds to wait for the turn to end (it keeps running after).")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="With --wait, show the turn id and each step on stderr as they happen "
    "[default: when stderr is a terminal].",
)
@json_option
@pass_opts
def send(
    opts: Options, *, agent: str, text: str, wait: bool, wait_timeout: float, progress: bool | None
) -> None:
    """Send TEXT to AGENT (`-` reads it from stdin); prints the turn id.

    With --wait (the default), also the turn's outcome, its reply and its
    boundary seq (the turn.ended record, a checkpoint to rewind to). The wait
    ends early when the turn asks a question: it prints the question and the
    `reynctl answer` command. A turn still in flight when the wait ends keeps
    running: `reynctl agents show`.
    """
    if text == "-":
        text = sys.stdin.read()
    if not text:
        raise click.BadParameter("the message is empty", param_hint="TEXT")
    params = a.AgentsSendParams(agent=agent, text=text, wait=wait, timeout=wait_timeout)
    if progress is None:
        progress = sys.stderr.isatty() and not opts.json
    try:
        with opts.client(at_least=wait_timeout + 10 if wait else None) as c:
            on_notify = None
            if wait and progress:
                c.call("agents.get", a.AgentsGetParams(agent=agent), a.AgentInfo)  # unknown_agent
                c.call("subscribe", m.SubscribeParams(topics=["records"]), m.SubscribeResult)
                on_notify = _TurnProgress(opts, agent)
            reply = c.call("agents.send", params, a.AgentsSendResult, on_notify=on_notify)
    except KeyboardInterrupt:
        opts.note(
            f"stopped waiting; a turn already started keeps running (reynctl agents show {agent})"
        )
        sys.exit(130)
    opts.emit(
        reply,
        lambda: render.send_text(reply.value, opts.style, waited=wait_timeout if wait else None),
    )
    res = reply.value
    if not wait or opts.json or res.boundary_seq is not None or res.outcome is not None:
        return
    if res.intervention_id is not None:
        opts.note(f'answer with: reynctl answer {agent} {res.intervention_id} "TEXT"')
    else:
        opts.note(f"the turn is still in flight: `reynctl agents show {agent}` for its status")


class _TurnProgress:
    """`send --progress`: the turn id as soon as the message is recorded, then its steps.

    Subscribed before the send, so the first message.received of the agent is
    ours unless another client sent to it in the same instant; the final
    result names the turn exactly.
    """

    def __init__(self, opts: Options, agent: str) -> None:
        self.opts = opts
        self.agent = agent
        self.turn_id: str | None = None

    def __call__(self, msg: ServerMessage) -> None:
        if msg.method != "notify":
            return
        n = decode_notification(msg)
        data = n.data
        if n.topic != "records" or data.get("agent") != self.agent:
            return
        kind = data.get("kind")
        if kind == "message.received" and self.turn_id is None:
            self.turn_id = data.get("turn_id")
            self.opts.note(f"turn {self.turn_id} queued (message at seq {n.seq})")
        elif data.get("turn_id") == self.turn_id and kind in _PROGRESS:
            step = f"step {data['step']} " if "step" in data else ""
            self.opts.note(f"  {step}{_PROGRESS[kind]} (seq {n.seq})")


_PROGRESS = {
    "turn.started": "started",
    "step.started": "running",
    "step.committed": "done",
    "intervention.asked": "asks the operator",
}


@cli.command(epilog=examples("reynctl cancel ada"))
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


@cli.command(
    epilog=examples(
        "reynctl status              # lists ambiguous steps and the command for each",
        "reynctl resolve ada skip",
    )
)
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


@cli.command(epilog=examples("reynctl interventions", "reynctl interventions --agent ada"))
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


@cli.command(
    epilog=examples(
        "reynctl interventions             # the questions, with their IDs",
        'reynctl answer ada t32.s0 "Kyoto"',
        'reynctl answer ada t40.s1 "yes" --buffer   # for a question not asked yet',
    )
)
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("intervention_id", metavar="ID")
@click.argument("text")
@click.option(
    "--buffer",
    is_flag=True,
    help="Keep the answer when AGENT has no open question ID yet (used when it is asked).",
)
@json_option
@pass_opts
def answer(opts: Options, agent: str, intervention_id: str, text: str, buffer: bool) -> None:
    """Answer AGENT's question ID with TEXT; the waiting turn goes on.

    An ID with no open question is refused (a typo would be kept silently);
    with --buffer the answer is kept and used when that question is asked.
    """
    params = a.InterventionsAnswerParams(agent=agent, intervention_id=intervention_id, answer=text)
    with opts.client() as c:
        if not buffer:
            _check_open(opts, c, agent, intervention_id)
        reply = c.call("interventions.answer", params, a.InterventionsAnswerResult)
    opts.emit(reply, lambda: render.answer_text(reply.value, agent, intervention_id, opts.style))


def _check_open(opts: Options, c: Client, agent: str, intervention_id: str) -> None:
    """Exit 1 (nothing recorded) unless AGENT has an open question `intervention_id`."""
    listed = c.call(
        "interventions.list", a.InterventionsListParams(agent=agent), a.InterventionsListResult
    )
    open_ids = [i.intervention_id for i in listed.value.interventions]
    if intervention_id in open_ids:
        return
    have = f"its open questions: {', '.join(open_ids)}" if open_ids else "it has none open"
    fail_here(
        opts,
        "no_open_question",
        f"{agent} has no open question {intervention_id!r} ({have}; `reynctl interventions` "
        "lists them): nothing recorded; pass --buffer to keep the answer for when it is asked",
    )


@cli.command(
    "act-turn-rewind",
    epilog=examples(
        "reynctl generations --agent ada --kind plan_step   # the seqs between act-steps",
        "reynctl act-turn-rewind ada 21                     # asks, then rewinds into the turn",
        "reynctl act-turn-rewind ada 21 --yes               # in a script",
        'reynctl act-turn-rewind ada 21 --send ada "Skip the last step." --yes',
    ),
)
@click.argument("agent", shell_complete=_complete_agent)
@click.argument("seq", type=SEQ, shell_complete=_complete_seq)
@click.option(
    "--yes", "-y", is_flag=True, help="Do not ask for confirmation (required off a terminal)."
)
@send_option
@dry_run_option
@reason_option
@json_option
@pass_opts
def act_turn_rewind(
    opts: Options,
    agent: str,
    seq: int,
    yes: bool,
    reason: str,
    *,
    dry_run: bool,
    send: tuple[str, str] | None,
    wait: bool | None,
    wait_timeout: float,
) -> None:
    """Rewind to SEQ inside one of AGENT's turns, between two act-steps.

    Like `rewind`, every agent moves to SEQ (an active seq), turns in flight
    are cancelled and later seqs become an abandoned branch; then the turn
    resumes: steps up to SEQ are ghost-replayed from their memos (0 executor
    calls), later ones run again. `reynctl checkout` of the previous head
    comes back. Asks first on a terminal; elsewhere pass --yes. --dry-run:
    as for rewind. --send AGENT TEXT delivers a message in the reset record's
    atomic batch, as `rewind --send` does; it waits in the inbox behind the
    resumed turn.
    """
    then = then_of(send, wait, wait_timeout)
    no_follow(dry_run, then, None)
    what = f"act-turn rewind of {agent} to seq {seq}"
    dry = a.ActTurnRewindParams(agent=agent, seq=seq, reason=reason, dry_run=True)
    if dry_run:
        preview_move(opts, what, lambda c: c.call("act_turn.rewind", dry, a.ActTurnRewindResult))
        return
    confirm_move(yes, "act-turn-rewind")
    params = a.ActTurnRewindParams(agent=agent, seq=seq, reason=reason, then=then)
    move(
        opts,
        yes=yes,
        what=what,
        call=lambda c: c.call("act_turn.rewind", params, a.ActTurnRewindResult),
        dry=lambda c: c.call("act_turn.rewind", dry, a.ActTurnRewindResult),
        human=lambda res: (
            render.act_turn_text(res, agent, opts.style) + sent_text(res, then, opts.style)
        ),
        agent=agent,
        at_least=wait_timeout + 10 if then and then.wait else None,
    )

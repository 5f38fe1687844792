"""`reynctl demo`: a guided tour of time travel on a throwaway daemon.

Everything goes through the socket of a real `reynd serve`, as any client
would: an agent with the builtin executor (deterministic, no model) takes
three turns (a plain message, a `/plan`, a `/skill`), which cut turn,
plan-step and phase generations; the tour rewinds to the middle, shows a
stale external writer fenced off, takes a different turn on the new branch,
rewinds inside the plan turn (earlier steps ghost-replayed from their memos,
later ones re-run, the executor's call counter as the proof), switches back
to the abandoned branch, and prints the branch tree, the state and a diff.

Each claim the narration makes is checked against the daemon's answers: a
broken promise ends the demo with an error instead of a happy story.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from reynctl import render
from reynctl.client import Client
from reynctl.embedded import EmbeddedDaemon
from reynctl.errors import ClientError
from reynctl.jsonrpc import decode_notification
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.errors import StaleBranch

if TYPE_CHECKING:
    from reynctl.cli.options import Options

__all__ = ["AGENT", "MESSAGES", "OTHER_MESSAGE", "SCRIBE", "DemoFailed", "run_demo"]

T = TypeVar("T")

AGENT = "ada"
SCRIBE = "scribe"  # an agent driven by an external runtime, through wal.append
MESSAGES = [
    "Plan a weekend in Kyoto.",
    "/plan book the ryokan; walk Fushimi Inari at dawn; tea ceremony in Gion",
    "/skill packing",
]
OTHER_MESSAGE = "Add a day trip to Nara instead."
# Seconds to wait for a turn the daemon runs by itself (after an act-turn rewind).
TURN_WAIT = 30.0


class DemoFailed(ClientError):
    """The daemon did not do what the tour says it does."""

    name = "demo_failed"
    code = -33010


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise DemoFailed(f"demo: {what}")


class Tour:
    """The demo's narrator and its only path to the daemon."""

    def __init__(self, opts: Options, daemon: EmbeddedDaemon, client: Client) -> None:
        self.opts = opts
        self.daemon = daemon
        self.client = client
        self.style = opts.style

    # -- output -------------------------------------------------------------

    def _out(self, text: str) -> None:
        # With --json, stdout carries only results: narration moves to stderr.
        click.echo(text, err=self.opts.json, color=self.style.color)

    def step(self, text: str) -> None:
        self._out("\n" + self.style("▸ " + text, "bold"))

    def detail(self, text: str) -> None:
        self._out(textwrap.indent(text, "  "))

    # -- calls ----------------------------------------------------------------

    def call(
        self, method: str, params: Any, result_type: type[T], client: Client | None = None
    ) -> T:
        reply = (client or self.client).call(method, params, result_type)
        if self.opts.json:
            line = b'{"method":"%s","result":%s}' % (method.encode(), reply.raw)
            click.echo(line.decode())
        return reply.value

    def send(self, text: str) -> a.AgentsSendResult:
        """One message to the agent, waiting for its turn to end."""
        params = a.AgentsSendParams(agent=AGENT, text=text, wait=True, timeout=TURN_WAIT)
        res = self.call("agents.send", params, a.AgentsSendResult)
        expect(
            res.boundary_seq is not None and res.outcome == "completed",
            f"turn {res.turn_id} did not complete within {TURN_WAIT:g}s ({res.outcome})",
        )
        s = self.style
        reply = render.truncate(res.reply or "", 100)
        self.detail(f"{s('you', 'cyan')}  {text}\n{s(AGENT, 'cyan')}  {reply}")
        self.detail(
            s(
                f"turn {res.turn_id}: seqs {res.seq}..{res.boundary_seq}, "
                f"its turn.ended at seq {res.boundary_seq} is a checkpoint",
                "dim",
            )
        )
        return res

    def agent(self) -> a.AgentInfo:
        return self.call("agents.get", a.AgentsGetParams(agent=AGENT), a.AgentInfo)

    def scribe_append(self, based_on: int, text: str) -> int:
        params = m.WalAppendParams(
            agent=SCRIBE,
            kind="message.received",
            based_on=based_on,
            data={"message_id": f"note{based_on}", "text": text, "sender": SCRIBE},
        )
        return self.call("wal.append", params, m.WalAppendResult).seq

    def act_turn_rewind(self, seq: int) -> tuple[a.ActTurnRewindResult, a.AgentInfo]:
        """act_turn.rewind, then wait (subscribed to generations) for the turn to end again."""
        with self.daemon.client(TURN_WAIT) as watcher:
            sub = self.call(
                "subscribe", m.SubscribeParams(topics=["generations"]), m.SubscribeResult, watcher
            )
            res = self.call(
                "act_turn.rewind",
                a.ActTurnRewindParams(agent=AGENT, seq=seq),
                a.ActTurnRewindResult,
            )
            for msg in watcher.notifications(timeout=TURN_WAIT):
                if msg.method != "notify":
                    continue
                n = decode_notification(msg)
                if (
                    n.subscription == sub.subscription
                    and n.seq > res.reset_seq
                    and n.data.get("kind") == "turn"
                    and n.data.get("agent") == AGENT
                ):
                    break
        return res, self.agent()


def run_demo(opts: Options, *, keep: bool, ready_timeout: float) -> None:
    """The whole tour; raises ReyndError/ClientError (exit 1/3) when a step fails."""
    workdir = Path(tempfile.mkdtemp(prefix="reynctl-demo-"))
    ok = False
    try:
        _tour(opts, workdir, ready_timeout)
        ok = True
    finally:
        if keep or not ok:
            why = "kept" if ok else "kept for inspection (see reynd.log)"
            click.echo(f"\nstate directory {why}: {workdir}", err=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _tour(opts: Options, workdir: Path, ready_timeout: float) -> None:
    daemon = EmbeddedDaemon(workdir, ready_timeout=ready_timeout)
    style = opts.style
    header = "reynctl demo: time travel through a real reynd and a real agent, over its socket"
    click.echo(style(header, "bold"), err=opts.json, color=style.color)
    with daemon, daemon.client(opts.timeout) as client:
        tour = Tour(opts, daemon, client)
        tour.step(f"Starting an embedded daemon (reynd serve) in {workdir}")
        st = tour.call("daemon.status", m.StatusParams(), m.StatusResult)
        tour.detail(f"ready: reynd {st.version}, pid {st.pid}, socket {daemon.socket}")

        tour.step(f"Creating agent {AGENT} with the builtin executor")
        info = tour.call(
            "agents.create", a.AgentsCreateParams(name=AGENT, executor="builtin"), a.AgentInfo
        )
        tour.detail(
            f"agent.created at seq {info.created_seq}; the builtin executor is a deterministic "
            "demo (no model):\neach message is a turn of act-steps, each step's result "
            "committed to the WAL as a memo"
        )

        tour.step(f"An external runtime registers its own agent, {SCRIBE}, with wal.append")
        seq = tour.call(
            "wal.append",
            m.WalAppendParams(agent=SCRIBE, kind="agent.created", based_on=info.created_seq),
            m.WalAppendResult,
        ).seq
        tour.detail(
            f"agent.created at seq {seq} (executor external: reynd records its events, "
            "never runs its turns)"
        )

        tour.step("Three messages: a plain one, a plan, a skill")
        sent = [tour.send(text) for text in MESSAGES]
        ends = [res.boundary_seq or 0 for res in sent]

        tour.step("Generations: checkpoints cut at turn ends, plan steps and skill phases")
        gens = tour.call("generations.list", m.GenerationsParams(agent=AGENT), m.GenerationsResult)
        tour.detail(render.generations_table(gens, style))
        kinds = {g.kind for g in gens.generations}
        expect(kinds == {"turn", "plan_step", "phase"}, f"generation kinds {sorted(kinds)}")
        plan_steps = sorted(
            g.seq for g in gens.generations if g.kind == "plan_step" and ends[0] < g.seq < ends[1]
        )
        expect(len(plan_steps) == 3, f"3 plan-step generations in the plan turn, {plan_steps}")

        scribe_saw = tour.call("daemon.status", m.StatusParams(), m.StatusResult).head
        middle = ends[1]
        tour.step(f"Rewind to seq {middle}, the end of the plan turn")
        res = tour.call("rewind", m.RewindParams(seq=middle), m.RewindResult)
        tour.detail(render.rewind_text(res, style))
        tour.detail(
            f"seqs {middle + 1}..{scribe_saw} (the skill turn) are not deleted: they are an "
            "abandoned branch now"
        )

        tour.step(f"{SCRIBE}'s runtime last saw seq {scribe_saw}: its next write is fenced off")
        try:
            tour.scribe_append(scribe_saw, "Booked the ryokan for Saturday.")
        except StaleBranch as exc:
            tour.detail(f"refused: {exc.message} ({exc.name}, {exc.code})")
        else:
            raise DemoFailed("demo: the daemon accepted a write based on an abandoned seq")
        head = tour.call("daemon.status", m.StatusParams(), m.StatusResult).head
        seq = tour.scribe_append(head, "Booked the ryokan for Saturday.")
        tour.detail(f"it re-reads the tip (seq {head}) and writes again: accepted at seq {seq}")

        tour.step("A different message on the new branch")
        other_end = tour.send(OTHER_MESSAGE).boundary_seq or 0

        target = plan_steps[1]
        before = tour.agent().executor_calls
        tour.step(
            f"Act-turn rewind to seq {target}, inside the plan turn (after its step "
            f"“{MESSAGES[1].split(';')[1].strip()}”)"
        )
        act, after = tour.act_turn_rewind(target)
        tour.detail(render.act_turn_text(act, AGENT, style))
        grew = after.executor_calls - before
        tour.detail(
            f"the turn ran to its end again; {AGENT}'s executor calls went {before} → "
            f"{after.executor_calls} (+{grew}): only the {act.rerun} re-run steps called it, "
            f"the {act.ghost_replayed} ghost-replayed ones did not"
        )
        expect(act.ghost_replayed > 0 and act.rerun > 0, "ghost-replayed and re-run steps")
        expect(grew == act.rerun, f"executor calls grew by {grew}, expected {act.rerun}")

        tour.step(f"Checkout seq {ends[2]}: back to the abandoned skill turn")
        res = tour.call("checkout", m.CheckoutParams(seq=ends[2]), m.RewindResult)
        tour.detail(f"{render.rewind_text(res, style)}  [mode {res.mode}]")
        expect(res.mode == "fork_switch", f"checkout mode {res.mode}")

        tour.step("The branch tree")
        tour.detail(
            render.branch_tree(
                tour.call("branches.list", m.BranchesParams(), m.BranchesResult), style
            )
        )

        tour.step(f"The state at the tip: what {AGENT} remembers now")
        state = tour.call("state.get", m.StateParams(agent=AGENT), m.StateResult)
        tour.detail(render.state_text(state, style, 76))

        tour.step(f"Two futures compared: seq {other_end} (abandoned) → seq {ends[2]} (current)")
        diff = tour.call(
            "state.diff",
            m.DiffParams(from_seq=other_end, to_seq=ends[2], agent=AGENT),
            m.DiffResult,
        )
        tour.detail(render.diff_text(diff, style))

        tour.step("Shutting the daemon down")
        tour.call("daemon.shutdown", m.ShutdownParams(), m.OkResult)
    status = daemon.proc.returncode if daemon.proc else 0
    tour.detail(f"stopped (exit status {status})")
    if status != 0:
        raise DemoFailed(f"the embedded daemon exited with status {status}:\n{daemon.log_tail()}")
    click.echo(
        "\nEverything above went through the daemon's socket as JSON-RPC. On your own daemon:\n"
        "  reynd serve &   reynctl agents create ada   reynctl send ada 'hello'\n"
        "  reynctl generations   reynctl rewind SEQ   reynctl branches",
        err=opts.json,
    )

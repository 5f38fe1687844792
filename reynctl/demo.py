"""`reynctl demo`: a guided tour of time travel on a throwaway daemon.

Everything goes through the socket of a real `reynd serve`: the turns are
written with `wal.append` the way an external agent runtime writes them (a
user message, a turn, one act-step with its committed memo, the turn's end,
which cuts a generation), then the demo rewinds, is fenced off, branches,
switches back, and shows the tree and the state.
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
from reynd.protocol import methods as m
from reynd.protocol.errors import StaleBranch

if TYPE_CHECKING:
    from reynctl.cli import Options

__all__ = ["AGENT", "TURNS", "run_demo"]

T = TypeVar("T")

AGENT = "ada"
# Hand-written turns: the demo shows the storage mechanism, not a model.
TURNS = [
    ("Plan a weekend in Kyoto.", "Saturday: Fushimi Inari at dawn, then Gion. Sunday: Arashiyama."),
    ("Add a tea ceremony.", "Added a tea ceremony in Gion on Saturday afternoon."),
    ("Swap Arashiyama for Nara.", "Sunday is now Nara: Todai-ji and the deer park."),
]
OTHER_FUTURE = (
    "Keep Arashiyama, and add the bamboo grove at 7am.",
    "Sunday starts in the Arashiyama bamboo grove at 7am, then the monkey park.",
)


class Tour:
    """The demo's narrator and its only path to the daemon."""

    def __init__(self, opts: Options, client: Client) -> None:
        self.opts = opts
        self.client = client
        self.style = opts.style
        self.tip = 0

    # -- output -------------------------------------------------------------

    def _out(self, text: str) -> None:
        # With --json, stdout carries only results: narration moves to stderr.
        click.echo(text, err=self.opts.json, color=self.style.color)

    def step(self, text: str) -> None:
        self._out("\n" + self.style("▸ " + text, "bold"))

    def detail(self, text: str) -> None:
        self._out(textwrap.indent(text, "  "))

    # -- calls ----------------------------------------------------------------

    def call(self, method: str, params: Any, result_type: type[T]) -> T:
        reply = self.client.call(method, params, result_type)
        if self.opts.json:
            line = b'{"method":"%s","result":%s}' % (method.encode(), reply.raw)
            click.echo(line.decode())
        return reply.value

    def append(self, kind: str, **data: Any) -> int:
        params = m.WalAppendParams(agent=AGENT, kind=kind, data=data, based_on=self.tip)
        self.tip = self.call("wal.append", params, m.WalAppendResult).seq
        return self.tip

    def turn(self, n: int, text: str, reply: str) -> int:
        """One turn as a runtime writes it; returns the seq of its turn.ended."""
        mid, tid = f"m{n}", f"t{n}"
        first = self.append("message.received", message_id=mid, text=text, sender="user")
        self.append("turn.started", turn_id=tid, message_id=mid)
        self.append("step.started", turn_id=tid, step=1, input={"prompt": text})
        self.append(
            "step.committed",
            turn_id=tid,
            step=1,
            output={"text": reply},
            messages=[{"role": "assistant", "content": reply}],
        )
        end = self.append("turn.ended", turn_id=tid, reply=reply, label=f"turn {n}")
        self.detail(f"{self.style('user', 'cyan')}  {text}\n{self.style(AGENT, 'cyan')}   {reply}")
        self.detail(f"seqs {first}..{end}; turn.ended at seq {end} cuts a generation")
        return end


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
    header = "reynctl demo: time travel through a real reynd, over its socket"
    click.echo(style(header, "bold"), err=opts.json, color=style.color)
    with daemon, daemon.client(opts.timeout) as client:
        tour = Tour(opts, client)
        tour.step(f"Starting an embedded daemon (reynd serve) in {workdir}")
        st = tour.call("daemon.status", m.StatusParams(), m.StatusResult)
        tour.detail(
            f"ready: reynd {st.version}, pid {st.pid}, protocol {st.protocol}\n"
            f"socket {daemon.socket}"
        )
        tour.tip = st.head

        tour.step(f"Creating agent {AGENT}")
        seq = tour.append("agent.created", session="demo", executor="external")
        tour.detail(f"agent.created at seq {seq}")

        ends = []
        for n, (text, reply) in enumerate(TURNS, start=1):
            tour.step(f"Turn {n}")
            ends.append(tour.turn(n, text, reply))

        tour.step("Generations (checkpoints) on the active branch, newest first")
        gens = tour.call("generations.list", m.GenerationsParams(), m.GenerationsResult)
        tour.detail(render.generations_table(gens, style))

        middle, old_tip = ends[1], tour.tip
        tour.step(f"Rewind to seq {middle}, the end of turn 2")
        res = tour.call("rewind", m.RewindParams(seq=middle), m.RewindResult)
        tour.detail(render.rewind_text(res, style))
        tour.detail(
            f"seqs {middle + 1}..{old_tip} (turn 3) are not deleted: "
            f"they are an abandoned branch now"
        )
        tour.tip = res.reset_seq

        tour.step(f"A writer that still thinks the tip is seq {old_tip} is fenced off")
        stale = m.WalAppendParams(
            agent=AGENT,
            kind="message.received",
            based_on=old_tip,
            data={"message_id": "late", "text": "A message from the old branch."},
        )
        try:
            tour.call("wal.append", stale, m.WalAppendResult)
        except StaleBranch as exc:
            tour.detail(f"refused: {exc.message} ({exc.name}, {exc.code})")
        else:
            raise ClientError(
                "the daemon accepted an append based on an abandoned seq: fencing is broken"
            )

        tour.step("Turn 3 again, differently, on the new branch")
        new_end = tour.turn(len(TURNS) + 1, *OTHER_FUTURE)

        tour.step(f"Checkout seq {ends[2]} to bring the abandoned turn 3 back")
        res = tour.call("checkout", m.CheckoutParams(seq=ends[2]), m.RewindResult)
        tour.detail(f"{render.rewind_text(res, style)}  [mode {res.mode}]")
        tour.tip = res.reset_seq

        tour.step("The branch tree")
        tour.detail(
            render.branch_tree(
                tour.call("branches.list", m.BranchesParams(), m.BranchesResult), style
            )
        )

        tour.step(f"The state at the tip: what {AGENT} remembers now")
        state = tour.call("state.get", m.StateParams(), m.StateResult)
        tour.detail(render.state_text(state, style))

        tour.step(f"The two futures compared: seq {new_end} (abandoned) → seq {ends[2]}")
        diff = tour.call("state.diff", m.DiffParams(from_seq=new_end, to_seq=ends[2]), m.DiffResult)
        tour.detail(render.diff_text(diff, style))

        tour.step("Shutting the daemon down")
        tour.call("daemon.shutdown", m.ShutdownParams(), m.OkResult)
    status = daemon.proc.returncode if daemon.proc else 0
    tour.detail(f"stopped (exit status {status})")
    if status != 0:
        raise ClientError(f"the embedded daemon exited with status {status}:\n{daemon.log_tail()}")
    click.echo(
        "\nEverything above went through the daemon's socket as JSON-RPC. On your own daemon:\n"
        "  reynd serve &   reynctl generations   reynctl rewind SEQ   reynctl branches",
        err=opts.json,
    )

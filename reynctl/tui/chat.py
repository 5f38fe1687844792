"""The chat pane: the agent talked to, what its turns do, and a line to message it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Log, Static

from reynctl import render
from reynctl.aio import AsyncClient
from reynctl.errors import ClientError
from reynctl.tui.base import tui_of
from reynctl.tui.timeline import _message_text, _step_summary
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError
from reynd.protocol.events import Message
from reynd.protocol.state import AgentState

__all__ = ["ChatPane", "narrate", "rewind_lines", "transcript"]

LINE_MAX = 2000  # a chat line is one line: longer texts are cut, newlines shown as ⏎


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _message_line(agent: str, msg: Message) -> str:
    if msg.role == "tool":
        return render.truncate(f"  {_message_text(msg)}", LINE_MAX)
    who = {"user": "you", "assistant": agent}.get(msg.role, msg.role)
    return render.truncate(f"{who}: {_message_text(msg)}", LINE_MAX)


def _in_flight(state: AgentState, note: str = "") -> list[str]:
    lines: list[str] = []
    for chain in state.pending_chains:
        lines.append(f"turn {chain.turn_id} in flight (from seq {chain.started_seq})")
        for memo in chain.steps:
            lines.append(f"[{memo.seq}] step {memo.step}: {_step_summary(memo, 80)}{note}")
    return lines


def transcript(agent: str, state: AgentState | None, seq: int, abandoned: int) -> list[str]:
    """What the chat shows when an agent is picked: its history as of `seq` (the head).

    Only the active lineage is in it; `abandoned` counts the agent's turns left
    on abandoned branches, which the picker shows.
    """
    if state is None:
        return [f"── {agent} does not exist as of seq {seq} ──"]
    lines = [
        f"── {agent} as of seq {seq}: {_plural(len(state.history), 'message')}, "
        f"{_plural(state.turns_completed, 'turn')} ──"
    ]
    lines += [_message_line(agent, msg) for msg in state.history]
    lines += _in_flight(state)
    if abandoned:
        lines.append(
            f"({_plural(abandoned, 'more turn')} of {agent} on abandoned branches: "
            "Esc Esc to see them)"
        )
    return lines


def rewind_lines(agent: str, data: Mapping[str, object], state: AgentState | None) -> list[str]:
    """The separator a rewind writes: above it is abandoned, below it continues.

    `data` is the `rewinds` notification (a RewindResult); `state` the agent as
    of the reset record, that is as of the target.
    """
    target, reset = data.get("target"), data.get("reset_seq")
    if data.get("only") == "workspace":  # the conversation is where it was (issue 25)
        return [
            f"━━━━ the workspace's files restored as of seq {data.get('files_as_of')} "
            f"(reset record {reset}); the conversation goes on ━━━━"
        ]
    if data.get("mode") == "fork_switch":
        what, left = "fork switch to", "the branch it was on, now abandoned"
    else:
        what, left = "rewound to", f"what came after seq {target}, now abandoned"
    lines = [
        f"━━━━ {what} seq {target} (reset record {reset}, branch {data.get('branch')}) ━━━━",
        f"above: {left} (kept on its branch: Esc Esc); "
        f"below: {agent} as of seq {target}, then what it does next",
    ]
    if state is None:
        lines.append(f"{agent} does not exist as of seq {target}")
        return lines
    lines.append(
        f"{agent}: {_plural(len(state.history), 'message')}, "
        f"{_plural(state.turns_completed, 'turn')} as of seq {target}"
    )
    return lines + _in_flight(state, note="  (replayed from its memo)")


class ChatPane(Vertical):
    """The agent's status line, the chat log and the message input."""

    def compose(self) -> ComposeResult:
        yield Static("", id="agent-status")
        yield Log(id="chat-log", highlight=False)
        yield Input(placeholder="message the agent (Enter sends)", id="chat-input")

    def write(self, line: str) -> None:
        self.query_one("#chat-log", Log).write_line(line)

    def replace(self, lines: Iterable[str]) -> None:
        """Clear the log and show `lines` (an agent's transcript)."""
        log = self.query_one("#chat-log", Log)
        log.clear()
        log.write_lines(lines)

    def show_agent(self, agents: Mapping[str, a.AgentInfo], agent: str | None) -> None:
        """The agent talked to: its status, turn, step, and what it waits for."""
        widget = self.query_one("#agent-status", Static)
        text = Text()
        if not agents and agent is None:
            text.append("no agents yet: create one with `reynctl agents create NAME`", style="dim")
            widget.update(text)
            return
        info = agents.get(agent or "")
        text.append(f"agent {agent}", style="bold")
        if info is None:
            text.append("  (unknown to the daemon)", style="red")
        else:
            colors = {"idle": "green", "running": "yellow", "waiting": "cyan"}
            color = colors.get(info.status, "red")
            text.append(f"  {info.status}", style=f"bold {color}")
            if info.turn_id:
                text.append(f"  turn {info.turn_id}")
            if info.step is not None and info.status == "running":
                text.append(f", step {info.step}")
            text.append(f"  · {_plural(info.turns_completed, 'turn')}", style="dim")
            if info.waiting_for:
                text.append(f"  waiting for: {info.waiting_for}", style="cyan")
            if info.last_error:
                text.append(f"  error: {info.last_error}", style="red")
        if len(agents) > 1:
            text.append("   (ctrl+n: next agent)", style="dim")
        widget.update(text)

    async def send(self, text: str) -> None:
        """Send `text` to the agent talked to (`agents.send`, not waiting for the turn)."""
        tui = tui_of(self)
        client = tui.client
        if client is None:
            self.write("not connected: message not sent")
            return
        if tui.agent is None:
            self.write("no agent to talk to: create one with `reynctl agents create NAME`")
            return
        try:
            res = await client.send(agent=tui.agent, text=text)
        except (ReyndError, ClientError) as exc:
            self.write(f"not sent: {exc.message}")
            return
        self.write(f"you → {tui.agent}: {text}  (seq {res.seq}, turn {res.turn_id})")

    async def cancel_turn(self) -> None:
        """Hard-cancel the agent's turn in flight (`agents.cancel`)."""
        tui = tui_of(self)
        client = tui.client
        if client is None or tui.agent is None:
            self.write("nothing to cancel")
            return
        try:
            res = await client.cancel(agent=tui.agent)
        except (ReyndError, ClientError) as exc:
            self.write(f"cancel failed: {exc.message}")
            return
        if not res.cancelled:
            self.write(f"{tui.agent} has no turn in flight: nothing cancelled")
        for c in res.cancelled:
            self.write(f"cancelled turn {c.get('turn_id', '?')} of {c.get('agent', tui.agent)}")


async def _state(client: AsyncClient, seq: int, agent: str) -> m.StateResult:
    return await client.state(seq=seq, agent=agent)


async def narrate(client: AsyncClient, n: m.Notification, say: Callable[[str], None]) -> None:
    """Tell the chat what a record of the agent talked to did (a turn, a step, a question)."""
    kind = str(n.data.get("kind", ""))
    agent = str(n.data.get("agent", ""))
    if kind == "turn.started":
        say(f"[{n.seq}] turn started")
    elif kind == "step.committed":
        st = await _state(client, n.seq, agent)
        state = st.agents.get(agent)
        chain = state.pending_chains[0] if state and state.pending_chains else None
        if chain and chain.steps:
            memo = chain.steps[-1]
            say(f"[{n.seq}] step {memo.step}: {_step_summary(memo, 80)}")
    elif kind == "turn.ended":
        st = await _state(client, n.seq, agent)
        state = st.agents.get(agent)
        reply = (
            next(
                (h.content for h in reversed(state.history) if h.role == "assistant" and h.content),
                "",
            )
            if state
            else ""
        )
        say(f"[{n.seq}] turn ended")
        if reply:
            say(f"{agent}: {reply}")
    elif kind == "intervention.asked":
        say(f"[{n.seq}] the agent asks a question (reynctl interventions)")

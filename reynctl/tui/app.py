"""`reynctl tui`: a live timeline, the rewind picker (Esc Esc) and a chat pane.

A frontend only: every action is one daemon method that also has a scriptable
command (`reynctl checkout`, `act-turn-rewind`, `send`, `cancel`). One
connection carries the calls and a subscription to every topic; the screen is
rebuilt from `branches.list` + `generations.list` whenever a generation or a
rewind is notified, and resynchronised on a seq gap or a `lagged` notice. When
the daemon is absent or goes away, the screen says so and reconnects with
backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import msgspec
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Log, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import WorkType

from reynctl import render
from reynctl.aio import AsyncClient, open_client
from reynctl.errors import ClientError, DaemonUnreachable, NoDaemon, StaleSocket
from reynctl.jsonrpc import decode_notification
from reynctl.tui.graph import Node, Row, build_nodes, layout
from reynctl.watch import Gap, check_order
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError
from reynd.protocol.events import Message
from reynd.protocol.state import StepMemo

__all__ = ["ConfirmScreen", "PickerScreen", "ReyndTui", "Target"]

START_HINT = "start it with `reynd serve` (or `systemctl --user start reynd`)"
ESC_ESC_WINDOW = 0.8  # seconds between the two Escapes that open the picker
MAX_GENERATIONS = 2000  # newest first; older ones are left out of the timeline
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 5.0
PLAIN = render.Style(False)

IN_TURN = ("turn.started", "step.started", "step.committed")

ConnState = Literal["connecting", "connected", "no_daemon", "lost"]


@dataclass(frozen=True, slots=True)
class StepRow:
    """A committed act-step inside a turn, a target for `act_turn.rewind`."""

    agent: str
    step: int
    seq: int
    summary: str
    active: bool


@dataclass(frozen=True, slots=True)
class Target:
    """What a confirmed pick does: always named by seq, never by a list position."""

    seq: int
    action: Literal["checkout", "act_turn"]
    active: bool
    agent: str = ""
    step: int = 0
    branch: int = 0

    @property
    def mode(self) -> str:
        if self.action == "act_turn":
            return "act-turn rewind"
        return "undo" if self.active else "fork switch"

    @property
    def command(self) -> str:
        if self.action == "act_turn":
            return f"reynctl act-turn-rewind {self.agent} {self.seq}"
        return f"reynctl checkout {self.seq}"


def spawn(node: DOMNode, job: Callable[[], Coroutine[Any, Any, None]], **kw: Any) -> None:
    """Run `job` as a textual worker; its coroutine is made only when the worker starts."""
    node.run_worker(cast("WorkType[None]", job), **kw)


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts > 0 else ""


def _step_summary(memo: StepMemo, width: int = 60) -> str:
    parts: list[str] = []
    for msg in memo.messages:
        parts.append(_message_text(msg))
    return render.truncate(" | ".join(p for p in parts if p) or "(no messages)", width)


def _message_text(msg: Message) -> str:
    if msg.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in msg.tool_calls)
        return f"{msg.content} → {calls}" if msg.content else f"→ {calls}"
    if msg.role == "tool":
        return f"tool: {msg.content}"
    return msg.content


def _kind_text(node: Node) -> str:
    if node.kind == "reset":
        return f"reset → {node.target}"
    if node.kind == "plan_step":
        return "plan step"
    return node.kind


def node_prompt(node: Node, graph: str, width: int) -> Text:
    """One timeline line: graph, seq, kind, agent, label, time, marks."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(graph.ljust(width), style="bold magenta" if node.active else "magenta")
    text.append(f" {node.seq:>5} ", style="cyan")
    body = f"{_kind_text(node):<11} {render.truncate(node.agent, 8):<8} "
    label = node.label
    if node.kind == "genesis":
        label = "the empty state"
    elif node.kind == "tip":
        label = "the tip (no checkpoint here yet)"
    text.append(body, style="" if node.active else "dim")
    text.append(render.truncate(label, 24).ljust(24), style="" if node.active else "dim")
    text.append(f" {_clock(node.created_at):>8}", style="dim")
    if node.here:
        text.append("  ◀ you are here", style="bold green")
    elif not node.active:
        text.append("  abandoned", style="dim yellow")  # its lane shows the branch
    return text


def step_prompt(step: StepRow, graph: str, width: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(graph.ljust(width), style="magenta")
    text.append(f" {step.seq:>5} ", style="cyan")
    text.append(f"  step {step.step:<5} ", style="italic")
    text.append(step.summary, style="" if step.active else "dim")
    return text


def timeline_options(
    rows: Iterable[Row], steps: dict[int, list[StepRow] | str] | None = None
) -> list[Option]:
    """Options for an OptionList: `n<seq>` nodes, `s<seq>` steps, disabled link lines."""
    rows = list(rows)
    width = max((len(r.graph) for r in rows), default=1)
    out: list[Option] = []
    for i, row in enumerate(rows):
        if row.node is None:
            out.append(Option(Text(row.graph, style="magenta"), id=f"l{i}", disabled=True))
            continue
        node = row.node
        out.append(Option(node_prompt(node, row.graph, width), id=f"n{node.seq}"))
        expanded = (steps or {}).get(node.seq)
        if isinstance(expanded, str):
            hint = Text(row.below.ljust(width), style="magenta")
            hint.append(f"        {expanded}", style="dim italic")
            out.append(Option(hint, id=f"h{node.seq}", disabled=True))
        elif expanded:
            cells = row.below.ljust(width)
            col = row.graph.find(next(c for c in row.graph if c in "◉●○"))
            graph = cells[:col] + "┊" + cells[col + 1 :]
            for step in reversed(expanded):
                out.append(Option(step_prompt(step, graph, width), id=f"s{step.seq}"))
    return out


# -- screens --------------------------------------------------------------------


class ConfirmScreen(ModalScreen[bool]):
    """Asks before a checkout or act-turn rewind; the target is a fixed seq."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "confirm"),
        Binding("n,escape", "answer(False)", "cancel"),
    ]

    def __init__(self, target: Target, head: int) -> None:
        super().__init__()
        self.target = target
        self.head = head

    def compose(self) -> ComposeResult:
        t = self.target
        if t.action == "act_turn":
            what = (
                f"act-turn rewind of {t.agent}'s turn to seq {t.seq} (after step {t.step}): "
                f"steps 0..{t.step} replay from their memos with no executor call, "
                "later steps run again."
            )
        elif t.active:
            what = (
                f"undo: the tip moves back from seq {self.head} to seq {t.seq}. The seqs after "
                f"{t.seq} become an abandoned branch, still reachable with checkout."
            )
        else:
            what = (
                f"fork switch: seq {t.seq} lies on abandoned branch {t.branch}; it becomes live "
                f"again and the current branch (tip {self.head}) is kept as an abandoned one."
            )
        body = Text()
        body.append(f"{t.mode}: seq {t.seq}\n\n", style="bold")
        body.append(what + "\n\n")
        body.append(
            "Every agent moves to its state as of that seq; turns in flight are cancelled.\n"
        )
        body.append(f"Same as `{t.command}`.\n\n", style="dim")
        body.append("Enter / y: confirm     Esc / n: cancel", style="bold")
        with Vertical(id="confirm-box"):
            yield Static(body, id="confirm-text")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PickerScreen(Screen[None]):
    """The rewind picker: every branch, a preview of the as-of state and its diff to the tip."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("right,space", "expand", "steps"),
        Binding("left", "collapse", "hide steps"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.steps: dict[int, list[StepRow] | str] = {}
        self.step_index: dict[int, StepRow] = {}

    @property
    def tui(self) -> ReyndTui:
        app = self.app
        assert isinstance(app, ReyndTui)
        return app

    def compose(self) -> ComposeResult:
        yield Static(
            Text(
                "Rewind: ↑↓ move · → / space: act-steps of a turn · Enter: checkout · Esc: cancel",
                style="bold",
            ),
            id="picker-title",
        )
        with Horizontal():
            yield OptionList(id="picker-list")
            with VerticalScroll(id="preview-pane"):
                yield Static(Text("select a seq to preview it", style="dim"), id="preview")
        yield Static("", id="picker-message")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_list()
        self.query_one("#picker-list", OptionList).focus()

    def refresh_list(self) -> None:
        """Rebuild from the app's rows, keeping the highlighted seq (not its position)."""
        ol = self.query_one("#picker-list", OptionList)
        keep = ol.highlighted_option.id if ol.highlighted_option is not None else None
        ol.set_options(timeline_options(self.tui.rows, self.steps))
        index = _index_of(ol, keep) if keep else None
        if index is None:
            index = _first_enabled(ol)
        if index is not None:
            ol.highlighted = index

    def selected(self) -> Node | StepRow | None:
        ol = self.query_one("#picker-list", OptionList)
        opt = ol.highlighted_option
        return self._resolve(opt.id if opt is not None else None)

    def _resolve(self, option_id: str | None) -> Node | StepRow | None:
        if not option_id:
            return None
        seq = int(option_id[1:])
        if option_id[0] == "n":
            return self.tui.node_at(seq)
        if option_id[0] == "s":
            return self.step_index.get(seq)
        return None

    @on(OptionList.OptionHighlighted, "#picker-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        item = self._resolve(event.option_id)
        if item is not None:
            spawn(self, partial(self._preview, item.seq), group="preview", exclusive=True)

    async def _preview(self, seq: int) -> None:
        pane = self.query_one("#preview", Static)
        width = self.query_one("#preview-pane").size.width
        text = await self.tui.preview_text(seq, width=max(30, width - 16))
        if text is not None:
            pane.update(text)

    @on(OptionList.OptionSelected, "#picker-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        item = self._resolve(event.option_id)
        if isinstance(item, Node):
            target = Target(seq=item.seq, action="checkout", active=item.active, branch=item.branch)
        elif isinstance(item, StepRow):
            target = Target(
                seq=item.seq,
                action="act_turn",
                active=item.active,
                agent=item.agent,
                step=item.step,
            )
        else:
            return
        self.message("")

        def done(yes: bool | None) -> None:
            if yes:
                spawn(self, partial(self._perform, target), group="action", exclusive=True)
            else:
                self.message(Text("cancelled: nothing changed", style="dim"))

        self.app.push_screen(ConfirmScreen(target, self.tui.head), done)

    async def _perform(self, target: Target) -> None:
        self.message(Text(f"{target.mode}: seq {target.seq}…", style="dim"))
        ok = await self.tui.perform(target)
        if ok:
            self.dismiss()
        else:
            self.message(self.tui.last_error)

    def message(self, text: Text | str) -> None:
        self.query_one("#picker-message", Static).update(text)

    def action_cancel(self) -> None:
        self.dismiss()

    def action_expand(self) -> None:
        item = self.selected()
        if isinstance(item, Node) and item.kind in ("turn", "plan_step", "phase"):
            spawn(self, partial(self._expand, item), group="expand")

    def action_collapse(self) -> None:
        item = self.selected()
        seq = item.seq if isinstance(item, Node) else None
        if isinstance(item, StepRow):
            seq = next(
                (k for k, v in self.steps.items() if isinstance(v, list) and item in v), None
            )
        if seq is not None and self.steps.pop(seq, None) is not None:
            self.refresh_list()
            ol = self.query_one("#picker-list", OptionList)
            index = _index_of(ol, f"n{seq}")
            if index is not None:
                ol.highlighted = index

    async def _expand(self, node: Node) -> None:
        steps = await self.tui.steps_of(node)
        self.steps[node.seq] = steps
        if isinstance(steps, list):
            for s in steps:
                self.step_index[s.seq] = s
        self.refresh_list()


def _index_of(ol: OptionList, option_id: str) -> int | None:
    try:
        return ol.get_option_index(option_id)
    except Exception:  # OptionDoesNotExist
        return None


def _first_enabled(ol: OptionList) -> int | None:
    for i in range(ol.option_count):
        if not ol.get_option_at_index(i).disabled:
            return i
    return None


class MainScreen(Screen[None]):
    """The timeline beside the chat pane; Esc Esc opens the picker."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "escape", "Esc Esc: rewind", priority=True),
        Binding("ctrl+x", "cancel_turn", "cancel turn", priority=True),
        Binding("ctrl+n", "next_agent", "next agent", priority=True),
        Binding("ctrl+q", "app.quit", "quit", priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._last_escape = 0.0

    @property
    def tui(self) -> ReyndTui:
        app = self.app
        assert isinstance(app, ReyndTui)
        return app

    def compose(self) -> ComposeResult:
        yield Static("", id="conn")
        with Horizontal():
            with Vertical(id="timeline-pane"):
                yield Static(Text("timeline (all branches, newest first)", style="bold"))
                yield OptionList(id="timeline")
            with Vertical(id="chat-pane"):
                yield Static("", id="agent-status")
                yield Log(id="chat-log", highlight=False)
                yield Input(placeholder="message the agent (Enter sends)", id="chat-input")
        yield Static("", id="banner")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#chat-input", Input).focus()

    def action_escape(self) -> None:
        now = time.monotonic()
        if now - self._last_escape <= ESC_ESC_WINDOW:
            self._last_escape = 0.0
            self.tui.open_picker()
        else:
            self._last_escape = now
            self.tui.set_banner(Text("press Esc again to open the rewind picker", style="dim"))

    def action_cancel_turn(self) -> None:
        spawn(self, self.tui.cancel_turn, group="chat")

    def action_next_agent(self) -> None:
        self.tui.next_agent()

    @on(Input.Submitted, "#chat-input")
    def _send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.clear()
        if text:
            spawn(self, partial(self.tui.send, text), group="chat")


# -- the app ----------------------------------------------------------------------


class ReyndTui(App[None]):
    """Attach to the daemon at `socket`; `agent` preselects the chat pane's agent."""

    TITLE = "reynctl tui"
    CSS = """
    #conn { height: auto; padding: 0 1; background: $boost; }
    #conn.bad { background: $error 30%; }
    #timeline-pane { width: 3fr; }
    #chat-pane { width: 2fr; border-left: solid $primary; }
    #timeline, #picker-list { height: 1fr; border: none; }
    #agent-status { height: auto; padding: 0 1; }
    #chat-log { height: 1fr; }
    #banner { height: auto; padding: 0 1; }
    #picker-title { padding: 0 1; background: $boost; }
    #picker-list { width: 3fr; }
    #preview-pane { width: 2fr; border-left: solid $primary; padding: 0 1; }
    #picker-message { height: auto; padding: 0 1; }
    ConfirmScreen { align: center middle; }
    #confirm-box { width: 80; height: auto; border: thick $warning; padding: 1 2;
                   background: $surface; }
    """

    def __init__(
        self,
        socket: Path,
        *,
        agent: str | None = None,
        timeout: float | None = 30.0,
    ) -> None:
        super().__init__()
        self.socket = socket
        self.timeout = timeout
        self.client: AsyncClient | None = None
        self.conn_state: ConnState = "connecting"
        self.conn_text = ""
        self.head = 0
        self.branch = 0
        self.last = 0  # the last records seq accounted for (gap detection)
        self.loaded_at = -1  # the head as of the last timeline load
        self.generations: list[m.Generation] = []
        self.branches: list[m.BranchInfo] = []
        self.nodes: list[Node] = []
        self.by_seq: dict[int, Node] = {}
        self.rows: list[Row] = []
        self.agents: dict[str, a.AgentInfo] = {}
        self.agent = agent
        self.last_error: Text = Text("")
        self.resyncs = 0  # how many times the state was read again (gap / lagged / reconnect)
        self._own_resets: set[int] = set()

    # -- lifecycle ---------------------------------------------------------

    def get_default_screen(self) -> Screen[None]:
        return MainScreen()

    def on_mount(self) -> None:
        self.show_conn()
        spawn(self, self._connection_loop, group="link", name="link")

    def node_at(self, seq: int) -> Node | None:
        return self.by_seq.get(seq)

    # -- connection ------------------------------------------------------------

    async def _connection_loop(self) -> None:
        delay = BACKOFF_FIRST
        attempt = 0
        ever = False
        while True:
            attempt += 1
            try:
                client = await open_client(self.socket, timeout=self.timeout)
            except (NoDaemon, StaleSocket) as exc:
                self.set_conn("lost" if ever else "no_daemon", self._absent(exc, delay, attempt))
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            except ClientError as exc:
                self.set_conn(
                    "lost" if ever else "no_daemon",
                    f"{exc.message}; retrying in {delay:.1f}s (attempt {attempt})",
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            self.client = client
            try:
                await self._attached(client, reconnected=ever)
                ever = True
                delay, attempt = BACKOFF_FIRST, 0
                await self._follow(client)
            except (ClientError, ReyndError) as exc:
                # ShuttingDown, a dropped connection, a lagged subscriber hung up on: reconnect.
                ever = True
                self.set_conn(
                    "lost",
                    f"connection to reynd lost ({exc.message}); reconnecting in {delay:.1f}s",
                )
            finally:
                self.client = None
                await client.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    def _absent(self, exc: DaemonUnreachable, delay: float, attempt: int) -> str:
        what = "the stale socket" if isinstance(exc, StaleSocket) else "no socket"
        if self.conn_state == "lost":
            return (
                f"connection to reynd lost: the daemon at {self.socket} is gone ({what}); "
                f"reconnecting with backoff, next try in {delay:.1f}s (attempt {attempt}); "
                f"{START_HINT}"
            )
        return (
            f"reynd is not running: {what} at {self.socket}. {START_HINT[0].upper()}"
            f"{START_HINT[1:]}. Retrying in {delay:.1f}s (attempt {attempt})."
        )

    async def _attached(self, client: AsyncClient, *, reconnected: bool) -> None:
        await client.call("subscribe", m.SubscribeParams(), m.SubscribeResult)
        await self.resync(client)
        word = "reconnected to" if reconnected else "connected to"
        self.set_conn("connected", f"{word} reynd at {self.socket}")

    async def _follow(self, client: AsyncClient) -> None:
        async for msg in client.notifications():
            if msg.method == "lagged":
                # The daemon dropped the subscription: subscribe again, then read it all again.
                await client.call("subscribe", m.SubscribeParams(), m.SubscribeResult)
                await self.resync(client)
                continue
            if msg.method != "notify":
                continue
            n = decode_notification(msg)
            try:
                new = check_order(self.last, n)
            except Gap:
                await self.resync(client)
                continue
            if new:
                await self._handle_notification(client, n)

    async def resync(self, client: AsyncClient) -> None:
        """Read everything again: status, the timeline and the agents."""
        self.resyncs += 1
        status = await client.call("daemon.status", m.StatusParams(), m.StatusResult)
        self.last = status.head
        await self._load_timeline(client)
        agents = await client.call("agents.list", a.AgentsListParams(), a.AgentsListResult)
        self.agents = {info.name: info for info in agents.agents}
        if self.agent is None and self.agents:
            self.agent = sorted(self.agents)[0]
        self.show_agent()

    async def _load_timeline(self, client: AsyncClient) -> None:
        branches = await client.call("branches.list", m.BranchesParams(), m.BranchesResult)
        gens: list[m.Generation] = []
        cursor: int | None = None
        while len(gens) < MAX_GENERATIONS:
            params = m.GenerationsParams(all_branches=True, limit=1000, cursor=cursor)
            page = await client.call("generations.list", params, m.GenerationsResult)
            gens += page.generations
            cursor = page.next_cursor
            if cursor is None:
                break
        self.branches = list(branches.branches)
        self.generations = gens
        self.head = branches.head
        self.branch = next((b.id for b in branches.branches if b.active), 0)
        self.loaded_at = branches.head
        self.rebuild()

    def rebuild(self) -> None:
        """Recompute the graph from what was loaded and redraw every view of it."""
        self.nodes = build_nodes(self.generations, self.branches, self.head)
        self.by_seq = {n.seq: n for n in self.nodes}
        self.rows = layout(self.nodes)
        self._draw_timeline()
        if isinstance(self.screen, PickerScreen):
            self.screen.refresh_list()
        self.show_conn()

    def _draw_timeline(self) -> None:
        try:
            ol = self._main().query_one("#timeline", OptionList)
        except (LookupError, NoMatches):
            return
        keep = ol.highlighted
        ol.set_options(timeline_options(self.rows))
        if keep is not None and keep < ol.option_count:
            ol.highlighted = keep

    def _main(self) -> MainScreen:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("no main screen")

    async def _handle_notification(self, client: AsyncClient, n: m.Notification) -> None:
        d = n.data
        if n.topic == "records":
            self.last = n.seq
            if n.seq > self.head:
                self.head = n.seq
                if n.seq > self.loaded_at and self.by_seq.get(self.head) is None:
                    self.rebuild()  # the tip moved inside a turn: redraw the "you are here"
            if d.get("agent") and d.get("agent") == self.agent:
                name = str(d["agent"])
                await self._chat_record(client, n)
                await self._refresh_agent(client, name)
                info = self.agents.get(name)
                if d.get("kind") in IN_TURN and info is not None and info.status == "idle":
                    # The runner updates its status around its appends: the record wins.
                    self.agents[name] = msgspec.structs.replace(info, status="running")
                    self.show_agent()
        elif n.topic in ("generations", "rewinds"):
            if n.seq > self.loaded_at:
                await self._load_timeline(client)
            if n.topic == "rewinds":
                self._rewound_elsewhere(n)
        elif n.topic == "agents":
            name = str(d.get("agent", ""))
            if name:
                await self._refresh_agent(client, name)
                if self.agent is None:
                    self.agent = name
                self.show_agent()

    async def _refresh_agent(self, client: AsyncClient, name: str) -> None:
        try:
            info = await client.call("agents.get", a.AgentsGetParams(agent=name), a.AgentInfo)
        except ReyndError:
            self.agents.pop(name, None)
        else:
            self.agents[name] = info
        self.show_agent()

    def _rewound_elsewhere(self, n: m.Notification) -> None:
        d = n.data
        reset = d.get("reset_seq", n.seq)
        if reset in self._own_resets:
            return
        what = (
            "switched to the abandoned branch at seq"
            if d.get("mode") == "fork_switch"
            else ("rewound to seq")
        )
        cancelled = d.get("cancelled") or []
        more = f", cancelled {len(cancelled)} turn(s)" if cancelled else ""
        self.set_banner(
            Text(
                f"another client {what} {d.get('target')}: reset record {reset}, "
                f"now on branch {d.get('branch')}{more}",
                style="bold yellow",
            )
        )

    # -- views -------------------------------------------------------------------

    def set_conn(self, state: ConnState, text: str) -> None:
        self.conn_state = state
        self.conn_text = text
        self.show_conn()

    def show_conn(self) -> None:
        try:
            widget = self._main().query_one("#conn", Static)
        except (LookupError, NoMatches):
            return
        text = Text()
        if self.conn_state == "connected":
            text.append("● ", style="bold green")
            text.append(self.conn_text)
            text.append(f"   head {self.head} on branch {self.branch}", style="bold")
            widget.remove_class("bad")
        elif self.conn_state == "connecting":
            text.append(f"connecting to reynd at {self.socket}…", style="dim")
        else:
            text.append("● ", style="bold red")
            text.append(self.conn_text, style="bold")
            widget.add_class("bad")
        widget.update(text)

    def set_banner(self, text: Text) -> None:
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one("#banner", Static).update(text)

    def show_agent(self) -> None:
        try:
            widget = self._main().query_one("#agent-status", Static)
        except (LookupError, NoMatches):
            return
        text = Text()
        if not self.agents and self.agent is None:
            text.append("no agents yet: create one with `reynctl agents create NAME`", style="dim")
            widget.update(text)
            return
        info = self.agents.get(self.agent or "")
        text.append(f"agent {self.agent}", style="bold")
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
            text.append(f"  · {info.turns_completed} turns", style="dim")
            if info.waiting_for:
                text.append(f"  waiting for: {info.waiting_for}", style="cyan")
            if info.last_error:
                text.append(f"  error: {info.last_error}", style="red")
        if len(self.agents) > 1:
            text.append("   (ctrl+n: next agent)", style="dim")
        widget.update(text)

    def chat(self, line: str) -> None:
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one("#chat-log", Log).write_line(line)

    def next_agent(self) -> None:
        names = sorted(self.agents)
        if not names:
            return
        i = names.index(self.agent) + 1 if self.agent in names else 0
        self.agent = names[i % len(names)]
        self.chat(f"— now talking to {self.agent}")
        self.show_agent()

    @staticmethod
    async def _state(client: AsyncClient, seq: int, agent: str) -> m.StateResult:
        return await client.call("state.get", m.StateParams(seq=seq, agent=agent), m.StateResult)

    async def _chat_record(self, client: AsyncClient, n: m.Notification) -> None:
        kind = str(n.data.get("kind", ""))
        agent = str(n.data.get("agent", ""))
        if kind == "turn.started":
            self.chat(f"[{n.seq}] turn started")
        elif kind == "step.committed":
            st = await self._state(client, n.seq, agent)
            state = st.agents.get(agent)
            chain = state.pending_chains[0] if state and state.pending_chains else None
            if chain and chain.steps:
                memo = chain.steps[-1]
                self.chat(f"[{n.seq}] step {memo.step}: {_step_summary(memo, 80)}")
        elif kind == "turn.ended":
            st = await self._state(client, n.seq, agent)
            state = st.agents.get(agent)
            reply = (
                next(
                    (
                        h.content
                        for h in reversed(state.history)
                        if h.role == "assistant" and h.content
                    ),
                    "",
                )
                if state
                else ""
            )
            self.chat(f"[{n.seq}] turn ended")
            if reply:
                self.chat(f"{agent}: {reply}")
        elif kind == "intervention.asked":
            self.chat(f"[{n.seq}] the agent asks a question (reynctl interventions)")

    # -- actions (each one daemon method, each also a reynctl command) ---------------

    def open_picker(self) -> None:
        if self.client is None:
            self.set_banner(Text("not connected: the picker needs the daemon", style="bold red"))
            return
        if not isinstance(self.screen, PickerScreen):
            self.push_screen(PickerScreen())

    async def perform(self, target: Target) -> bool:
        """Run a confirmed pick; False (with `last_error`) when it did not happen."""
        client = self.client
        if client is None:
            self.last_error = Text("not connected to the daemon: nothing changed", style="bold red")
            return False
        try:
            if target.action == "act_turn":
                ar = await client.call(
                    "act_turn.rewind",
                    a.ActTurnRewindParams(agent=target.agent, seq=target.seq),
                    a.ActTurnRewindResult,
                )
                self._own_resets.add(ar.reset_seq)
                banner = (
                    f"act-turn rewind: {target.agent}'s turn {ar.turn_id} back to seq {ar.target}"
                    f": {ar.ghost_replayed} step(s) replayed from memos, {ar.rerun} run again "
                    f"(reset record {ar.reset_seq}, branch {ar.branch})"
                )
            else:
                rr = await client.call("checkout", m.CheckoutParams(seq=target.seq), m.RewindResult)
                self._own_resets.add(rr.reset_seq)
                word = "fork switch" if rr.mode == "fork_switch" else "undo"
                banner = f"{word}: {render.rewind_text(rr, PLAIN)}"
        except ReyndError as exc:
            name = exc.data.get("error", exc.name)
            self.last_error = Text(
                f"refused by the daemon: {exc.message} ({name}, {exc.code}); nothing changed",
                style="bold red",
            )
            return False
        except ClientError as exc:
            self.last_error = Text(f"{exc.message}: the result is unknown", style="bold red")
            return False
        self.set_banner(Text(banner, style="bold green"))
        if self.client is client:
            await self._load_timeline(client)
        return True

    async def preview_text(self, seq: int, width: int = 56) -> Text | None:
        client = self.client
        if client is None:
            return Text("not connected", style="red")
        try:
            st = await client.call("state.get", m.StateParams(seq=seq), m.StateResult)
            diff = await client.call(
                "state.diff", m.DiffParams(from_seq=seq, to_seq=self.head), m.DiffResult
            )
        except ReyndError as exc:
            return Text(f"cannot read seq {seq}: {exc.message}", style="red")
        except ClientError as exc:
            return Text(exc.message, style="red")
        text = Text()
        text.append(f"as of seq {seq}\n", style="bold underline")
        text.append(render.state_text(st, PLAIN, width=width))
        text.append(f"\n\ndiff to the tip (seq {self.head})\n", style="bold underline")
        text.append(render.diff_text(diff, PLAIN, width=width - 8))
        return text

    async def steps_of(self, node: Node) -> list[StepRow] | str:
        """The committed act-steps of the turn that `node` closes (state just before it)."""
        client = self.client
        if client is None or not node.agent:
            return "not connected"
        try:
            st = await client.call(
                "state.get", m.StateParams(seq=node.seq - 1, agent=node.agent), m.StateResult
            )
        except ReyndError as exc:
            return f"cannot read the steps: {exc.message}"
        except ClientError as exc:
            return exc.message
        state = st.agents.get(node.agent)
        if state is None or not state.pending_chains or not state.pending_chains[0].steps:
            return f"no act-steps of {node.agent} in flight before seq {node.seq}"
        chain = state.pending_chains[0]
        return [
            StepRow(
                agent=node.agent,
                step=memo.step,
                seq=memo.seq,
                summary=_step_summary(memo),
                active=node.active,
            )
            for memo in chain.steps
        ]

    async def send(self, text: str) -> None:
        client = self.client
        if client is None:
            self.chat("not connected: message not sent")
            return
        if self.agent is None:
            self.chat("no agent to talk to: create one with `reynctl agents create NAME`")
            return
        try:
            res = await client.call(
                "agents.send", a.AgentsSendParams(agent=self.agent, text=text), a.AgentsSendResult
            )
        except (ReyndError, ClientError) as exc:
            self.chat(f"not sent: {exc.message}")
            return
        self.chat(f"you → {self.agent}: {text}  (seq {res.seq}, turn {res.turn_id})")

    async def cancel_turn(self) -> None:
        client = self.client
        if client is None or self.agent is None:
            self.chat("nothing to cancel")
            return
        try:
            res = await client.call(
                "agents.cancel", a.AgentsCancelParams(agent=self.agent), a.AgentsCancelResult
            )
        except (ReyndError, ClientError) as exc:
            self.chat(f"cancel failed: {exc.message}")
            return
        if not res.cancelled:
            self.chat(f"{self.agent} has no turn in flight: nothing cancelled")
        for c in res.cancelled:
            self.chat(f"cancelled turn {c.get('turn_id', '?')} of {c.get('agent', self.agent)}")


def run(socket: Path, *, agent: str | None = None, timeout: float | None = 30.0) -> None:
    """Run the TUI until the user quits (ctrl+q)."""
    ReyndTui(socket, agent=agent, timeout=timeout).run()

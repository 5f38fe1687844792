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
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import ClassVar

import msgspec
from rich.text import Text
from textual.app import App
from textual.command import Provider
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from reynctl import render
from reynctl.aio import AsyncClient, open_client
from reynctl.errors import ClientError, NoDaemon, StaleSocket
from reynctl.jsonrpc import decode_notification
from reynctl.tui.base import spawn
from reynctl.tui.chat import ChatPane, narrate, rewind_lines, transcript
from reynctl.tui.commands import TuiCommands
from reynctl.tui.confirm import ConfirmScreen, Target, noop_reason
from reynctl.tui.connection import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    ConnectionStatus,
    ConnState,
    absent_text,
)
from reynctl.tui.graph import Node, Row, build_nodes, layout
from reynctl.tui.host import TuiHost
from reynctl.tui.main_screen import MainScreen
from reynctl.tui.picker import PickerScreen
from reynctl.tui.timeline import MAX_GENERATIONS, TimelineView
from reynctl.watch import Gap, check_order
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.errors import ReyndError
from reynd.protocol.preview import effects_line

__all__ = ["ReyndTui", "run"]

CLIENT_NAME = "reynctl-tui"  # what reset records this TUI makes say moved the tip

PLAIN = render.Style(False)

IN_TURN = ("turn.started", "step.started", "step.committed")


class ReyndTui(TuiHost):
    """Attach to the daemon at `socket`; `agent` preselects the chat pane's agent."""

    TITLE = "reynctl tui"
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {
        *App.COMMANDS,
        TuiCommands,
    }
    # One row per line at any width (80x24 included): long lines end in an ellipsis.
    CSS = """
    OptionList, #conn, #agent-status, #picker-title {
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    /* Messages and the preview wrap instead: an error cut at 80 columns says nothing. */
    #banner, #picker-message { height: auto; min-height: 1; max-height: 6; }
    #conn { height: 1; padding: 0 1; background: $boost; }
    #conn.bad { background: $error 30%; }
    #timeline-pane { width: 3fr; }
    #chat-pane { width: 2fr; border-left: solid $primary; }
    #timeline, #picker-list { height: 1fr; border: none; }
    #agent-status { height: 1; padding: 0 1; }
    #chat-log { height: 1fr; }
    #banner { padding: 0 1; }
    #picker-title { height: 1; padding: 0 1; background: $boost; }
    #picker-list { width: 3fr; }
    #preview-pane { width: 2fr; border-left: solid $primary; padding: 0 1; }
    #picker-message { padding: 0 1; }
    ConfirmScreen, HelpScreen, EditScreen { align: center middle; }
    #help-box { width: 80; max-width: 100%; height: auto; max-height: 100%;
                border: thick $primary; padding: 1 2; background: $surface; }
    #edit-box { width: 80; max-width: 100%; height: auto; border: thick $primary;
                padding: 1 2; background: $surface; }
    #confirm-box { width: 80; max-width: 100%; height: auto; border: thick $warning;
                   padding: 1 2; background: $surface; }
    #confirm-effects, #confirm-keys { margin-top: 1; }
    """

    def __init__(
        self,
        socket: Path,
        *,
        agent: str | None = None,
        timeout: float | None = 30.0,
        daemon_uid: int | None = None,
    ) -> None:
        super().__init__()
        self.socket = socket
        self.timeout = timeout
        self.daemon_uid = daemon_uid  # trusted besides our uid and root (reynctl.trust)
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
        self.chat_seq = 0  # the seq the chat's transcript was read at (older records are in it)
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
                client = await open_client(
                    self.socket, timeout=self.timeout, daemon_uid=self.daemon_uid, name=CLIENT_NAME
                )
            except (NoDaemon, StaleSocket) as exc:
                self.set_conn(
                    "lost" if ever else "no_daemon",
                    absent_text(
                        exc,
                        self.socket,
                        lost=self.conn_state == "lost",
                        delay=delay,
                        attempt=attempt,
                    ),
                )
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
        status = await client.status()
        self.last = status.head
        await self._load_timeline(client)
        agents = await client.agents()
        self.agents = {info.name: info for info in agents.agents}
        if self.agent is None and self.agents:
            self.agent = sorted(self.agents)[0]
        self.show_agent()
        await self.load_chat(client)

    async def load_chat(self, client: AsyncClient) -> None:
        """Show the agent talked to as of the head: its history, its turn in flight."""
        name = self.agent
        if name is None:
            return
        try:
            st = await client.state(agent=name)
        except ReyndError as exc:  # e.g. not an agent (any more): say so, stay connected
            lines = [f"cannot read {name}'s history: {exc.message}"]
        else:
            # Turns, not checkpoints: a plan turn also cuts one generation per plan step.
            abandoned = sum(
                1 for g in self.generations if g.agent == name and not g.active and g.kind == "turn"
            )
            self.chat_seq = st.seq
            lines = transcript(name, st.agents.get(name), st.seq, abandoned)
        if name != self.agent:
            return  # another agent was picked meanwhile: its own load shows it
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one(ChatPane).replace(lines)

    async def _load_timeline(self, client: AsyncClient) -> None:
        branches = await client.branches()
        self.branches = list(branches.branches)
        self.generations, _ = await client.newest_generations(MAX_GENERATIONS)
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
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one(TimelineView).draw(self.rows)

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
                if n.seq > self.chat_seq:
                    await narrate(client, n, self.chat)
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
                await self._after_rewind(client, n)
        elif n.topic == "agents":
            name = str(d.get("agent", ""))
            if name:
                await self._refresh_agent(client, name)
                if self.agent is None:
                    self.agent = name
                self.show_agent()

    async def _after_rewind(self, client: AsyncClient, n: m.Notification) -> None:
        """Every agent moved: read them again; the chat marks where its past was cut."""
        agents = await client.agents()
        self.agents = {info.name: info for info in agents.agents}
        self.show_agent()
        name = self.agent
        if name is None:
            return
        # As of the reset record, which is the state as of the target: not what ran since.
        try:
            st = await client.state(seq=n.seq, agent=name)
        except ReyndError:  # not an agent as of the target
            state = None
        else:
            state = st.agents.get(name)
        for line in rewind_lines(name, n.data, state):
            self.chat(line)

    async def _refresh_agent(self, client: AsyncClient, name: str) -> None:
        try:
            info = await client.agent(agent=name)
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
        if d.get("only") == "workspace":
            what = f"restored the workspace's files as of seq {d.get('files_as_of')}, at seq"
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
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one(ConnectionStatus).show(
                self.conn_state, self.conn_text, self.socket, self.head, self.branch
            )

    def set_banner(self, text: Text | str) -> None:
        with contextlib.suppress(LookupError, NoMatches):
            banner = self._main().query_one("#banner", Static)
            banner.update(text)
            banner.tooltip = text or None  # the whole of it, when one row cuts it

    def show_agent(self) -> None:
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one(ChatPane).show_agent(self.agents, self.agent)

    def chat(self, line: str) -> None:
        with contextlib.suppress(LookupError, NoMatches):
            self._main().query_one(ChatPane).write(line)

    def next_agent(self) -> None:
        names = sorted(self.agents)
        if not names:
            return
        i = names.index(self.agent) + 1 if self.agent in names else 0
        self.select_agent(names[i % len(names)])

    def select_agent(self, name: str) -> None:
        """Talk to `name`: its status line, and its history in the chat."""
        self.agent = name
        self.show_agent()
        self.chat(f"— now talking to {name}")
        client = self.client
        if client is not None:
            spawn(self, partial(self._load_chat_quietly, client), group="chat-load", exclusive=True)

    async def _load_chat_quietly(self, client: AsyncClient) -> None:
        try:
            await self.load_chat(client)
        except ClientError as exc:  # the connection loop reconnects and loads it again
            self.chat(f"cannot read {self.agent}'s history: {exc.message}")

    def refresh_all(self) -> None:
        """Read the timeline, the agents and the chat again from the daemon."""
        client = self.client
        if client is None:
            self.set_banner(Text("not connected: nothing to refresh", style="bold red"))
            return

        async def job() -> None:
            try:
                await self.resync(client)
            except (ClientError, ReyndError) as exc:
                self.set_banner(Text(f"refresh failed: {exc.message}", style="bold red"))
            else:
                self.set_banner(Text(f"refreshed: head {self.head}", style="dim"))

        spawn(self, job, group="refresh", exclusive=True)

    def cancel_turn(self) -> None:
        with contextlib.suppress(LookupError, NoMatches):
            spawn(self, self._main().query_one(ChatPane).cancel_turn, group="chat")

    # -- actions (each one daemon method, each also a reynctl command) ---------------

    def open_picker(self) -> None:
        if self.client is None:
            self.set_banner(Text("not connected: the picker needs the daemon", style="bold red"))
            return
        if not isinstance(self.screen, PickerScreen):
            self.push_screen(PickerScreen())

    def ask(
        self,
        target: Target,
        say: Callable[[Text | str], None] | None = None,
        done: Callable[[], None] | None = None,
    ) -> None:
        """Confirm `target`, then perform it; `say` shows progress (the banner by default).

        A checkout of the tip is a no-op: said at once, with nothing to confirm.
        """
        tell = say or self.set_banner
        why = noop_reason(target, self.head)
        if why is not None:
            tell(Text(why, style="bold yellow"))
            return
        tell("")

        async def act() -> None:
            tell(Text(f"{target.mode}: seq {target.seq}…", style="dim"))
            if await self.perform(target):
                if done is not None:
                    done()
            else:
                tell(self.last_error)

        def answered(yes: bool | None) -> None:
            if yes:
                spawn(self, act, group="action", exclusive=True)
            else:
                tell(Text("cancelled: nothing changed", style="dim"))

        preview = partial(self.dry_run, target)
        self.push_screen(ConfirmScreen(target, self.head, preview), answered)

    async def dry_run(self, target: Target) -> Text:
        """What `target` cannot undo and which turns it cancels: its dry run (issue 25)."""
        client = self.client
        if client is None:
            return Text("not undone: unknown (not connected to the daemon)", style="dim")
        res: m.RewindResult | a.ActTurnRewindResult
        try:
            if target.action == "act_turn":
                res = await client.act_turn_rewind(agent=target.agent, seq=target.seq, dry_run=True)
            else:
                res = await client.checkout(seq=target.seq, dry_run=True)
        except (ReyndError, ClientError) as exc:
            return Text(f"not undone: unknown (no preview: {exc.message})", style="red")
        effects = res.effects
        text = Text(effects_line(effects) if effects else "not undone: unknown", style="yellow")
        cancelled = [f"{agent}/{turn}" for agent, turn in render.cancelled_of(res)]
        if cancelled:
            text.append(f"\ncancels {len(cancelled)} turn(s) in flight: {', '.join(cancelled)}")
        unrecorded = render.unrecorded_lines(res.preview)
        if unrecorded:
            text.append("\n" + "\n".join(line.strip() for line in unrecorded), style="red")
        return text

    async def perform(self, target: Target) -> bool:
        """Run a confirmed pick; False (with `last_error`) when it did not happen."""
        client = self.client
        if client is None:
            self.last_error = Text("not connected to the daemon: nothing changed", style="bold red")
            return False
        try:
            if target.action == "act_turn":
                ar = await client.act_turn_rewind(agent=target.agent, seq=target.seq)
                self._own_resets.add(ar.reset_seq)
                banner = (
                    f"act-turn rewind: {target.agent}'s turn {ar.turn_id} back to seq {ar.target}"
                    f": {ar.ghost_replayed} step(s) replayed from memos, {ar.rerun} run again "
                    f"(reset record {ar.reset_seq}, branch {ar.branch})"
                )
            else:
                rr = await client.checkout(seq=target.seq)
                self._own_resets.add(rr.reset_seq)
                word = "fork switch" if rr.mode == "fork_switch" else "undo"
                banner = f"{word}: {render.rewind_text(rr, PLAIN)}"
        except (ReyndError, ClientError) as exc:
            self.last_error = _not_done(exc)
            return False
        self.set_banner(Text(banner, style="bold green"))
        if self.client is client:
            await self._load_timeline(client)
        return True

    def edit(
        self,
        seq: int,
        agent: str,
        text: str,
        say: Callable[[Text | str], None],
        done: Callable[[], None],
    ) -> None:
        """What `reynctl edit SEQ TEXT` does: checkout seq-1 with `text` in its atomic batch."""

        async def act() -> None:
            client = self.client
            if client is None:
                say(Text("not connected to the daemon: nothing changed", style="bold red"))
                return
            say(Text(f"edit of the message at seq {seq}…", style="dim"))
            then = a.AgentsSendParams(agent=agent, text=text, wait=False)
            try:
                rr = await client.checkout(
                    seq=seq - 1, then=then, reason=f"edit of message {seq}", replaces=seq
                )
            except (ReyndError, ClientError) as exc:
                say(_not_done(exc))
                return
            self._own_resets.add(rr.reset_seq)
            sent = f", new message at seq {rr.sent.seq}" if rr.sent is not None else ""
            self.set_banner(
                Text(f"edit: {render.rewind_text(rr, PLAIN)}{sent}", style="bold green")
            )
            done()
            if self.client is client:
                await self._load_timeline(client)

        spawn(self, act, group="action", exclusive=True)


def _not_done(exc: ReyndError | ClientError) -> Text:
    """What the banner says of a move that failed."""
    if isinstance(exc, ClientError):
        return Text(f"{exc.message}: the result is unknown", style="bold red")
    name = exc.data.get("error", exc.name)
    return Text(
        f"nothing changed, refused by the daemon: {exc.message} ({name}, {exc.code})",
        style="bold red",
    )


def run(
    socket: Path,
    *,
    agent: str | None = None,
    timeout: float | None = 30.0,
    daemon_uid: int | None = None,
) -> None:
    """Run the TUI until the user quits (ctrl+q)."""
    ReyndTui(socket, agent=agent, timeout=timeout, daemon_uid=daemon_uid).run()

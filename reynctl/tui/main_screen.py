"""The main screen: the connection line, the timeline beside the chat pane, a banner."""

from __future__ import annotations

import time
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static

from reynctl.tui.base import TuiScreen, spawn
from reynctl.tui.chat import ChatPane
from reynctl.tui.connection import ConnectionStatus
from reynctl.tui.help import HelpScreen
from reynctl.tui.timeline import TimelineView

__all__ = ["MainScreen"]

REWIND_COMMAND = "/rewind"  # typed in the chat: opens the picker
ESC_ESC_WINDOW = 0.8  # seconds between the two Escapes that open the picker


class MainScreen(TuiScreen):
    """The timeline beside the chat pane; Esc Esc opens the picker."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "escape", "Esc Esc: rewind", priority=True),
        Binding("ctrl+x", "cancel_turn", "cancel turn", priority=True),
        Binding("ctrl+n", "next_agent", "next agent", priority=True),
        Binding("ctrl+q", "app.quit", "quit", priority=True),
        # Not priority: typed into the chat input when it has the focus.
        Binding("question_mark", "help", "help"),
        Binding("q", "app.quit", "quit", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._last_escape = 0.0

    def compose(self) -> ComposeResult:
        yield ConnectionStatus("", id="conn")
        with Horizontal():
            yield TimelineView(id="timeline-pane")
            yield ChatPane(id="chat-pane")
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

    def action_help(self) -> None:
        if not isinstance(self.app.screen, HelpScreen):
            self.app.push_screen(HelpScreen())

    def action_cancel_turn(self) -> None:
        self.tui.cancel_turn()

    def action_next_agent(self) -> None:
        self.tui.next_agent()

    @on(Input.Submitted, "#chat-input")
    def _send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.clear()
        if text == REWIND_COMMAND:  # the seeds' D7 command: the picker, not a message
            self.tui.open_picker()
        elif text:
            spawn(self, partial(self.query_one(ChatPane).send, text), group="chat")

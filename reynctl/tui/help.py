"""The help screen (`?` when the chat input is not focused): every key and chat command."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HELP", "HelpScreen"]

# (keys, what they do); the chat commands are typed into the chat input.
HELP: tuple[tuple[str, str], ...] = (
    ("Esc Esc", "open the rewind picker (undo, fork switch, act-turn rewind)"),
    ("/rewind", "typed in the chat and Enter: the rewind picker too"),
    ("e", "in the picker, on a turn: edit the message that started it and run it again"),
    ("Enter", "in the chat input: send the message to the agent"),
    ("ctrl+n", "talk to the next agent"),
    ("ctrl+x", "hard-cancel the agent's turn in flight"),
    ("ctrl+p", "command palette (rewind to a seq, switch agent, refresh)"),
    ("Tab", "move the focus between the timeline and the chat input"),
    ("?", "this help (when the chat input is not focused)"),
    ("q", "quit (when the chat input is not focused)"),
    ("ctrl+q", "quit, from anywhere"),
)


class HelpScreen(ModalScreen[None]):
    """The keys of the TUI; Esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "close"),
    ]

    def compose(self) -> ComposeResult:
        body = Text()
        body.append("reynctl tui: keys\n\n", style="bold")
        for keys, what in HELP:
            body.append(f"{keys:<9}", style="bold")
            body.append(f" {what}\n")
        body.append("\nEsc / q / ?: close this help", style="dim")
        # Scrolls rather than cuts on a small terminal (80x24 included).
        with VerticalScroll(id="help-box"):
            yield Static(body, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)

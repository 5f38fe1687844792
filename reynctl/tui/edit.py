"""The picker's "edit this message" (issue 25): the message that started a turn, sent anew.

`e` on a turn finds the message its turn took (the inbox as of the seq just
before the turn started keeps the seq that delivered it) and opens it with
its old text in an input. Enter does what `reynctl edit SEQ TEXT` does: a
checkout of SEQ-1 with the new text delivered to the same agent in the reset
record's atomic batch (`then`); Esc changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from reynctl.aio import AsyncClient
from reynctl.tui.confirm import Preview
from reynctl.tui.graph import Node

__all__ = ["EditScreen", "Message", "message_of"]


@dataclass(frozen=True, slots=True)
class Message:
    """A received message: the seq of its message.received record, its agent, its text."""

    seq: int
    agent: str
    text: str


async def message_of(client: AsyncClient, node: Node) -> Message | str:
    """The message whose turn `node` ended, or why there is none to edit (ReyndError raised)."""
    if node.kind != "turn" or not node.agent:
        return "only a turn's message can be edited: pick a turn (its message started it)"
    st = await client.state(seq=node.seq - 1, agent=node.agent)
    agent = st.agents.get(node.agent)
    if agent is None or not agent.pending_chains:
        return f"no turn of {node.agent} in flight before seq {node.seq}: no message to edit"
    chain = agent.pending_chains[0]
    # As of just before its turn started, the message waits in the inbox with its seq.
    before = await client.state(seq=chain.started_seq - 1, agent=node.agent)
    inbox = before.agents[node.agent].inbox if node.agent in before.agents else []
    for item in inbox:
        if item.message_id == chain.message_id:
            return Message(seq=item.seq, agent=node.agent, text=item.text)
    return f"the message of turn {chain.turn_id} is not kept (retention collected it)"


class EditScreen(ModalScreen[str | None]):
    """The old text in an input: Enter answers the new text, Esc None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, message: Message, preview: Preview | None = None) -> None:
        super().__init__()
        self.message = message
        self._preview = preview  # the move's dry run: what it cannot undo (as ConfirmScreen)

    def compose(self) -> ComposeResult:
        msg = self.message
        body = Text()
        body.append(f"edit: the message to {msg.agent} at seq {msg.seq}\n\n", style="bold")
        body.append(
            f"Enter sends it in place of the old one: the tip moves to seq {msg.seq - 1}, "
            "just before it, and the new text goes to the same agent in one atomic step. "
            "The old message and what followed it stay on an abandoned branch.\n"
        )
        body.append(f'Same as `reynctl edit {msg.seq} "..."`.\n', style="dim")
        with Vertical(id="edit-box"):
            yield Static(body, id="edit-text")
            if self._preview is not None:
                waiting = Text("not undone: asking the daemon…", style="dim")
                yield Static(waiting, id="edit-effects")
            yield Input(value=msg.text, id="edit-input")
            yield Static(Text("Enter: send     Esc: cancel", style="bold"))

    def on_mount(self) -> None:
        self.query_one("#edit-input", Input).focus()
        if self._preview is not None:
            self.run_worker(self._show(self._preview))

    async def _show(self, preview: Preview) -> None:
        self.query_one("#edit-effects", Static).update(await preview())

    @on(Input.Submitted, "#edit-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)

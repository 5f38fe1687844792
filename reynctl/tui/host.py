"""What the TUI's screens and widgets use of the app they belong to: `TuiHost`.

The app module imports the screens; the screens reach the app through this
contract, never through the app module, so no import goes back up (issue 23).
`ReyndTui` is the one implementation.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

from rich.text import Text
from textual.app import App

from reynctl.aio import AsyncClient
from reynctl.tui.confirm import Target
from reynctl.tui.graph import Node, Row
from reynd.protocol import agent_methods as a

__all__ = ["TuiHost"]


class TuiHost(App[None]):
    """The connection, the loaded state and the actions the screens call.

    Abstract without `ABCMeta`, which conflicts with textual's metaclass: mypy
    still refuses to instantiate a subclass that leaves a method abstract.
    """

    client: AsyncClient | None  # None while disconnected
    head: int
    agent: str | None  # the agent the chat pane talks to
    agents: dict[str, a.AgentInfo]
    nodes: list[Node]
    rows: list[Row]

    @abstractmethod
    async def dry_run(self, target: Target) -> Text:
        """What `target` cannot undo and which turns it cancels: its dry run (issue 25)."""

    @abstractmethod
    def node_at(self, seq: int) -> Node | None:
        """The timeline's node at `seq`, if there is one."""

    @abstractmethod
    def set_banner(self, text: Text | str) -> None:
        """Show `text` on the main screen's banner line."""

    @abstractmethod
    def open_picker(self) -> None:
        """Open the rewind picker (when connected)."""

    @abstractmethod
    def refresh_all(self) -> None:
        """Read the timeline, the agents and the chat again from the daemon."""

    @abstractmethod
    def next_agent(self) -> None:
        """Talk to the next agent by name."""

    @abstractmethod
    def select_agent(self, name: str) -> None:
        """Talk to `name`."""

    @abstractmethod
    def cancel_turn(self) -> None:
        """Hard-cancel the turn in flight of the agent talked to."""

    @abstractmethod
    def ask(
        self,
        target: Target,
        say: Callable[[Text | str], None] | None = None,
        done: Callable[[], None] | None = None,
    ) -> None:
        """Confirm `target`, then perform it; `say` shows progress, `done` runs on success."""

    @abstractmethod
    def edit(
        self,
        seq: int,
        agent: str,
        text: str,
        say: Callable[[Text | str], None],
        done: Callable[[], None],
    ) -> None:
        """Send `text` to `agent` in place of the message at `seq` (checkout seq-1 with `then`)."""

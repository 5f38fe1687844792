"""The connection's state, shown in one line at the top of the main screen."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from rich.text import Text
from textual.widgets import Static

from reynctl.errors import DaemonUnreachable, StaleSocket

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "ConnState", "ConnectionStatus", "absent_text"]

START_HINT = "start it with `reynd serve` (or `systemctl --user start reynd`)"
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 5.0

ConnState = Literal["connecting", "connected", "no_daemon", "lost"]


class ConnectionStatus(Static):
    """Connected or not, to which socket, and the head when connected."""

    def show(self, state: ConnState, message: str, socket: Path, head: int, branch: int) -> None:
        """Connected (with the head and branch), connecting, or why not."""
        text = Text()
        if state == "connected":
            # The head first: on a narrow terminal the socket path is what gets cut.
            text.append("● ", style="bold green")
            text.append(f"head {head} on branch {branch}", style="bold")
            text.append(f" · {message}")
            self.remove_class("bad")
        elif state == "connecting":
            text.append(f"connecting to reynd at {socket}…", style="dim")
        else:
            text.append("● ", style="bold red")
            text.append(message, style="bold")
            self.add_class("bad")
        self.update(text)


def absent_text(
    exc: DaemonUnreachable, socket: Path, *, lost: bool, delay: float, attempt: int
) -> str:
    """Why there is no connection (no daemon, or it went away), and when the next try is."""
    what = "the stale socket" if isinstance(exc, StaleSocket) else "no socket"
    if lost:
        return (
            f"connection to reynd lost: the daemon at {socket} is gone ({what}); "
            f"reconnecting with backoff, next try in {delay:.1f}s (attempt {attempt}); "
            f"{START_HINT}"
        )
    return (
        f"reynd is not running: {what} at {socket}. {START_HINT[0].upper()}"
        f"{START_HINT[1:]}. Retrying in {delay:.1f}s (attempt {attempt})."
    )

"""What the TUI's screens share: the typed app they belong to, and workers made lazily."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, cast

from textual.dom import DOMNode
from textual.screen import Screen
from textual.worker import WorkType

from reynctl.tui.host import TuiHost

__all__ = ["TuiScreen", "spawn", "tui_of"]


def spawn(node: DOMNode, job: Callable[[], Coroutine[Any, Any, None]], **kw: Any) -> None:
    """Run `job` as a textual worker; its coroutine is made only when the worker starts."""
    node.run_worker(cast("WorkType[None]", job), **kw)


def tui_of(node: DOMNode) -> TuiHost:
    """The app `node` belongs to, typed as what the screens may use of it."""
    app = node.app
    assert isinstance(app, TuiHost)
    return app


class TuiScreen(Screen[None]):
    """A screen of the TUI, whose app holds the connection and the loaded state."""

    @property
    def tui(self) -> TuiHost:
        return tui_of(self)

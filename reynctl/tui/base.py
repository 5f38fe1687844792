"""What the TUI's screens share: the typed app, and workers made lazily."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, cast

from textual.dom import DOMNode
from textual.screen import Screen
from textual.worker import WorkType

if TYPE_CHECKING:
    from reynctl.tui.app import ReyndTui

__all__ = ["TuiScreen", "spawn", "tui_of"]


def spawn(node: DOMNode, job: Callable[[], Coroutine[Any, Any, None]], **kw: Any) -> None:
    """Run `job` as a textual worker; its coroutine is made only when the worker starts."""
    node.run_worker(cast("WorkType[None]", job), **kw)


def tui_of(node: DOMNode) -> ReyndTui:
    """The app `node` belongs to, typed."""
    from reynctl.tui.app import ReyndTui  # the app module imports the screens and widgets

    app = node.app
    assert isinstance(app, ReyndTui)
    return app


class TuiScreen(Screen[None]):
    """A screen of `ReyndTui`, which holds the connection and the loaded state."""

    @property
    def tui(self) -> ReyndTui:
        return tui_of(self)

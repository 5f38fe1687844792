"""`reynctl tui`: the interactive frontend (timeline, rewind picker, chat) on textual."""

from __future__ import annotations

from reynctl.tui.app import ReyndTui, run

__all__ = ["ReyndTui", "run"]

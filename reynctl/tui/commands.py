"""The TUI's own commands in textual's command palette (ctrl+p), beside its built-ins.

Each command is something a key does (Esc Esc, ctrl+n, ctrl+x) or a pick the
rewind picker makes, named so it can be typed: `rewind to seq 12`,
`checkout seq 19`, `switch agent: b`, `refresh`. Rewinds still ask first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from reynctl import render
from reynctl.tui.base import tui_of
from reynctl.tui.confirm import Target
from reynctl.tui.graph import Node

__all__ = ["TuiCommands"]

Command = tuple[str, str, Callable[[], None]]  # name, help, what it does


def _about(node: Node) -> str:
    what = node.kind.replace("_", " ")
    if node.kind == "reset":
        what = f"reset record (→ {node.target})"
    label = f": {render.truncate(node.label, 40)}" if node.label else ""
    agent = f" of {node.agent}" if node.agent else ""
    return f"{what}{agent}{label}"


class TuiCommands(Provider):
    """Rewind picker, rewind / checkout to a seq, switch agent, cancel turn, refresh."""

    def _commands(self) -> Iterator[Command]:
        tui = tui_of(self.screen)
        yield (
            "rewind picker",
            "undo, fork switch or act-turn rewind, with a preview (Esc Esc)",
            tui.open_picker,
        )
        yield ("refresh", "read the timeline, the agents and the chat again", tui.refresh_all)
        yield ("next agent", "talk to the next agent (ctrl+n)", tui.next_agent)
        yield ("cancel turn", "hard-cancel the agent's turn in flight (ctrl+x)", tui.cancel_turn)
        for name in sorted(tui.agents):
            if name != tui.agent:
                yield (f"switch agent: {name}", "talk to it", partial(tui.select_agent, name))
        for node in tui.nodes:
            if node.seq == tui.head:
                continue  # nothing to do there
            target = Target(seq=node.seq, action="checkout", active=node.active, branch=node.branch)
            if node.active:
                name, what = f"rewind to seq {node.seq}", "undo to"
            else:
                name, what = f"checkout seq {node.seq}", f"fork switch (branch {node.branch}) to"
            yield (name, f"{what} {_about(node)}; asks first", partial(tui.ask, target))

    async def discover(self) -> Hits:
        for name, help_text, run in self._commands():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, run in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, text=name, help=help_text)

"""The timeline: a line per checkpoint of every branch, newest first, and the view of it.

Lines are options of an OptionList, named by seq (`n<seq>` a checkpoint,
`s<seq>` an act-step of an expanded turn), never by position.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from reynctl import render
from reynctl.tui.graph import Node, Row
from reynd.protocol.events import Message
from reynd.protocol.state import StepMemo

__all__ = [
    "MAX_GENERATIONS",
    "StepRow",
    "TimelineView",
    "node_prompt",
    "option_width",
    "step_prompt",
    "timeline_options",
]

MAX_GENERATIONS = 2000  # newest first; older ones are left out of the timeline
LABEL_WIDTH = 24  # when the row's width is unknown
LABEL_MAX = 48
LABEL_MIN = 12  # below this, the row drops its clock, then shortens its mark


@dataclass(frozen=True, slots=True)
class StepRow:
    """A committed act-step inside a turn, a target for `act_turn.rewind`."""

    agent: str
    step: int
    seq: int
    summary: str
    active: bool


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts > 0 else ""


def _step_summary(memo: StepMemo, width: int = 60) -> str:
    parts: list[str] = []
    for msg in memo.messages:
        parts.append(_message_text(msg))
    return render.truncate(" | ".join(p for p in parts if p) or "(no messages)", width)


def _message_text(msg: Message) -> str:
    if msg.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in msg.tool_calls)
        return f"{msg.content} → {calls}" if msg.content else f"→ {calls}"
    if msg.role == "tool":
        return f"tool: {msg.content}"
    return msg.content


def _kind_text(node: Node) -> str:
    if node.kind == "reset":
        return f"reset → {node.target}"
    if node.kind == "plan_step":
        return "plan step"
    return node.kind


def _tails(node: Node) -> list[tuple[str, str]]:
    """(clock, mark) after the label, the fullest first: narrower rows take later ones."""
    clock = f" {_clock(node.created_at):>8}"
    if node.here:
        return [(clock, "  ◀ you are here"), ("", "  ◀ you are here"), ("", "  ◀ here")]
    if node.active:
        return [(clock, ""), ("", "")]
    # Its lane and its ○ show the branch; the word goes first when room is short.
    return [(clock, "  abandoned"), ("", "  abandoned"), ("", "")]


def node_prompt(node: Node, graph: str, width: int, row_width: int | None = None) -> Text:
    """One timeline line: graph, seq, kind, agent, label, time, marks.

    `row_width` (the cells the line gets) sizes the label so the line fits in
    one row: the label is cut with an ellipsis, then the clock is left out.
    """
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(graph.ljust(width), style="bold magenta" if node.active else "magenta")
    text.append(f" {node.seq:>5} ", style="cyan")
    body = f"{_kind_text(node):<11} {render.truncate(node.agent, 8):<8} "
    label = node.label
    if node.kind == "genesis":
        label = "the empty state"
    elif node.kind == "tip":
        label = "the tip (no checkpoint here yet)"
    if node.tags:  # a tag's name first: it is what the user looks for
        label = f"[{', '.join(node.tags)}] {label}"
    text.append(body, style="" if node.active else "dim")
    tails = _tails(node)
    clock, mark = tails[0]
    label_width = LABEL_WIDTH
    if row_width is not None:
        room = row_width - text.cell_len
        for clock, mark in tails:
            label_width = min(LABEL_MAX, room - cell_len(clock) - cell_len(mark))
            if label_width >= LABEL_MIN:
                break
        label_width = max(label_width, 1)
    text.append(
        render.truncate(label, label_width).ljust(label_width), style="" if node.active else "dim"
    )
    text.append(clock, style="dim")
    text.append(mark, style="bold green" if node.here else "dim yellow")
    return text


def step_prompt(step: StepRow, graph: str, width: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(graph.ljust(width), style="magenta")
    text.append(f" {step.seq:>5} ", style="cyan")
    text.append(f"  step {step.step:<5} ", style="italic")
    text.append(step.summary, style="" if step.active else "dim")
    return text


def timeline_options(
    rows: Iterable[Row],
    steps: dict[int, list[StepRow] | str] | None = None,
    row_width: int | None = None,
) -> list[Option]:
    """Options for an OptionList: `n<seq>` nodes, `s<seq>` steps, disabled link lines.

    `row_width`: the cells an option gets, so that each fits in one row.
    """
    rows = list(rows)
    width = max((len(r.graph) for r in rows), default=1)
    out: list[Option] = []
    for i, row in enumerate(rows):
        if row.node is None:
            out.append(Option(Text(row.graph, style="magenta"), id=f"l{i}", disabled=True))
            continue
        node = row.node
        prompt = node_prompt(node, row.graph, width, row_width)
        out.append(Option(prompt, id=f"n{node.seq}"))
        expanded = (steps or {}).get(node.seq)
        if isinstance(expanded, str):
            hint = Text(row.below.ljust(width), style="magenta")
            hint.append(f"        {expanded}", style="dim italic")
            out.append(Option(hint, id=f"h{node.seq}", disabled=True))
        elif expanded:
            cells = row.below.ljust(width)
            col = row.graph.find(next(c for c in row.graph if c in "◉●○"))
            graph = cells[:col] + "┊" + cells[col + 1 :]
            # A step of an abandoned turn is no act-turn target (the daemon refuses
            # it as not_active): shown, never offered; the turn's checkout comes first.
            for step in reversed(expanded):
                out.append(
                    Option(
                        step_prompt(step, graph, width), id=f"s{step.seq}", disabled=not step.active
                    )
                )
            if not node.active:
                hint = Text(cells, style="magenta")
                hint.append(
                    f"        abandoned turn: its steps are not rewindable; checkout {node.seq} "
                    "(Enter on the turn) first",
                    style="dim italic",
                )
                out.append(Option(hint, id=f"h{node.seq}", disabled=True))
    return out


def option_width(ol: OptionList) -> int | None:
    """The cells an option of `ol` gets (a scrollbar may come), or None before layout."""
    width = ol.scrollable_content_region.width
    if width <= 0:
        return None
    return width - 2 - ol.styles.scrollbar_size_vertical  # options are padded by one cell


class TimelineView(Vertical):
    """The live timeline beside the chat pane."""

    rows: list[Row] = []  # the last drawn, to draw again at a new width

    def compose(self) -> ComposeResult:
        yield Static(Text("timeline (all branches, newest first)", style="bold"))
        yield OptionList(id="timeline")

    def draw(self, rows: Iterable[Row]) -> None:
        """Redraw from `rows`, keeping the highlighted line."""
        self.rows = list(rows)
        ol = self.query_one("#timeline", OptionList)
        keep = ol.highlighted
        ol.set_options(timeline_options(self.rows, row_width=option_width(ol)))
        if keep is not None and keep < ol.option_count:
            ol.highlighted = keep

    def on_resize(self, event: events.Resize) -> None:
        self.draw(self.rows)  # the labels are sized to the width

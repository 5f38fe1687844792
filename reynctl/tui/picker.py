"""The rewind picker (Esc Esc): every branch, a preview of the as-of state, its diff to the tip."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, OptionList, Static

from reynctl import render
from reynctl.errors import ClientError
from reynctl.tui.base import TuiScreen, spawn
from reynctl.tui.confirm import Target
from reynctl.tui.edit import EditScreen, message_of
from reynctl.tui.graph import Node
from reynctl.tui.timeline import StepRow, _step_summary, option_width, timeline_options
from reynd.protocol.errors import ReyndError

__all__ = ["PickerScreen"]

PLAIN = render.Style(False)
PREVIEW_CHARS = 2000  # a value in the preview is cut past this (as a chat line is)


class PickerScreen(TuiScreen):
    """The rewind picker: every branch, a preview of the as-of state and its diff to the tip."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("right,space", "expand", "steps"),
        Binding("left", "collapse", "hide steps"),
        Binding("e", "edit", "edit message"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.steps: dict[int, list[StepRow] | str] = {}
        self.step_index: dict[int, StepRow] = {}

    def compose(self) -> ComposeResult:
        yield Static(
            Text(
                "Rewind: ↑↓ move · → / space: act-steps of a turn · Enter: checkout · "
                "e: edit its message · Esc: cancel",
                style="bold",
            ),
            id="picker-title",
        )
        with Horizontal():
            yield OptionList(id="picker-list")
            with VerticalScroll(id="preview-pane"):
                yield Static(Text("select a seq to preview it", style="dim"), id="preview")
        yield Static("", id="picker-message")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_list()
        self.query_one("#picker-list", OptionList).focus()

    def on_resize(self, event: events.Resize) -> None:
        self.refresh_list()  # the labels are sized to the width

    def refresh_list(self) -> None:
        """Rebuild from the app's rows, keeping the highlighted seq (not its position)."""
        ol = self.query_one("#picker-list", OptionList)
        keep = ol.highlighted_option.id if ol.highlighted_option is not None else None
        ol.set_options(timeline_options(self.tui.rows, self.steps, option_width(ol)))
        index = _index_of(ol, keep) if keep else None
        if index is None:
            index = _first_enabled(ol)
        if index is not None:
            ol.highlighted = index

    def selected(self) -> Node | StepRow | None:
        ol = self.query_one("#picker-list", OptionList)
        opt = ol.highlighted_option
        return self._resolve(opt.id if opt is not None else None)

    def _resolve(self, option_id: str | None) -> Node | StepRow | None:
        if not option_id:
            return None
        seq = int(option_id[1:])
        if option_id[0] == "n":
            return self.tui.node_at(seq)
        if option_id[0] == "s":
            return self.step_index.get(seq)
        return None

    @on(OptionList.OptionHighlighted, "#picker-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        item = self._resolve(event.option_id)
        if item is not None:
            spawn(self, partial(self._preview, item.seq), group="preview", exclusive=True)

    async def _preview(self, seq: int) -> None:
        pane = self.query_one("#preview", Static)
        # Values are cut only past PREVIEW_CHARS; the pane wraps lines and scrolls.
        text = await self.preview_text(seq, width=PREVIEW_CHARS)
        if text is not None:
            pane.update(text)

    @on(OptionList.OptionSelected, "#picker-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        item = self._resolve(event.option_id)
        if isinstance(item, Node):
            target = Target(seq=item.seq, action="checkout", active=item.active, branch=item.branch)
        elif isinstance(item, StepRow) and item.active:
            target = Target(
                seq=item.seq,
                action="act_turn",
                active=item.active,
                agent=item.agent,
                step=item.step,
            )
        else:
            return
        self.tui.ask(target, self.message, self._close)

    def _close(self) -> None:
        self.dismiss()

    def message(self, text: Text | str) -> None:
        self.query_one("#picker-message", Static).update(text)

    def action_cancel(self) -> None:
        self.dismiss()

    def action_expand(self) -> None:
        item = self.selected()
        if isinstance(item, Node) and item.kind in ("turn", "plan_step", "phase"):
            spawn(self, partial(self._expand, item), group="expand")

    def action_collapse(self) -> None:
        item = self.selected()
        seq = item.seq if isinstance(item, Node) else None
        if isinstance(item, StepRow):
            seq = next(
                (k for k, v in self.steps.items() if isinstance(v, list) and item in v), None
            )
        if seq is not None and self.steps.pop(seq, None) is not None:
            self.refresh_list()
            ol = self.query_one("#picker-list", OptionList)
            index = _index_of(ol, f"n{seq}")
            if index is not None:
                ol.highlighted = index

    def action_edit(self) -> None:
        item = self.selected()
        if isinstance(item, Node):
            spawn(self, partial(self._edit, item), group="edit", exclusive=True)
        elif item is not None:  # an act-step
            self.message(Text("e edits a turn's message: pick the turn itself", style="yellow"))

    async def _edit(self, node: Node) -> None:
        """Open the message that started `node`'s turn, its old text in an input."""
        client = self.tui.client
        if client is None:
            self.message(Text("not connected", style="red"))
            return
        try:
            found = await message_of(client, node)
        except (ReyndError, ClientError) as exc:
            self.message(Text(f"cannot read the message: {exc.message}", style="red"))
            return
        if isinstance(found, str):
            self.message(Text(found, style="yellow"))
            return

        def answered(text: str | None) -> None:
            if text is None:
                self.message(Text("cancelled: nothing changed", style="dim"))
            elif not text.strip():
                self.message(Text("the message is empty: nothing changed", style="yellow"))
            else:
                self.tui.edit(found.seq, found.agent, text, self.message, self._close)

        # An edit abandons what followed the message: the dialog says what stays done.
        before = Target(seq=found.seq - 1, action="checkout", active=True)
        self.app.push_screen(EditScreen(found, partial(self.tui.dry_run, before)), answered)

    async def _expand(self, node: Node) -> None:
        steps = await self.steps_of(node)
        self.steps[node.seq] = steps
        if isinstance(steps, list):
            for s in steps:
                self.step_index[s.seq] = s
        self.refresh_list()

    async def preview_text(self, seq: int, width: int = 56) -> Text | None:
        """The state as of `seq` and its diff to the tip, or why they cannot be read."""
        client = self.tui.client
        if client is None:
            return Text("not connected", style="red")
        try:
            st = await client.state(seq=seq)
            diff = await client.diff(from_seq=seq, to_seq=self.tui.head, files=True)
        except ReyndError as exc:
            return Text(f"cannot read seq {seq}: {exc.message}", style="red")
        except ClientError as exc:
            return Text(exc.message, style="red")
        text = Text()
        text.append(f"as of seq {seq}\n", style="bold underline")
        text.append(render.state_text(st, PLAIN, width=width))
        text.append(f"\n\ndiff to the tip (seq {self.tui.head})\n", style="bold underline")
        text.append(render.diff_text(diff, PLAIN, width=width - 8))
        return text

    async def steps_of(self, node: Node) -> list[StepRow] | str:
        """The committed act-steps of the turn that `node` closes (state just before it)."""
        client = self.tui.client
        if client is None or not node.agent:
            return "not connected"
        try:
            st = await client.state(seq=node.seq - 1, agent=node.agent)
        except ReyndError as exc:
            return f"cannot read the steps: {exc.message}"
        except ClientError as exc:
            return exc.message
        state = st.agents.get(node.agent)
        if state is None or not state.pending_chains or not state.pending_chains[0].steps:
            return f"no act-steps of {node.agent} in flight before seq {node.seq}"
        chain = state.pending_chains[0]
        return [
            StepRow(
                agent=node.agent,
                step=memo.step,
                seq=memo.seq,
                summary=_step_summary(memo),
                active=node.active,
            )
            for memo in chain.steps
        ]


def _index_of(ol: OptionList, option_id: str) -> int | None:
    try:
        return ol.get_option_index(option_id)
    except Exception:  # OptionDoesNotExist
        return None


def _first_enabled(ol: OptionList) -> int | None:
    for i in range(ol.option_count):
        if not ol.get_option_at_index(i).disabled:
            return i
    return None

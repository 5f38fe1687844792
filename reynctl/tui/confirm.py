"""What a pick does (`Target`), and the dialog that asks before doing it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["ConfirmScreen", "Target", "noop_reason"]


@dataclass(frozen=True, slots=True)
class Target:
    """What a confirmed pick does: always named by seq, never by a list position."""

    seq: int
    action: Literal["checkout", "act_turn"]
    active: bool
    agent: str = ""
    step: int = 0
    branch: int = 0

    @property
    def mode(self) -> str:
        if self.action == "act_turn":
            return "act-turn rewind"
        return "undo" if self.active else "fork switch"

    @property
    def command(self) -> str:
        if self.action == "act_turn":
            return f"reynctl act-turn-rewind {self.agent} {self.seq}"
        return f"reynctl checkout {self.seq}"


def noop_reason(target: Target, head: int) -> str | None:
    """Why `target` would change nothing (it is the tip itself), or None when it would act."""
    if target.seq != head:
        return None
    return (
        f"seq {head} is already the tip (◀ you are here): {target.mode} to it "
        "would change nothing; nothing to do"
    )


# What a dry run of the pick says it cannot undo (issue 25), asked once the dialog shows.
Preview = Callable[[], Awaitable[Text]]


class ConfirmScreen(ModalScreen[bool]):
    """Asks before a checkout or act-turn rewind; the target is a fixed seq.

    With `preview`, the dialog also says what the move cannot undo, as soon as
    the daemon's dry run answers: the question does not wait for it.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "confirm"),
        Binding("n,escape", "answer(False)", "cancel"),
    ]

    def __init__(self, target: Target, head: int, preview: Preview | None = None) -> None:
        super().__init__()
        self.target = target
        self.head = head
        self._preview = preview

    def compose(self) -> ComposeResult:
        t = self.target
        if t.action == "act_turn":
            what = (
                f"act-turn rewind of {t.agent}'s turn to seq {t.seq} (after step {t.step}): "
                f"steps 0..{t.step} replay from their memos with no executor call, "
                "later steps run again."
            )
        elif t.active:
            what = (
                f"undo: the tip moves back from seq {self.head} to seq {t.seq}. The seqs after "
                f"{t.seq} become an abandoned branch, still reachable with checkout."
            )
        else:
            what = (
                f"fork switch: seq {t.seq} lies on abandoned branch {t.branch}; it becomes live "
                f"again and the current branch (tip {self.head}) is kept as an abandoned one."
            )
        body = Text()
        body.append(f"{t.mode}: seq {t.seq}\n\n", style="bold")
        body.append(what + "\n\n")
        body.append(
            "Every agent moves to its state as of that seq; turns in flight are cancelled.\n"
        )
        body.append(f"Same as `{t.command}`.", style="dim")
        keys = Text("Enter / y: confirm     Esc / n: cancel", style="bold")
        with Vertical(id="confirm-box"):
            yield Static(body, id="confirm-text")
            if self._preview is not None:
                waiting = Text("not undone: asking the daemon…", style="dim")
                yield Static(waiting, id="confirm-effects")
            yield Static(keys, id="confirm-keys")

    def on_mount(self) -> None:
        if self._preview is not None:
            self.run_worker(self._show(self._preview))

    async def _show(self, preview: Preview) -> None:
        self.query_one("#confirm-effects", Static).update(await preview())

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

"""What a pick does (`Target`), and the dialog that asks before doing it."""

from __future__ import annotations

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


class ConfirmScreen(ModalScreen[bool]):
    """Asks before a checkout or act-turn rewind; the target is a fixed seq."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "confirm"),
        Binding("n,escape", "answer(False)", "cancel"),
    ]

    def __init__(self, target: Target, head: int) -> None:
        super().__init__()
        self.target = target
        self.head = head

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
        body.append(f"Same as `{t.command}`.\n\n", style="dim")
        body.append("Enter / y: confirm     Esc / n: cancel", style="bold")
        with Vertical(id="confirm-box"):
            yield Static(body, id="confirm-text")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

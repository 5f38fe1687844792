"""What `reynctl bisect` prints: the checkpoint to test, and what the search found."""

from __future__ import annotations

from reynctl.bisect.results import Report, Step
from reynctl.render.diff import diff_text
from reynctl.render.formats import _plural, truncate
from reynctl.render.table import Style
from reynd.protocol import methods as m

__all__ = ["bisect_text", "checkpoint_line", "left_line", "step_line"]


def checkpoint_line(seq: int, g: m.Generation | None, turn: int | None = None) -> str:
    """`seq 57 (turn 6 of ada, branch 0): "label"` (without `turn`: `turn of ada`)."""
    if g is None:
        return f"seq {seq}"
    label = f': "{g.label}"' if g.label else ""
    if turn is None:
        which: str = g.kind
    elif g.kind == "turn":
        which = f"turn {turn}"
    else:
        which = f"{g.kind} in turn {turn}"
    return f"seq {seq} ({which} of {g.agent}, branch {g.branch}){label}"


def step_line(step: Step, left: int) -> str:
    """One step of `bisect run`, for stderr."""
    code = "" if step.exit_code is None else f" (exit {step.exit_code})"
    return f"seq {step.seq}: {step.verdict}{code}; {_plural(left, 'checkpoint')} left to test"


def left_line(left: int) -> str:
    """What the interactive form asks for next, for stderr."""
    return (
        f"{_plural(left, 'checkpoint')} left to test; then `reynctl bisect good`, `bad` or `skip`"
    )


def bisect_text(r: Report, style: Style, width: int = 60) -> str:
    """The first bad checkpoint, the message that started its turn, the diff to it."""
    tested = len(r.steps)
    skipped = sum(s.verdict == "skip" for s in r.steps)
    how = (
        f"{_plural(tested, 'step')} ({skipped} skipped) over {_plural(r.candidates, 'checkpoint')}"
    )
    if r.first_bad is None:
        seqs = ", ".join(str(s) for s in r.possible)
        return (
            style("the first bad checkpoint is one of seqs " + seqs, "bold")
            + f"\nthe checkpoints before the last could not be tested (skipped); {how}"
        )
    found = checkpoint_line(r.first_bad, r.checkpoint, r.turn)
    lines = [style("first bad checkpoint: ", "bold") + found]
    if r.message is not None:
        lines.append(f"  started by: {truncate(r.message, width)}")
    lines.append(f"  last good: seq {r.last_good}; {how}")
    if r.diff is not None:
        lines.append(diff_text(r.diff, style, width))
    return "\n".join(lines)

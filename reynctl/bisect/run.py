"""`reynctl bisect run`: test each probe in its own checkout until the search ends.

Reads only: state.get, workspace.tree/.blob, generations.list, state.diff. Nothing is
appended, the tip never moves, no executor is called; every checkout is removed, on
an error too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence

from reynctl.bisect.checkout import Checkouts
from reynctl.bisect.history import Range
from reynctl.bisect.results import Report, Step
from reynctl.bisect.search import Outcome, Verdict, next_probe, outcome, untested
from reynctl.client import Client
from reynd.protocol import methods as m

__all__ = ["BisectAborted", "environment", "report", "run_command", "verdict_of"]

SKIP_CODE = 125  # git bisect run's "cannot test this one"


class BisectAborted(Exception):
    """The command exited 128 or above, was killed (git's convention for "stop"), or
    could not be started."""


def verdict_of(code: int) -> Verdict:
    """git's convention: 0 good, 125 skip, 1..127 bad, anything else aborts."""
    if code == 0:
        return "good"
    if code == SKIP_CODE:
        return "skip"
    if 1 <= code <= 127:
        return "bad"
    how = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
    raise BisectAborted(
        f"the command {how}: 128 and above (and signals) stop a bisect, as in git; "
        "exit 125 to skip a checkpoint that cannot be tested"
    )


def environment(seq: int, state_file: os.PathLike[str]) -> dict[str, str]:
    """The variables a test sees: REYN_SEQ, REYN_STATE (the state file's path)."""
    return {**os.environ, "REYN_SEQ": str(seq), "REYN_STATE": os.fspath(state_file)}


def run_command(
    c: Client,
    span: Range,
    cmd: Sequence[str],
    agent: str | None,
    on_step: Callable[[Step, int], None],
) -> tuple[Outcome, list[Step]]:
    """Test probes until the search ends; `on_step(step, left)` after each (progress)."""
    verdicts: dict[int, Verdict] = {}
    steps: list[Step] = []
    checkouts = Checkouts(c, agent)
    try:
        while (seq := next_probe(span.candidates, verdicts)) is not None:
            work, state_file = checkouts.make(seq)
            try:
                # The command's output is not ours: stdout stays for the result.
                env = environment(seq, state_file)
                code = subprocess.run(
                    list(cmd), check=False, cwd=work, env=env, stdout=sys.stderr
                ).returncode
            except OSError as exc:  # not found, not executable
                raise BisectAborted(f"cannot run {cmd[0]!r}: {exc.strerror}") from None
            finally:
                checkouts.remove(work)
            step = Step(seq=seq, verdict=verdict_of(code), exit_code=code)
            verdicts[seq] = step.verdict
            steps.append(step)
            on_step(step, len(untested(span.candidates, verdicts)))
    finally:
        checkouts.close()
    return outcome(span.candidates, verdicts), steps


def report(c: Client, span: Range, found: Outcome, steps: list[Step]) -> Report:
    """The result: the first bad checkpoint, what started its turn, the diff to it."""
    last_good = span.good if found.last_good is None else found.last_good
    out = Report(
        good=span.good,
        bad=span.bad,
        candidates=len(span.candidates),
        steps=steps,
        first_bad=found.first_bad,
        possible=list(found.possible),
        last_good=last_good,
        status="found" if found.first_bad is not None else "ambiguous",
    )
    if found.first_bad is None:
        return out
    out.checkpoint = span.generations.get(found.first_bad)
    params = m.DiffParams(from_seq=last_good, to_seq=found.first_bad, files=True)
    out.diff = c.call("state.diff", params, m.DiffResult).value
    agent = out.checkpoint.agent if out.checkpoint else None
    if out.checkpoint is not None:
        out.turn = _turn(c, out.checkpoint)
    for name, conv in sorted(out.diff.conversations.items()):
        if agent in (None, name):
            user = [msg.content for msg in conv.added if msg.role == "user"]
            if user:
                out.message = user[0]
                break
    return out


def _turn(c: Client, g: m.Generation) -> int | None:
    """Which turn of its agent checkpoint `g` ends (a turn's) or lies in (any other)."""
    st = c.call("state.get", m.StateParams(seq=g.seq, agent=g.agent), m.StateResult).value
    agent = st.agents.get(g.agent)
    if agent is None:
        return None
    return agent.turns_completed + (g.kind != "turn")

"""The replay debugger: read-only walk, seek and compare over the audit log (pure).

Everything here is computed from audit lines alone, never from the WAL, so it
keeps working for seqs whose WAL retention has collected. The state as of a
seq is `reynd.core.reduce.apply` over the audit events of that seq's lineage,
the lineage itself being given by the reset records the audit log holds.
Seqs of that lineage that the audit log does not hold (recorded before it
existed, removed by its retention, lost in a crash) are reported as
`missing`, never guessed.
"""

from __future__ import annotations

import difflib
import json
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from reynd.audit.record import RUN_STARTED, RUN_STOPPED, AuditLine, preview, to_api
from reynd.core.diff import diff_values
from reynd.core.lineage import Lineage
from reynd.core.reduce import apply
from reynd.protocol import audit_methods as am
from reynd.protocol import events as ev
from reynd.protocol.state import RuntimeState

__all__ = ["History", "Sequenced", "changes_between", "compare", "fork_seq", "walk"]

Range = list[int]  # [first, last]
Interval = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Sequenced:
    """An audit line with the run it belongs to."""

    run: str
    line: AuditLine


class History:
    """Every audit line on disk, indexed by run and by seq."""

    def __init__(self, runs: dict[str, list[AuditLine]]) -> None:
        self.runs = dict(sorted(runs.items()))
        self.by_seq: dict[int, Sequenced] = {}
        resets: dict[int, int] = {}
        for run, lines in self.runs.items():
            for line in lines:
                if line.event is None:
                    continue
                self.by_seq[line.seq] = Sequenced(run, line)
                if isinstance(line.event, ev.Rewind):
                    resets[line.seq] = line.event.target_n
        self.max_seq = max(self.by_seq, default=0)
        self.resets = sorted(resets.items())
        self._lineage_head = -1
        self._lineage = Lineage()

    # -- lookup -------------------------------------------------------------------------

    def line_at(self, run: str, index: int) -> AuditLine | None:
        lines = self.runs.get(run, [])
        pos = self.position(run, index)
        return lines[pos] if pos < len(lines) and lines[pos].i == index else None

    def position(self, run: str, index: int) -> int:
        """Position in the run's list of the first line with i >= index."""
        return bisect_left(self.runs.get(run, []), index, key=lambda line: line.i)

    def lineage(self, head: int) -> Lineage:
        """The lineage of a log 1..head with the audit log's reset records."""
        head = max(head, self.max_seq)
        if head != self._lineage_head:
            self._lineage = Lineage.restore(self.resets, head)
            self._lineage_head = head
        return self._lineage

    def branch_tip(self, branch: int) -> int | None:
        """The highest recorded seq on `branch`."""
        tips = [s for s, item in self.by_seq.items() if item.line.branch == branch]
        return max(tips, default=None)

    # -- reconstruction -----------------------------------------------------------------------

    def lineage_seqs(self, seq: int) -> list[Interval]:
        """lineage(seq) minus genesis, ascending intervals."""
        if seq <= 0:
            return []
        return list(reversed(self.lineage(seq).intervals(seq)))

    def state_as_of(self, seq: int) -> tuple[RuntimeState, list[Range]]:
        """The state as of `seq` and the seqs of its lineage the audit log lacks."""
        state = RuntimeState()
        missing: list[Range] = []
        for lo, hi in self.lineage_seqs(seq):
            for s in range(lo, hi + 1):
                item = self.by_seq.get(s)
                if item is None:
                    _add_missing(missing, s)
                    continue
                assert item.line.event is not None
                apply(state, item.line.event)
        state.seq = seq
        return state, missing

    def lineage_items(self, seq: int) -> list[Sequenced]:
        """The recorded events of lineage(seq), ascending, reset records left out."""
        out = []
        for lo, hi in self.lineage_seqs(seq):
            for s in range(lo, hi + 1):
                item = self.by_seq.get(s)
                if item is not None and not isinstance(item.line.event, ev.Rewind):
                    out.append(item)
        return out

    def run_items(self, run: str) -> list[Sequenced]:
        """The run's events in recorded order (its start and stop lines left out)."""
        return [
            Sequenced(run, line)
            for line in self.runs.get(run, [])
            if line.kind not in (RUN_STARTED, RUN_STOPPED)
        ]


def _add_missing(missing: list[Range], s: int) -> None:
    if missing and missing[-1][1] == s - 1:
        missing[-1] = [missing[-1][0], s]
    else:
        missing.append([s, s])


def _merge(into: list[Range], more: Iterable[Range]) -> None:
    for r in more:
        if r not in into:
            into.append(r)
    into.sort()


# -- changes -------------------------------------------------------------------------------


def _briefs(before: Any, after: Any) -> list[am.ChangeBrief]:
    out = []
    for where, kind, b, a in diff_values(before, after):
        path, op = where or "/", kind
        if not where:
            op = "add" if before is None else "remove" if after is None else kind
        out.append(
            am.ChangeBrief(
                path=path,
                op=op,  # type: ignore[arg-type]
                before=None if b is None else preview(b),
                after=None if a is None else preview(a),
            )
        )
    return out


def changes_between(
    before: RuntimeState, after: RuntimeState, agents: Iterable[str] | None = None
) -> dict[str, list[am.ChangeBrief]]:
    """Per agent, how `after` differs from `before` (every agent when `agents` is None)."""
    names = sorted(before.agents.keys() | after.agents.keys()) if agents is None else agents
    out = {}
    for name in names:
        b, a = before.agents.get(name), after.agents.get(name)
        briefs = _briefs(
            None if b is None else msgspec.to_builtins(b),
            None if a is None else msgspec.to_builtins(a),
        )
        if briefs:
            out[name] = briefs
    return out


def _cap(
    changes: dict[str, list[am.ChangeBrief]], limit: int
) -> tuple[dict[str, list[am.ChangeBrief]], int]:
    more = 0
    out = {}
    for name, briefs in changes.items():
        out[name] = briefs[:limit]
        more += max(len(briefs) - limit, 0)
    return out, more


# -- walk ----------------------------------------------------------------------------------


def walk(
    history: History,
    run: str,
    *,
    index: int,
    limit: int,
    agent: str | None,
    changes_limit: int,
) -> am.ReplayWalkResult:
    """Up to `limit` steps of `run` from `index`, each with what it changed."""
    lines = history.runs.get(run, [])
    steps: list[am.WalkStep] = []
    missing: list[Range] = []
    state: RuntimeState | None = None
    next_index = None
    for line in lines[history.position(run, index) :]:
        wanted = agent is None or line.agent == agent
        if wanted and len(steps) == limit:
            next_index = line.i
            break
        changes: dict[str, list[am.ChangeBrief]] = {}
        event = line.event
        if event is not None:
            if state is None or state.seq != line.seq - 1:
                state, gaps = history.state_as_of(line.seq - 1)
                _merge(missing, gaps)
            if isinstance(event, ev.Rewind):
                after, gaps = history.state_as_of(event.target_n)
                _merge(missing, gaps)
                if wanted:
                    changes = changes_between(state, after, None if agent is None else [agent])
                state = after
            elif isinstance(event, ev.AgentEvent) and wanted:
                name = event.agent
                before = state.agents.get(name)
                before_b = None if before is None else msgspec.to_builtins(before)
                apply(state, event)
                now = state.agents.get(name)
                briefs = _briefs(before_b, None if now is None else msgspec.to_builtins(now))
                if briefs:
                    changes = {name: briefs}
            else:
                apply(state, event)
            state.seq = line.seq
        if not wanted:
            continue
        capped, more = _cap(changes, changes_limit)
        steps.append(am.WalkStep(event=to_api(run, line), changes=capped, more_changes=more))
    return am.ReplayWalkResult(
        run=run, steps=steps, next_index=next_index, complete=not missing, missing=missing
    )


# -- compare -------------------------------------------------------------------------------


def _content(line: AuditLine, ignore: frozenset[str]) -> dict[str, Any]:
    if line.reset is not None:
        return {"kind": line.kind, "mode": line.reset.mode}
    data: dict[str, Any] = msgspec.to_builtins(line.event) if line.event is not None else {}
    return {k: v for k, v in data.items() if k not in ignore}


def _signature(content: dict[str, Any]) -> str:
    return json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)


def fork_seq(history: History, a: int, b: int) -> int:
    """The last seq lineage(a) and lineage(b) share."""
    lineage = history.lineage(max(a, b))
    best = 0
    for lo_a, hi_a in lineage.intervals(a) if a > 0 else []:
        for lo_b, hi_b in lineage.intervals(b) if b > 0 else []:
            lo, hi = max(lo_a, lo_b), min(hi_a, hi_b)
            if lo <= hi:
                best = max(best, hi)
    return best


def compare(
    history: History,
    a_items: Sequence[Sequenced],
    b_items: Sequence[Sequenced],
    *,
    ignore: Iterable[str],
    from_step: int,
    limit: int,
    include_same: bool,
) -> tuple[list[am.CompareStep], int, int, int | None, int | None]:
    """Align two event sequences step by step (difflib over content signatures).

    Returns (page of steps, total steps, same steps, first divergence, next step).
    """
    skip = frozenset(ignore) | {"seq", "ts"}
    ca = [_content(i.line, skip) for i in a_items]
    cb = [_content(i.line, skip) for i in b_items]
    sa = [_signature(c) for c in ca]
    sb = [_signature(c) for c in cb]
    prefix = 0
    while prefix < min(len(sa), len(sb)) and sa[prefix] == sb[prefix]:
        prefix += 1
    aligned: list[tuple[str, int | None, int | None]] = [("same", k, k) for k in range(prefix)]
    matcher = difflib.SequenceMatcher(None, sa[prefix:], sb[prefix:], autojunk=False)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        i1, i2, j1, j2 = a1 + prefix, a2 + prefix, b1 + prefix, b2 + prefix
        if tag == "equal":
            aligned += [("same", i1 + k, j1 + k) for k in range(i2 - i1)]
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        aligned += [("changed", i1 + k, j1 + k) for k in range(paired)]
        aligned += [("only_a", k, None) for k in range(i1 + paired, i2)]
        aligned += [("only_b", None, k) for k in range(j1 + paired, j2)]
    same = sum(1 for op, _, _ in aligned if op == "same")
    first = next((k for k, (op, _, _) in enumerate(aligned) if op != "same"), None)
    steps: list[am.CompareStep] = []
    next_step = None
    for k in range(from_step, len(aligned)):
        op, ia, ib = aligned[k]
        if op == "same" and not include_same:
            continue
        if len(steps) == limit:
            next_step = k
            break
        fields = []
        if op == "changed" and ia is not None and ib is not None:
            for path, _, va, vb in diff_values(ca[ia], cb[ib]):
                fields.append(
                    am.FieldDiff(
                        path=path or "/",
                        a=None if va is None else preview(va),
                        b=None if vb is None else preview(vb),
                    )
                )
        steps.append(
            am.CompareStep(
                step=k,
                op=op,  # type: ignore[arg-type]
                a=None if ia is None else to_api(a_items[ia].run, a_items[ia].line),
                b=None if ib is None else to_api(b_items[ib].run, b_items[ib].line),
                fields=fields,
            )
        )
    return steps, len(aligned), same, first, next_step

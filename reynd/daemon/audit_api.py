"""events.* and replay.*: the read-only time-travel debugging layer over the audit log.

Every handler reads the audit EventStore (after flushing what is buffered)
and computes on a worker thread. None of them appends to the WAL, takes the
write gate or touches the runtime: the tip never moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio

from reynd.audit.files import run_started_at
from reynd.audit.record import RUN_STARTED, RUN_STOPPED, AuditLine, to_api
from reynd.audit.replay import History, Sequenced, changes_between, compare, fork_seq, walk
from reynd.audit.store import EventStore
from reynd.daemon.context import CallContext
from reynd.daemon.rpc import Handler
from reynd.protocol import audit_methods as am
from reynd.protocol import errors

__all__ = ["AuditApi"]

T = TypeVar("T")


def _cursor(text: str) -> tuple[str, int]:
    run, sep, index = text.rpartition(":")
    if not sep or not run or not index.isdigit():
        raise errors.InvalidParams(
            f"cursor {text!r} is not a next_cursor of events.list (RUN:INDEX)",
            {"field": "cursor", "reason": "not RUN:INDEX"},
        )
    return run, int(index)


class AuditApi:
    def __init__(self, events: EventStore, head: Callable[[], int]) -> None:
        """`events`: this run's audit log; `head`: the WAL's tip, which bounds a seq asked for."""
        self._events = events
        self._head = head

    def handlers(self) -> dict[str, Handler]:
        return {
            "events.runs": self._runs,
            "events.list": self._list,
            "events.get": self._get,
            "replay.walk": self._walk,
            "replay.seek": self._seek,
            "replay.compare": self._compare,
        }

    # -- helpers -------------------------------------------------------------------------

    def _known_run(self, run: str) -> str:
        if run not in self._events.runs():
            raise errors.UnknownRun(
                f"no run {run!r} in the audit log: `reynctl events --runs` lists them",
                {"run": run},
            )
        return run

    def _check_seq(self, seq: int) -> int:
        head = self._head()
        if seq > head:
            raise errors.SeqOutOfRange(
                f"seq {seq} is above the tip {head}", {"seq": seq, "head": head}
            )
        return seq

    async def _history(self, runs: set[str] | None = None) -> History:
        loaded = await self._events.load(runs)
        return await trio.to_thread.run_sync(History, loaded.runs)

    @staticmethod
    async def _off_loop(fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn)

    def _point_line(self, history: History, run: str, index: int) -> AuditLine:
        line = history.line_at(run, index)
        if line is None:
            raise errors.EventNotFound(
                f"run {run} has no event at index {index} "
                "(beyond its end, or removed by audit retention)",
                {"run": run, "index": index},
            )
        return line

    @staticmethod
    def _one_of(
        run: str | None, index: int | None, seq: int | None, *, run_alone: bool = False
    ) -> None:
        by_seq = seq is not None
        by_index = index is not None
        if by_seq and (run is not None or by_index):
            raise errors.InvalidParams(
                "give either seq, or run and index, not both",
                {"field": "seq", "reason": "seq excludes run/index"},
            )
        if by_index and run is None:
            raise errors.InvalidParams(
                "index needs run", {"field": "run", "reason": "index is an index in a run"}
            )
        if not by_seq and not by_index and not (run_alone and run is not None):
            raise errors.InvalidParams(
                "give seq, or run and index", {"field": "seq", "reason": "no point given"}
            )

    # -- events.* --------------------------------------------------------------------------

    async def _runs(self, p: am.EventsRunsParams, ctx: CallContext) -> am.EventsRunsResult:
        store = self._events
        loaded = await store.load()
        files = store.files()
        out = []
        for run in store.runs():
            lines = loaded.runs.get(run, [])
            seqs = [line.seq for line in lines if line.event is not None]
            started = next((line.ts for line in lines if line.kind == RUN_STARTED), None)
            mine = [f for f in files if f.run == run]
            out.append(
                am.RunSummary(
                    run=run,
                    current=run == store.run_id,
                    started_at=started if started is not None else run_started_at(run),
                    first_index=lines[0].i if lines else 0,
                    events=len(lines),
                    first_seq=min(seqs, default=None),
                    last_seq=max(seqs, default=None),
                    files=len(mine),
                    bytes=sum(f.size for f in mine),
                    stopped=any(line.kind == RUN_STOPPED for line in lines),
                )
            )
        return am.EventsRunsResult(runs=out, current=store.run_id, directory=str(store.directory))

    async def _list(self, p: am.EventsListParams, ctx: CallContext) -> am.EventsListResult:
        start = _list_start(p)
        if p.run is not None:
            self._known_run(p.run)
        loaded = await self._events.load(None if p.run is None else {p.run})
        kinds = set(p.kind)
        events: list[am.AuditEvent] = []
        next_cursor = None
        for run in sorted(loaded.runs):
            if start is not None and run < start[0]:
                continue
            for line in loaded.runs[run]:
                if start is not None and run == start[0] and line.i < start[1]:
                    continue
                if not _matches(p, kinds, line):
                    continue
                if len(events) == p.limit:
                    next_cursor = f"{run}:{line.i}"
                    break
                events.append(to_api(run, line))
            if next_cursor is not None:
                break
        return am.EventsListResult(events=events, next_cursor=next_cursor)

    async def _get(self, p: am.EventsGetParams, ctx: CallContext) -> am.AuditEvent:
        self._one_of(p.run, p.index, p.seq)
        if p.seq is not None:
            seq = self._check_seq(p.seq)
            history = await self._history()
            item = history.by_seq.get(seq)
            if item is None:
                raise errors.EventNotFound(
                    f"the audit log holds no event with seq {seq} (recorded before it existed, "
                    "removed by audit retention, or lost in a crash)",
                    {"seq": seq},
                )
            return to_api(item.run, item.line)
        assert p.run is not None and p.index is not None
        run = self._known_run(p.run)
        history = await self._history({run})
        return to_api(run, self._point_line(history, run, p.index))

    # -- replay.* --------------------------------------------------------------------------

    async def _walk(self, p: am.ReplayWalkParams, ctx: CallContext) -> am.ReplayWalkResult:
        run = self._known_run(p.run if p.run is not None else self._events.run_id)
        history = await self._history()
        return await self._off_loop(
            lambda: walk(
                history,
                run,
                index=p.index,
                limit=p.limit,
                agent=p.agent,
                changes_limit=p.changes_limit,
            )
        )

    async def _seek(self, p: am.ReplaySeekParams, ctx: CallContext) -> am.ReplaySeekResult:
        self._one_of(p.run, p.index, p.seq)
        run: str | None = None
        index: int | None = None
        if p.seq is not None:
            seq = self._check_seq(p.seq)
            history = await self._history()
        else:
            assert p.run is not None and p.index is not None
            run, index = self._known_run(p.run), p.index
            history = await self._history()
            seq = self._point_line(history, run, index).seq
        state, missing = await self._off_loop(lambda: history.state_as_of(seq))
        agents = state.agents
        if p.agent is not None:
            if p.agent not in agents:
                raise errors.UnknownAgent(
                    f"no agent {p.agent!r} as of seq {seq} in the audit log",
                    {"agent": p.agent, "seq": seq},
                )
            agents = {p.agent: agents[p.agent]}
        item = history.by_seq.get(seq)
        branch = item.line.branch if item is not None else history.lineage(seq).branch_of(seq)
        return am.ReplaySeekResult(
            seq=seq,
            branch=branch,
            run=run if run is not None else (item.run if item is not None else None),
            index=index if index is not None else (item.line.i if item is not None else None),
            agents=agents,
            complete=not missing,
            missing=missing,
        )

    def _side(
        self, history: History, point: am.Point, name: str
    ) -> tuple[list[Sequenced], am.PointInfo, int | None, bool]:
        """(events, info, end seq, lineage-based) of one side of a comparison."""
        given = [k for k in ("seq", "branch") if getattr(point, k) is not None]
        if point.run is not None and point.index is None and not given:
            run = self._known_run(point.run)
            items = history.run_items(run)
            seqs = [i.line.seq for i in items]
            end = max(seqs) if seqs else None
            label = f"run {run}"
            return items, am.PointInfo(label=label, seq=end, branch=None, events=0), end, False
        if point.branch is not None:
            if point.run is not None or point.index is not None or point.seq is not None:
                raise errors.InvalidParams(
                    f"{name}: branch excludes run, index and seq",
                    {"field": f"{name}.branch", "reason": "branch excludes the others"},
                )
            tip = history.branch_tip(point.branch)
            if tip is None:
                raise errors.EventNotFound(
                    f"{name}: the audit log holds no event on branch {point.branch}",
                    {"branch": point.branch},
                )
            seq, label = tip, f"branch {point.branch} (tip {tip})"
        else:
            try:
                self._one_of(point.run, point.index, point.seq)
            except errors.InvalidParams as exc:
                raise errors.InvalidParams(
                    f"{name}: {exc.message}, or branch, or run alone",
                    {"field": name, "reason": exc.message},
                ) from None
            if point.seq is not None:
                seq = self._check_seq(point.seq)
                label = f"seq {seq}"
            else:
                assert point.run is not None and point.index is not None
                run = self._known_run(point.run)
                seq = self._point_line(history, run, point.index).seq
                label = f"run {run} index {point.index} (seq {seq})"
        item = history.by_seq.get(seq)
        branch = item.line.branch if item is not None else None
        items = history.lineage_items(seq)
        return items, am.PointInfo(label=label, seq=seq, branch=branch, events=0), seq, True

    async def _compare(self, p: am.ReplayCompareParams, ctx: CallContext) -> am.ReplayCompareResult:
        history = await self._history()
        a_items, a_info, a_end, a_lin = self._side(history, p.a, "a")
        b_items, b_info, b_end, b_lin = self._side(history, p.b, "b")
        if p.agent is not None:
            a_items = [i for i in a_items if i.line.agent == p.agent]
            b_items = [i for i in b_items if i.line.agent == p.agent]
        a_info.events, b_info.events = len(a_items), len(b_items)

        def work() -> am.ReplayCompareResult:
            steps, total, same, first, next_step = compare(
                history,
                a_items,
                b_items,
                ignore=p.ignore,
                from_step=p.from_step,
                limit=p.limit,
                include_same=p.include_same,
            )
            missing = False
            state = {}
            if a_end is not None and b_end is not None:
                sa, gaps_a = history.state_as_of(a_end)
                sb, gaps_b = history.state_as_of(b_end)
                missing = bool(gaps_a or gaps_b)
                state = changes_between(sa, sb, None if p.agent is None else [p.agent])
            fork = (
                fork_seq(history, a_end, b_end)
                if a_lin and b_lin and a_end is not None and b_end is not None
                else None
            )
            return am.ReplayCompareResult(
                a=a_info,
                b=b_info,
                steps_total=total,
                same=same,
                diverged=first is not None,
                first_divergence=first,
                fork_seq=fork,
                steps=steps,
                next_step=next_step,
                state=state,
                complete=not missing,
            )

        return await self._off_loop(work)


def _matches(p: am.EventsListParams, kinds: set[str], line: AuditLine) -> bool:
    """Does `line` pass events.list's filters (agent, kind, branch, seq range)?"""
    if p.agent is not None and line.agent != p.agent:
        return False
    if kinds and line.kind not in kinds:
        return False
    if p.branch is not None and line.branch != p.branch:
        return False
    if p.from_seq is not None and line.seq < p.from_seq:
        return False
    return p.to_seq is None or line.seq <= p.to_seq


def _list_start(p: am.EventsListParams) -> tuple[str, int] | None:
    """(run, index) where events.list resumes: its cursor's, which must be of `p.run`."""
    if p.cursor is None:
        return None
    start = _cursor(p.cursor)
    if p.run is not None and start[0] != p.run:
        raise errors.InvalidParams(
            f"cursor {p.cursor!r} belongs to run {start[0]}, not {p.run}",
            {"field": "cursor", "reason": "cursor of another run"},
        )
    return start

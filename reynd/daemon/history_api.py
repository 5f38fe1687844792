"""`generations.list` and `branches.list`: the checkpoints and branches a rewind can reach."""

from __future__ import annotations

from reynd.daemon.addresses import Addresses
from reynd.daemon.context import CallContext
from reynd.daemon.rpc import Handler
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.storage.store import Store

__all__ = ["HistoryApi"]


class HistoryApi:
    def __init__(self, store: Store, addresses: Addresses) -> None:
        self._store = store
        self._addresses = addresses

    def handlers(self) -> dict[str, Handler]:
        return {"generations.list": self._generations, "branches.list": self._branches}

    async def _generations(self, p: m.GenerationsParams, ctx: CallContext) -> m.GenerationsResult:
        store = self._store
        if (
            p.agent is not None
            and p.agent not in store.state.agents
            and not store.catalog.knows_agent(p.agent)
        ):
            raise errors.UnknownAgent(
                f"no agent {p.agent!r}: see `reynctl show` for agents", {"agent": p.agent}
            )
        out: list[m.Generation] = []
        next_cursor: int | None = None
        at_least, cursor = self._time_bounds(p)
        if p.lineage is not None:
            store.plan(p.lineage)  # seq_out_of_range / below_floor, as for a read as of it
        it = store.generations(
            agent=p.agent,
            kind=p.kind,
            all_branches=p.all_branches,
            cursor=cursor,
            at_least=at_least,
            lineage=p.lineage,
        )
        for entry, active, branch in it:
            if len(out) == p.limit:
                next_cursor = out[-1].seq
                break
            out.append(
                m.Generation(
                    seq=entry.seq,
                    kind=entry.kind,
                    agent=entry.agent,
                    active=active,
                    branch=branch,
                    created_at=entry.created_at,
                    label=entry.label,
                    tags=store.tags.naming(entry.seq),
                )
            )
        return m.GenerationsResult(generations=out, next_cursor=next_cursor)

    def _time_bounds(self, p: m.GenerationsParams) -> tuple[int, int | None]:
        """(at_least, cursor): `after` and `before` as seq bounds (two bisects), with `cursor`."""
        after = None if p.after is None else self._addresses.time(p.after, "after")
        before = None if p.before is None else self._addresses.time(p.before, "before")
        at_least, below = self._store.timeline.seq_bounds(after, before)
        if below is None or p.cursor is None:
            return at_least, p.cursor if below is None else below
        return at_least, min(below, p.cursor)

    async def _branches(self, params: m.BranchesParams, ctx: CallContext) -> m.BranchesResult:
        lineage = self._store.lineage
        by_branch: dict[int, list[str]] = {}
        for tag in self._store.tags.all():  # by name: each branch's list stays sorted
            by_branch.setdefault(lineage.branch_of(tag.target), []).append(tag.name)
        return m.BranchesResult(
            branches=[
                m.BranchInfo(
                    id=b.id,
                    origin_seq=b.origin_seq,
                    parent=b.parent,
                    tip=b.tip,
                    active=b.active,
                    tags=by_branch.get(b.id, []),
                )
                for b in lineage.branches()
            ],
            head=lineage.head,
        )

"""What a bisect searches: the checkpoints on lineage(bad) above good (reads only)."""

from __future__ import annotations

from dataclasses import dataclass

from reynctl.client import Client
from reynd.protocol import methods as m

__all__ = ["NotAncestor", "Range", "checkpoints"]


class NotAncestor(ValueError):
    """The good seq does not lie below the bad one on the bad one's lineage."""


@dataclass(frozen=True, slots=True)
class Range:
    good: int
    bad: int
    candidates: tuple[int, ...]  # ascending, ending with `bad`
    generations: dict[int, m.Generation]  # what generations.list says of each candidate


def checkpoints(
    c: Client,
    good: tuple[int | None, str | None],
    bad: tuple[int | None, str | None],
    agent: str | None,
) -> Range:
    """The checkpoints (of `agent`, or all) on lineage(bad) with good < seq < bad, then bad.

    `good` and `bad` are each a (seq, tag) with one of them given. Refuses, saying what
    to do, a good seq that is not below the bad one on its lineage.
    """
    params = m.DiffParams(from_seq=good[0], from_tag=good[1], to_seq=bad[0], to_tag=bad[1])
    ends = c.call("state.diff", params, m.DiffResult).value
    return _between(c, ends.from_seq, ends.to_seq, ends.fork, agent)


def _between(c: Client, good: int, bad: int, fork: int | None, agent: str | None) -> Range:
    if fork != good or good == bad:
        raise NotAncestor(
            f"seq {good} is not below seq {bad} on its lineage (they fork at seq {fork}): "
            "give a --good older than --bad, on the bad one's branch or one it forked from "
            "(see `reynctl branches`)"
        )
    found: dict[int, m.Generation] = {}
    cursor: int | None = bad + 1
    while cursor is not None:
        params = m.GenerationsParams(agent=agent, lineage=bad, cursor=cursor, limit=1000)
        page = c.call("generations.list", params, m.GenerationsResult).value
        for g in page.generations:
            if g.seq <= good:
                cursor = None
                break
            found[g.seq] = g
        else:
            cursor = page.next_cursor
    seqs = tuple(sorted(s for s in found if s != bad))
    return Range(good, bad, (*seqs, bad), found)

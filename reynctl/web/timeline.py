"""The timeline as the page gets it: every branch's lanes (reynctl.web.lanes), kept per head.

A change to what the timeline shows appends a record (a turn, a reset, a tag),
and GC moves the floor: so (head, floor) names a layout. After appends and
resets (the same tags and floor) only the generations above the last head are
listed again: the older ones are what they were but for which lie on the
active lineage, redone where it moved (listing 20 pages of them took most of
the time). After appends alone the layout grows on top (`grown`); after resets
too, it is placed again from the top only as far as the reset changed it
(reynctl.web.relayout); after anything else, or when the cutoff moves, it is
laid out again.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from reynctl.aio import AsyncClient
from reynctl.tui.graph import lineage_intervals
from reynctl.web.body import CHUNK, Body
from reynctl.web.lanes import lanes, node_row
from reynctl.web.relayout import lineage_changes, relaid
from reynd.protocol import methods as m
from reynd.protocol import moves as mv
from reynd.protocol import tag_methods as t

__all__ = [
    "BLOCK",
    "MAX_GENERATIONS",
    "Lists",
    "Timeline",
    "grown",
    "layout",
    "read_lists",
    "reflagged",
]

MAX_GENERATIONS = 20_000  # at least the newest this many are drawn (the page says how many)
BLOCK = 4096  # ... back to a seq that is a multiple of this
PAGE = 1000  # generations.list's largest page


@dataclass(frozen=True, slots=True)
class Lists:
    """What a layout is made of, as the daemon listed it."""

    head: int
    floor: int
    branches: list[m.BranchInfo]
    tags: list[t.TagInfo]
    generations: list[m.Generation]  # newest first, those above `cutoff`
    cutoff: int  # generations at or below it are left out (see `cutoff`)
    truncated: bool  # some are
    moves: dict[int, mv.ReflogEntry]  # each reset record's reflog entry, by seq

    def grows_into(self, other: Lists) -> bool:
        """True when `other` only adds records above this head (appends, resets): the same
        floor and tags, this one's branches (whichever holds the tip) and newer ones."""
        old = [_shape(b) for b in self.branches]
        return (
            self.floor == other.floor
            and self.tags == other.tags
            and [_shape(b) for b in other.branches[: len(old)]] == old
            and all(b.id > self.head for b in other.branches[len(old) :])
        )

    def same_tree(self, other: Lists) -> bool:
        """True when `other` only adds records above this head on the branch of the tip."""
        return (
            self.grows_into(other)
            and len(self.branches) == len(other.branches)
            and [b.active for b in self.branches] == [b.active for b in other.branches]
        )


def _shape(b: m.BranchInfo) -> tuple[Any, ...]:
    return (b.id, b.origin_seq, b.parent, b.tags)


def reflagged(
    newest_first: list[m.Generation], changes: Sequence[tuple[int, int, bool]]
) -> list[m.Generation]:
    """`newest_first` with the active flag of each generation in a range of `changes`
    (`lineage_changes`: lo, hi, on the new lineage) set: a bisect per range."""
    out = list(newest_first)
    for lo, hi, active in changes:
        a = bisect.bisect_left(out, -hi, key=_descending)
        b = bisect.bisect_right(out, -lo, key=_descending)
        for i in range(a, b):
            if out[i].active != active:
                out[i] = msgspec.structs.replace(out[i], active=active)
    return out


def _descending(g: m.Generation) -> int:
    return -g.seq


def cutoff(newest_first: list[m.Generation], most: int, block: int) -> int:
    """The seq at or below which generations are left out: none when there are at most
    `most`, else the highest multiple of `block` below the `most`-th newest.

    Rounded, so that it stays put while the tip grows by less than a block: the
    rows already laid out then keep their lanes, and a new turn only adds rows on
    top (`grown`). The list must hold at least the newest `most`.
    """
    if len(newest_first) <= most:
        return 0
    return (newest_first[most - 1].seq - 1) // block * block


async def read_lists(
    client: AsyncClient,
    floor: int,
    before: Lists | None = None,
    *,
    most: int = MAX_GENERATIONS,
    block: int = BLOCK,
) -> tuple[Lists, list[m.Generation] | None]:
    """The lists of the daemon's timeline now, from `before`'s where they still hold; and
    the generations above `before`'s head when the rest of the lists is `before`'s and
    the cutoff has not moved (else None: lay it all out again)."""
    got: dict[str, Any] = {}

    async def ask(name: str, call: Awaitable[Any]) -> None:
        got[name] = await call

    async with anyio.create_task_group() as tg:  # three round trips at once
        tg.start_soon(ask, "branches", client.branches())
        tg.start_soon(ask, "tags", client.tags())
        if before is not None:  # most often needed; else a small page read for nothing
            tg.start_soon(ask, "newer", _generations_above(client, before.head))
    branches, tags = got["branches"], got["tags"].tags
    now = Lists(branches.head, floor, branches.branches, tags, [], 0, False, {})
    if before is not None and before.grows_into(now):
        # Only records above `before`'s head are new: its generations are still theirs,
        # but for which lie on the active lineage after a reset.
        # Those above the head listed came after it (the lists raced a write): next time.
        newer: list[m.Generation] = [g for g in got["newer"] if g.seq <= now.head]
        old, moves = before.generations, before.moves
        if not before.same_tree(now):  # resets: the active lineage moved
            was, now_on = (lineage_intervals(x.head, x.branches) for x in (before, now))
            old = reflagged(old, lineage_changes(was, now_on))
            moves = {**moves, **await _moves(client, above=before.head)}
        gens = newer + old
        cut = max(before.cutoff, cutoff(gens, most, block))
        kept = [g for g in gens if g.seq > cut] if cut > before.cutoff else gens
        truncated = before.truncated or len(kept) < len(gens)
        lists = Lists(now.head, floor, now.branches, tags, kept, cut, truncated, moves)
        return lists, newer if cut == before.cutoff else None
    kept, cut, truncated = await _newest(client, most, block)
    kept = [g for g in kept if g.seq <= now.head]  # as above: the next layout's
    lists = Lists(now.head, floor, now.branches, tags, kept, cut, truncated, await _moves(client))
    return lists, None


async def _newest(
    client: AsyncClient, most: int, block: int
) -> tuple[list[m.Generation], int, bool]:
    """Every branch's generations above the cutoff, newest first; the cutoff; whether any
    generation lies at or below it."""
    gens: list[m.Generation] = []
    cursor: int | None = None
    cut = 0
    while True:
        page = await client.generations(all_branches=True, limit=PAGE, cursor=cursor)
        gens += page.generations
        cursor = page.next_cursor
        cut = cutoff(gens, most, block)
        if cursor is None or gens[-1].seq <= cut:
            break
    kept = [g for g in gens if g.seq > cut]
    return kept, cut, cursor is not None or len(kept) < len(gens)


async def _generations_above(client: AsyncClient, seq: int) -> list[m.Generation]:
    """Every branch's generations above `seq`, newest first: pages from a small one up
    (after a turn there are a few)."""
    out: list[m.Generation] = []
    cursor: int | None = None
    limit = 16
    while True:
        page = await client.generations(all_branches=True, limit=limit, cursor=cursor)
        out += (g for g in page.generations if g.seq > seq)
        cursor = page.next_cursor
        if cursor is None or cursor <= seq:
            return out
        limit = min(limit * 4, PAGE)


async def _moves(client: AsyncClient, above: int = -1) -> dict[int, mv.ReflogEntry]:
    """Every reset record's reflog entry above seq `above` (its reason, operation), by seq:
    pages from a small one up when only the newest are wanted (a page of 1,000 took 10 ms)."""
    out: dict[int, mv.ReflogEntry] = {}
    cursor: int | None = None
    limit = 16 if above >= 0 else 1000
    while True:
        page = await client.reflog(limit=limit, cursor=cursor)
        out.update((e.seq, e) for e in page.entries if e.seq > above)
        cursor = page.next_cursor
        if cursor is None or cursor <= above:
            return out
        limit = min(limit * 4, 1000)


def layout(lists: Lists) -> dict[str, Any]:
    """The timeline of every branch: head, branches, reset reasons, lane rows (pure)."""
    rows = lanes(lists.generations, lists.branches, lists.head)
    for row in rows:
        move = lists.moves.get(row["seq"]) if row["kind"] == "reset" else None
        if move is not None:
            row["reason"], row["op"] = move.reason, move.op
    return {
        "head": lists.head,
        "branches": len(lists.branches),
        "truncated": lists.truncated,
        "total": len(rows),
        "lanes": 1 + max((r["col"] for r in rows), default=0),
        "rows": rows,
    }


def grown(previous: dict[str, Any], lists: Lists, newer: list[m.Generation]) -> dict[str, Any]:
    """`previous`, the layout of an earlier head of the same tree and cutoff, with the
    rows above that head on top: equal to `layout(lists)` (tests/test_web_timeline.py),
    in O(rows added).

    Records appended without a reset extend the active lineage, which is column 0:
    each new row takes column 0 and waits for the one below it, so the lanes are
    where they were when the layout reaches the old rows, which keep their columns
    and parents. Only the old tip's row changes: it is no longer "here", or it goes
    (when the tip was no checkpoint, the row that stood for it).
    """
    old: list[dict[str, Any]] = previous["rows"]
    if old[0]["kind"] == "tip":
        below, old = old[0]["parent"], old[1:]
    else:
        below = old[0]["seq"]
    top = [dict(old[0], here=False)] if old else []
    added = [
        node_row(g.seq, g.kind, g.active, agent=g.agent, label=g.label, tags=g.tags) for g in newer
    ]
    if not newer or newer[0].seq != lists.head:
        added.insert(0, node_row(lists.head, "tip", True))
    for row, under in zip(added, [*(r["seq"] for r in added[1:]), below], strict=True):
        row["parent"], row["here"] = under, row["seq"] == lists.head
    rows = [*added, *top, *old[1:]]
    return {
        **previous,
        "head": lists.head,
        "truncated": lists.truncated,
        "total": len(rows),
        "rows": rows,
    }


class Timeline:
    """The timeline as the page gets it (JSON), laid out again only when the log changed.

    Each page that opens, and each that reloads on a notification, shares one
    layout per head; it is made on a worker thread, so the live streams and
    other requests go on meanwhile.
    """

    def __init__(self, most: int = MAX_GENERATIONS, block: int = BLOCK, chunk: int = CHUNK) -> None:
        self._most, self._block = most, block
        self._encoded = Body(chunk)  # the body, in chunks of rows kept across changes
        self._key: tuple[int, int] | None = None
        self._lists: Lists | None = None
        self._whole: dict[str, Any] = {}
        self._body: bytes | None = None  # encoded when first asked for
        # The head this layout grew from (`grown`), the rows of its layout replaced on
        # top, and the rows that replace them: what a page showing that head needs.
        self._step: tuple[int, int, int] | None = None
        self._lock = anyio.Lock()

    async def get(
        self, client: AsyncClient, first: int | None = None, since: int | None = None
    ) -> bytes:
        """The timeline as of now, JSON-encoded (see `layout`); `first`: only its newest rows.

        The page asks for the rows in view first and paints them, then for all.
        `since`: the head of the layout the page shows; when this one grew from it
        (or is it), only the change: `rows` replace the first `replace` rows the
        page has (`since` says it is a change), not 4 MB of rows it has already.
        """
        async with self._lock:
            status = await client.status()
            key = (status.head, status.floor)
            if key != self._key:
                await self._update(client, status.floor)
                self._key = key
            whole = self._whole
            step = (since, 0, 0) if since == whole["head"] else self._step  # no change
            if since is not None and step is not None and step[0] == since:
                _, replace, count = step
                change = {
                    **whole,
                    "since": since,
                    "replace": replace,
                    "rows": whole["rows"][:count],
                }
                return msgspec.json.encode(change)
            if first is not None:
                return msgspec.json.encode({**whole, "rows": whole["rows"][:first]})
            if self._body is None:
                self._body = await anyio.to_thread.run_sync(self._encoded.encode, whole)
            return self._body

    async def shown_first(self, client: AsyncClient, first: int) -> bytes | None:
        """The newest `first` rows (as `get`), for the page itself to carry: its first paint
        then waits for no request of its own. None before the first layout and while one
        is being made (a cold one takes half a second: the page comes at once, and asks)."""
        if self._lists is None or self._lock.locked():
            return None
        return await self.get(client, first)

    async def _update(self, client: AsyncClient, floor: int) -> None:
        before = self._lists
        lists, newer = await read_lists(client, floor, before, most=self._most, block=self._block)
        if newer is None or before is None:
            self._whole = await anyio.to_thread.run_sync(layout, lists)
            self._step = None
            self._encoded.changed(0)
        elif not before.same_tree(lists):  # resets: placed again as far as they changed it
            again = functools.partial(
                relaid,
                self._whole,
                old_branches=before.branches,
                head=lists.head,
                branches=lists.branches,
                newer=newer,
                moves=lists.moves,
                truncated=lists.truncated,
            )
            r = await anyio.to_thread.run_sync(again)
            self._encoded.changed(len(self._whole["rows"]) - r.replace)
            self._whole, self._step = r.layout, (before.head, r.replace, r.count)
        else:
            old = self._whole["rows"]
            self._whole = grown(self._whole, lists, newer)
            replace = 2 if old[0]["kind"] == "tip" else 1  # the old top and the row it stood on
            self._step = (before.head, replace, len(self._whole["rows"]) - len(old) + replace)
            self._encoded.changed(len(old) - replace)
        self._lists, self._body = lists, None

"""The branch tree as the page draws it: the TUI's lanes (reynctl.tui.graph), as numbers.

`lanes` is pure: each node of `layout` with its column, so the page places a
circle at (column, row) and a line from it to its parent's row. The page draws
only the rows in view; this sends them all, once per change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from reynctl.aio import AsyncClient
from reynctl.tui.graph import build_nodes, layout
from reynd.protocol import methods as m
from reynd.protocol import moves as mv

__all__ = ["MAX_GENERATIONS", "Timeline", "lanes", "load"]

MAX_GENERATIONS = 20_000  # newest first; older ones are left out (the page says how many)
GLYPHS = "◉●○"


def lanes(
    generations: Sequence[m.Generation], branches: Sequence[m.BranchInfo], head: int
) -> list[dict[str, Any]]:
    """One dict per node, newest first: seq, row, col, parent (a seq), kind, marks."""
    out: list[dict[str, Any]] = []
    for row in layout(build_nodes(generations, branches, head)):
        node = row.node
        if node is None:  # a link line: the page joins lanes with curves instead
            continue
        col = next(i for i, c in enumerate(row.graph) if c in GLYPHS) // 2
        out.append(
            {
                "seq": node.seq,
                "col": col,
                "parent": node.parent,
                "kind": node.kind,
                "active": node.active,
                "here": node.here,
                "agent": node.agent,
                "label": node.label,
                "tags": list(node.tags),
                "target": node.target,
            }
        )
    return out


class Timeline:
    """The timeline as the page gets it (JSON), laid out again only when the log changed.

    Every change to what the timeline shows appends a record (a turn, a reset,
    a tag), and GC moves the floor: so (head, floor) names a layout. Each page
    that opens, and each that reloads on a notification, shares one layout
    per head; it is made on a worker thread, so the live streams and other
    requests go on meanwhile.
    """

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._whole: dict[str, Any] = {}
        self._body = b""
        self._lock = anyio.Lock()

    async def get(self, client: AsyncClient, first: int | None = None) -> bytes:
        """The timeline as of now, JSON-encoded (see `load`); `first`: only its newest rows.

        The page asks for the rows in view first and paints them, then for all.
        """
        async with self._lock:
            status = await client.status()
            key = (status.head, status.floor)
            if key != self._key:
                self._whole = await load(client)
                self._body = msgspec.json.encode(self._whole)
                self._key = key
            if first is None:
                return self._body
            return msgspec.json.encode({**self._whole, "rows": self._whole["rows"][:first]})


async def load(client: AsyncClient) -> dict[str, Any]:
    """The timeline of every branch: head, branches, reset reasons, lane rows."""
    branches = await client.branches()
    gens, truncated = await client.newest_generations(MAX_GENERATIONS)
    moves = await _moves(client)
    rows = await anyio.to_thread.run_sync(lanes, gens, branches.branches, branches.head)
    for row in rows:
        move = moves.get(row["seq"]) if row["kind"] == "reset" else None
        if move is not None:
            row["reason"], row["op"] = move.reason, move.op
    return {
        "head": branches.head,
        "branches": len(branches.branches),
        "truncated": truncated,
        "total": len(rows),
        "lanes": 1 + max((r["col"] for r in rows), default=0),
        "rows": rows,
    }


async def _moves(client: AsyncClient) -> dict[int, mv.ReflogEntry]:
    """Every reset record's reflog entry (its reason and operation), by seq."""
    out: dict[int, mv.ReflogEntry] = {}
    cursor: int | None = None
    while True:
        page = await client.reflog(limit=1000, cursor=cursor)
        out.update((e.seq, e) for e in page.entries)
        cursor = page.next_cursor
        if cursor is None:
            return out

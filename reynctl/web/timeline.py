"""The branch tree as the page draws it: the TUI's lanes (reynctl.tui.graph), as numbers.

`lanes` is pure: each node of `layout` with its column, so the page places a
circle at (column, row) and a line from it to its parent's row. The page draws
only the rows in view; this sends them all, once per change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reynctl.aio import AsyncClient
from reynctl.tui.graph import build_nodes, layout
from reynd.protocol import methods as m
from reynd.protocol import moves as mv

__all__ = ["MAX_GENERATIONS", "lanes", "load"]

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
                "branch": node.branch,
                "agent": node.agent,
                "label": node.label,
                "tags": list(node.tags),
                "target": node.target,
                "at": node.created_at,
            }
        )
    return out


async def load(client: AsyncClient) -> dict[str, Any]:
    """The timeline of every branch as of now: head, branches (with reasons), lane rows."""
    branches = await client.branches()
    gens: list[m.Generation] = []
    cursor: int | None = None
    while len(gens) < MAX_GENERATIONS:
        page = await client.generations(all_branches=True, limit=1000, cursor=cursor)
        gens += page.generations
        cursor = page.next_cursor
        if cursor is None:
            break
    moves = await _moves(client)
    rows = lanes(gens, branches.branches, branches.head)
    for row in rows:
        move = moves.get(row["seq"]) if row["kind"] == "reset" else None
        if move is not None:
            row["reason"], row["op"] = move.reason, move.op
    return {
        "head": branches.head,
        "branches": len(branches.branches),
        "truncated": cursor is not None,
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

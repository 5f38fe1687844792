"""The timeline: generations, what a rewind or checkout did, the branch tree."""

from __future__ import annotations

from datetime import tzinfo

from reynctl.render.formats import format_time, printable, truncate
from reynctl.render.preview import effects_text
from reynctl.render.table import Cell, Style, table
from reynd.protocol import methods as m
from reynd.protocol.executor import EXECUTOR_NAMES

__all__ = ["branch_tree", "generations_table", "rewind_text", "runs_again"]


def generations_table(res: m.GenerationsResult, style: Style, tz: tzinfo | None = None) -> str:
    """generations.list as a table, newest first as the daemon sends them."""
    if not res.generations:
        return "no generations yet (they are cut at turn, plan-step and phase boundaries)"
    rows = [
        [
            Cell(str(g.seq), ("cyan",)),
            g.kind,
            g.agent,
            str(g.branch),
            Cell("active", ("green",)) if g.active else Cell("abandoned", ("dim",)),
            format_time(g.created_at, tz),
            g.label,
        ]
        for g in res.generations
    ]
    headers = ["SEQ", "KIND", "AGENT", "BRANCH", "STATUS", "CREATED", "LABEL"]
    if any(g.tags for g in res.generations):  # issue 24: a column only when there are tags
        headers.append("TAGS")
        for row, g in zip(rows, res.generations, strict=True):
            row.append(", ".join(printable(t) for t in g.tags))
    return table(headers, rows, style, align="rllr")


def rewind_text(res: m.RewindResult, style: Style) -> str:
    """What a rewind or checkout did, in a line or two."""
    if res.only == "workspace":
        head = f"restored the workspace's files as of seq {res.files_as_of}"
    elif res.mode == "fork_switch":
        head = f"switched to the abandoned branch at seq {res.target}"
    else:
        head = f"rewound to seq {res.target}"
    if res.only == "runtime":
        head += " (the workspace's files stay as they were)"
    lines = [
        f"{style(head, 'bold')}: reset record {res.reset_seq}, now on branch {res.branch}"
        + (f" ({res.duration_ms:.1f} ms)" if res.duration_ms else "")
    ]
    if res.reason:
        lines.append(f"  reason: {printable(res.reason)}")
    lines += [f"  cancelled turn {c.turn_id} of {c.agent}" for c in res.cancelled]
    undone = effects_text(res.effects, style, quiet=True)  # issue 25
    return "\n".join([*lines, *([f"  {undone}"] if undone else [])])


def runs_again(state: m.StateResult, columns: int, skip: str | None = None) -> list[str]:
    """What the daemon's agents take up at once after a move to `state.seq`.

    After a rewind, checkout or act-turn rewind the daemon starts its agents
    from the state as of the target: a turn in flight there resumes (its
    committed steps replay from their memos), and messages not taken yet
    start turns. `skip` is the agent whose resumed turn is already told.
    """
    lines = []
    for name, agent in sorted(state.agents.items()):
        if agent.executor not in EXECUTOR_NAMES:
            continue  # an outside runtime drives it: the daemon does not restart it
        who = printable(name)
        for chain in agent.pending_chains if name != skip else ():
            lines.append(
                f"  {who} runs again now: turn {printable(chain.turn_id)} was in flight at seq "
                f"{state.seq} (its committed steps replay from their memos)"
            )
        for item in agent.inbox:
            head = f"  {who} runs again now: its message at seq {item.seq} was not taken yet: "
            lines.append(head + truncate(item.text, max(20, columns - len(head))))
    return lines


def _seq_range(b: m.BranchInfo) -> str:
    first = 1 if b.parent is None else b.id
    if b.tip < first:
        return "empty"
    return str(first) if b.tip == first else f"{first}..{b.tip}"


def branch_tree(res: m.BranchesResult, style: Style) -> str:
    """The branch tree, children under the branch they forked from, oldest first.

    Each line: the branch id in the tree, the seq it forked at, the seqs it
    holds; the checked-out branch is marked. A branch whose parent is unknown
    (collected by retention) is drawn as a root.
    """
    ids = {b.id for b in res.branches}
    children: dict[int | None, list[m.BranchInfo]] = {}
    for b in res.branches:
        parent = b.parent if b.parent in ids else None
        children.setdefault(parent, []).append(b)
    for kids in children.values():
        kids.sort(key=lambda b: (b.origin_seq, b.id))

    rows: list[list[Cell | str]] = []

    def walk(b: m.BranchInfo, prefix: str, connector: str) -> None:
        label = f"{prefix}{connector}{b.id}"
        mark = Cell(f"* current (head {res.head})", ("green", "bold")) if b.active else Cell("")
        if b.tags:  # issue 24: the tags naming a seq of the branch
            tags = "tags: " + ", ".join(printable(t) for t in b.tags)
            mark = Cell(f"{mark.text}  {tags}".strip(), mark.styles)
        styles = ("green", "bold") if b.active else ()
        rows.append(
            [
                Cell(label, styles),
                "" if b.parent is None else str(b.origin_seq),
                _seq_range(b),
                mark,
            ]
        )
        kids = children.get(b.id, [])
        below = prefix + ("" if not connector else ("│  " if connector == "├─ " else "   "))
        for i, kid in enumerate(kids):
            walk(kid, below, "└─ " if i == len(kids) - 1 else "├─ ")

    for root in children.get(None, []):
        walk(root, "", "")
    if not rows:
        return "no branches"
    return table(["BRANCH", "FORKED AT", "SEQS", ""], rows, style, align="lrl")

"""Tags: durable names for seqs (issue 24)."""

from __future__ import annotations

from reynctl.render.formats import printable
from reynctl.render.table import Cell, Style, table
from reynd.protocol.tag_methods import TagInfo, TagsListResult

__all__ = ["tag_text", "tags_table"]


def tags_table(res: TagsListResult, style: Style) -> str:
    """tags.list as a table, by name; a dangling tag says so."""
    if not res.tags:
        return "no tags yet (reynctl tag NAME [SEQ] names a seq)"
    rows: list[list[Cell | str]] = [
        [
            Cell(printable(t.name), ("cyan",)),
            str(t.target),
            str(t.seq),
            Cell("dangling: its history was collected", ("yellow",)) if t.dangling else "",
        ]
        for t in res.tags
    ]
    return table(["TAG", "SEQ", "RECORD", ""], rows, style, align="lrr")


def tag_text(tag: TagInfo, deleted: bool = False) -> str:
    """What `reynctl tag` did."""
    if deleted:
        return f"deleted tag {printable(tag.name)} (it named seq {tag.target})"
    return f"tag {printable(tag.name)} names seq {tag.target} (record {tag.seq})"

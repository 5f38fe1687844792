"""Tags: names for seqs, from the `tag.set` / `tag.deleted` records (issue 24).

Pure code, no I/O. Tags are operator metadata: every tag record counts, in
seq order, on whatever branch it lies (a rewind does not take a tag back, and
a tag made on a branch later abandoned still names its seq). Retention keeps
the table as of its floor in `state/retained` (`base`); the records above it
are the WAL's.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from reynd.protocol import errors

__all__ = ["DELETED", "Tag", "TagRecord", "Tags", "resolve"]

DELETED = -1  # the target of a `tag.deleted` record, in TagRecord form

TagRecord = tuple[int, str, int]  # (seq of the record, name, target or DELETED)


@dataclass(frozen=True, slots=True)
class Tag:
    """A live tag: `target` the seq it names, `seq` the record that set it."""

    name: str
    target: int
    seq: int


class Tags:
    """The tag table: the base (as of the retention floor), then the records above it."""

    __slots__ = ("_base", "_records", "_seqs", "_table")

    def __init__(self, base: list[TagRecord] | None = None) -> None:
        self._base: list[TagRecord] = sorted(base or [])
        self._records: list[TagRecord] = []
        self._seqs: list[int] = []
        self._table: dict[str, Tag] = {}
        for record in self._base:
            self._apply(record)

    def observe(self, record: TagRecord) -> None:
        """One tag record, the newest so far."""
        self._records.append(record)
        self._seqs.append(record[0])
        self._apply(record)

    def extend(self, records: list[TagRecord] | tuple[TagRecord, ...]) -> None:
        for record in records:
            self.observe(record)

    def _apply(self, record: TagRecord) -> None:
        seq, name, target = record
        if target == DELETED:
            self._table.pop(name, None)
        else:
            self._table[name] = Tag(name, target, seq)

    def get(self, name: str) -> Tag | None:
        return self._table.get(name)

    def all(self) -> list[Tag]:
        """The live tags, by name."""
        return [self._table[name] for name in sorted(self._table)]

    def naming(self, seq: int) -> list[str]:
        """The tags that name `seq`, sorted (tags are few: a scan)."""
        return sorted(t.name for t in self._table.values() if t.target == seq)

    def is_record(self, seq: int) -> bool:
        """True when `seq` is a tag record (it changes no state) kept above the floor."""
        i = bisect_left(self._seqs, seq)
        return i < len(self._seqs) and self._seqs[i] == seq

    def between(self, lo: int, hi: int) -> list[TagRecord]:
        """The tag records with lo <= seq <= hi, ascending (what a segment index chunk lists)."""
        a, b = bisect_left(self._seqs, lo), bisect_right(self._seqs, hi)
        return self._records[a:b]

    def as_of(self, floor: int) -> list[TagRecord]:
        """The table made by the records below `floor`, as records (for `state/retained`)."""
        table = Tags(self._base)
        table.extend(self._records[: bisect_left(self._seqs, floor)])
        return [(t.seq, t.name, t.target) for t in table.all()]


def resolve(tags: Tags, name: str) -> Tag:
    """Tag `name`, for a method given `tag` instead of `seq` (UnknownTag when there is none)."""
    tag = tags.get(name)
    if tag is None:
        raise errors.UnknownTag(f"no tag {name!r} (`reynctl tags` lists them)", {"tag": name})
    return tag

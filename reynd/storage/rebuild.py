"""What opening a state directory rebuilds from the log: lineage, catalog, file records.

One place for it, fed record by record (a scan) or chunk by chunk (a segment
index), so that `Store.open` and `reynd repair --verify` rebuild exactly the
same thing, and the index describes exactly what a scan would rebuild. No I/O.
"""

from __future__ import annotations

from pathlib import Path

from reynd.core.catalog import Catalog
from reynd.core.lineage import Lineage
from reynd.core.seqs import SeqList
from reynd.core.tags import DELETED, Tags
from reynd.protocol.events import (
    Event,
    Rewind,
    TagDeleted,
    TagSet,
    WorkspaceFiles,
    boundary_kind,
)
from reynd.storage.errors import CorruptionError
from reynd.storage.retained import Retained
from reynd.storage.segindex import Chunk

__all__ = ["Rebuild", "index_event", "label"]


def label(event: Event) -> str:
    """The catalog label of a boundary record."""
    text = getattr(event, "label", "")
    if text:
        return str(text)
    for name in ("phase", "result", "reply"):
        value = getattr(event, name, None)
        if value:
            return str(value)[:80]
    return ""


def index_event(
    lineage: Lineage, catalog: Catalog, file_ops: SeqList, event: Event, tags: Tags | None = None
) -> None:
    """Add one record, the next seq, to the lineage, and to the catalog (a boundary),
    to the workspace's file records (a `workspace.files` record) or to the tags."""
    lineage.observe(event.seq, event.target_n if isinstance(event, Rewind) else None)
    if isinstance(event, WorkspaceFiles):
        file_ops.add(event.seq)
    if tags is not None and isinstance(event, TagSet | TagDeleted):
        target = event.target if isinstance(event, TagSet) else DELETED
        tags.observe((event.seq, event.name, target))
    kind = boundary_kind(event)
    if kind is not None:
        catalog.add(event.seq, kind, getattr(event, "agent", ""), event.ts, label(event))


class Rebuild:
    """The lineage, catalog and file records of a log, built in seq order from its first
    kept record."""

    def __init__(self, retained: Retained, wal_dir: Path) -> None:
        self.lineage = Lineage()
        self.catalog = Catalog()
        self.file_ops = SeqList()  # seqs of workspace.files records
        self.tags = Tags()
        self._retained = retained
        self._wal_dir = wal_dir

    def record(self, event: Event, nbytes: int = 0) -> None:
        """A scanned record (the signature of Wal.open's `on_record`)."""
        self._begin(event.seq)
        index_event(self.lineage, self.catalog, self.file_ops, event, self.tags)

    def chunk(self, chunk: Chunk) -> None:
        """What `record` does for each record of `chunk`, taken from a segment index."""
        self._begin(chunk.first)
        for seq, target in chunk.resets:
            self.lineage.observe_plain_through(seq - 1)
            self.lineage.observe(seq, target)
        self.lineage.observe_plain_through(chunk.last)
        self.catalog.extend(chunk.generations)
        self.file_ops.extend(chunk.file_ops)
        self.tags.extend(chunk.tags)

    def _begin(self, first: int) -> None:
        if self.lineage.head != 0 or first == 1:
            return
        # History below the first kept record was dropped by retention: its
        # reset records come from the retained file, which is durable before
        # any segment goes, so it covers every dropped seq. A log that starts
        # above its floor lost segments (or the file): its lineage cannot be known.
        retained = self._retained
        if first > retained.floor:
            raise CorruptionError(
                self._wal_dir,
                0,
                first,
                f"the log starts at seq {first} but the retained-history file "
                f"covers only seqs below {retained.floor}: segments or "
                f"{self._wal_dir.parent / 'retained'} are missing",
            )
        self.lineage = Lineage.restore([(r, t) for r, t in retained.resets if r < first], first - 1)
        self.tags = Tags([t for t in retained.tags if t[0] < first])

    def check_end(self, head: int) -> None:
        """The log must not end below the seq watermark of the retained file."""
        if head + 1 < self._retained.next_seq:
            raise CorruptionError(
                self._wal_dir,
                0,
                head + 1,
                f"the log ends at seq {head} but seqs up to "
                f"{self._retained.next_seq - 1} were issued: newer segments are missing",
            )

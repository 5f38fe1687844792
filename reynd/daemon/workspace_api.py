"""`workspace.tree`, `workspace.blob`, and the files part of `state.diff`: the workspace as
of any retained seq, read from its recorded trees and blobs without restoring anything.

The tree is planned on the event loop (the lineage and the tree index change there) and
built on a worker thread, under the read gate: retention never deletes a manifest or a
blob a read is using.
"""

from __future__ import annotations

import trio

from reynd.core.filediff import Entry, compare_trees
from reynd.daemon.addresses import Addresses
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.rpc import Handler
from reynd.protocol import errors
from reynd.protocol import methods as m
from reynd.protocol import workspace_methods as wm
from reynd.storage.store import Store
from reynd.workspace import Workspace
from reynd.workspace.model import flat

__all__ = ["WorkspaceApi"]

Tree = dict[str, Entry]


class WorkspaceApi:
    def __init__(
        self, store: Store, workspace: Workspace | None, reads: Gate, addresses: Addresses
    ) -> None:
        self._store = store
        self._workspace = workspace
        self._reads = reads
        self._addresses = addresses

    def handlers(self) -> dict[str, Handler]:
        return {"workspace.tree": self._tree, "workspace.blob": self._blob}

    async def tree_as_of(self, seq: int) -> Tree | None:
        """The files as of `seq` ({} when no tree was recorded at or below it); None when
        workspace rewind is off."""
        self._store.plan(seq)  # seq_out_of_range / below_floor, as for the state
        ws = self._workspace
        if ws is None:
            return None
        async with self._reads.shared():
            plan = ws.history.plan(seq)
            if plan is None:
                return {}
            root = await trio.to_thread.run_sync(ws.history.execute, plan)
        return {p: (i.kind, i.mode, i.ref, i.size) for p, i in flat(root).items()}

    async def files_diff(self, a: int, b: int) -> list[m.FileChange] | None:
        """What differs between the files as of `a` and `b`; None when rewind is off."""
        ws = self._workspace
        before, after = await self.tree_as_of(a), await self.tree_as_of(b)
        if ws is None or before is None or after is None:
            return None
        async with self._reads.shared():
            deltas = await trio.to_thread.run_sync(compare_trees, before, after, ws.blobs.read)
        return [
            m.FileChange(
                path=d.path,
                op=d.op,
                before=_entry(d.before),
                after=_entry(d.after),
                binary=d.binary,
                patch=d.patch,
            )
            for d in deltas
        ]

    async def _tree(self, p: wm.TreeParams, ctx: CallContext) -> wm.TreeResult:
        seq = self._addresses.seq_or_tag(p.seq, p.tag)
        tree = await self.tree_as_of(seq)
        return wm.TreeResult(
            seq=seq,
            enabled=tree is not None,
            recorded=bool(tree) or self._recorded(seq),
            files={path: _file(e) for path, e in (tree or {}).items()},
        )

    def _recorded(self, seq: int) -> bool:
        ws = self._workspace
        return ws is not None and ws.history.base(seq) is not None

    async def _blob(self, p: wm.BlobParams, ctx: CallContext) -> wm.BlobResult:
        ws = self._workspace
        if ws is None:
            raise errors.InvalidParams(
                "workspace rewind is off: no blobs are kept (see docs/operations.md)",
                {"field": "digest"},
            )
        async with self._reads.shared():
            try:
                data = await trio.to_thread.run_sync(ws.blobs.read, p.digest)
            except FileNotFoundError:
                raise errors.InvalidParams(
                    f"no workspace blob {p.digest}: name one that workspace.tree lists "
                    "(retention may have collected it since)",
                    {"field": "digest", "digest": p.digest},
                ) from None
        return wm.BlobResult(digest=p.digest, data=data)


def _file(e: Entry) -> wm.FileEntry:
    kind, mode, ref, size = e
    return wm.FileEntry(kind=kind, mode=mode, ref=ref, size=size)  # type: ignore[arg-type]


def _entry(e: Entry | None) -> wm.FileEntry | None:
    return None if e is None else _file(e)

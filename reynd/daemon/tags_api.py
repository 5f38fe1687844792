"""`tags.set`, `tags.delete`, `tags.list`: durable names for seqs (issue 24).

A tag is set or deleted by appending a record under the write gate (shared),
like any append: no reset record can come between the check against the tip
and the append. The table itself lives in the store (core/tags.py), rebuilt
at start from the WAL, its segment indexes and the retained file.
"""

from __future__ import annotations

import trio

from reynd.core.tags import Tag
from reynd.daemon.addresses import dangling
from reynd.daemon.context import CallContext
from reynd.daemon.coordinator import Gate
from reynd.daemon.rpc import Handler
from reynd.daemon.writer import Commit
from reynd.protocol import errors
from reynd.protocol.events import TagDeleted, TagSet
from reynd.protocol.tag_methods import (
    TagInfo,
    TagsDeleteParams,
    TagsListParams,
    TagsListResult,
    TagsSetParams,
)
from reynd.storage.store import Store

__all__ = ["TagsApi"]


class TagsApi:
    def __init__(self, store: Store, gate: Gate, commit: Commit) -> None:
        self._store = store
        self._gate = gate
        self._commit = commit
        # Held from the check against the table to the durable record: two calls
        # on one name never both pass the check (tag_exists, tag_not_found).
        self._lock = trio.Lock()

    def handlers(self) -> dict[str, Handler]:
        return {"tags.set": self._set, "tags.delete": self._delete, "tags.list": self._list}

    def _info(self, tag: Tag) -> TagInfo:
        gone = dangling(self._store, tag.target)
        return TagInfo(name=tag.name, target=tag.target, seq=tag.seq, dangling=gone)

    async def _set(self, p: TagsSetParams, ctx: CallContext) -> TagInfo:
        async with self._gate.shared(), self._lock:
            store = self._store
            target = store.head if p.seq is None else p.seq
            if target > store.head:
                raise errors.SeqOutOfRange(
                    f"seq {target} is outside 0..{store.head} (the tip)",
                    {"seq": target, "head": store.head},
                )
            store.plan(target)  # below the floor: below_floor, nothing to name
            old = store.tags.get(p.name)
            if old is not None and old.target == target:
                return self._info(old)  # already so: nothing to write
            if old is not None and not p.force:
                raise errors.TagExists(
                    f"tag {p.name!r} names seq {old.target}; pass force "
                    f"(`reynctl tag -f {p.name} {target}`) to move it to {target}",
                    {"tag": p.name, "seq": old.target},
                )
            (durable,) = await self._commit([TagSet(name=p.name, target=target)])
        return self._info(Tag(name=p.name, target=target, seq=durable.seq))

    async def _delete(self, p: TagsDeleteParams, ctx: CallContext) -> TagInfo:
        async with self._gate.shared(), self._lock:
            old = self._store.tags.get(p.name)
            if old is None:
                raise errors.UnknownTag(
                    f"no tag {p.name!r} (`reynctl tags` lists them)", {"tag": p.name}
                )
            info = self._info(old)
            await self._commit([TagDeleted(name=p.name)])
        return info

    async def _list(self, p: TagsListParams, ctx: CallContext) -> TagsListResult:
        return TagsListResult(tags=[self._info(t) for t in self._store.tags.all()])

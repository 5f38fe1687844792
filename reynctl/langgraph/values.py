"""Channel values: each version stored once, a growing list as the items it appends.

LangGraph gives a new version of a channel at each super-step that writes
it; for a message list (`add_messages`) the new value is the old list plus a
few messages. Storing each version whole makes a thread's bytes grow with
the square of its length, so a list that extends the previous version of its
channel (the same item objects first) is stored as the new items plus the
version it extends. A whole value is written again once the deltas since the
last one add up to its size: the whole copies then add at most the size of
the deltas themselves, and the bytes a thread takes stay linear in its
length (a fixed number of deltas between whole values would make them grow
with its square again). Every `MERGE`-th delta in a row is a merge: the
items since the last merge (or whole value), stored against it, so a read
of an old version decodes at most `MERGE` deltas plus one merge per
`MERGE` deltas since the whole value, and a cold read fetches that many
records (saver.py), not one per version since the whole value. A merge
holds items that deltas hold too: the deltas' bytes about double, still
linear (a merge's bytes count only its new items' share towards the next
whole value, which comes as soon as without merges). The saver starts from
versions it holds decoded (the last written or read, and a few recent
reads) when the chain passes through one.

A value's bytes are held packed, or compressed when that is smaller
(`stored`); `whole` and `acc` count serialized bytes either way, so
compressing changes neither when a whole value is written again nor what a
read of a version decodes.

The prefix test is by identity (`is`), which is what LangGraph's reducers
keep (they copy the list, not the items). State mutated in place by a node
breaks that assumption for LangGraph itself as well; such an item then
differs by identity only if it was replaced, so do not mutate state in place.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from langgraph.checkpoint.serde.base import SerializerProtocol

from reynctl.langgraph.stored import loads, stored
from reynctl.langgraph.view import Blob, unpack

__all__ = [
    "MAX_DEPTH",
    "Encoded",
    "Previous",
    "base_for",
    "decode",
    "empty",
    "encode",
    "previous_of",
]

MAX_DEPTH: Final = 1 << 20  # a bound for safety: the size rule decides
MERGE: Final = 16  # deltas in a row before a merge
EMPTY: Final = "empty"


@dataclass(slots=True)
class Previous:
    """A version of a channel this saver holds decoded (it wrote it, or a read handed it out)."""

    version: Any
    items: list[Any]  # a copy: the caller's list may grow in place afterwards
    depth: int
    acc: int
    whole: int
    run: int = 0  # deltas since `anchor`
    # The last merge or whole value of its chain, what a merge is stored against:
    # (version, its item count, its depth). None: itself.
    anchor: tuple[Any, int, int] | None = None


@dataclass(slots=True)
class Encoded:
    """A value ready for a `put` record's `blobs`."""

    record: dict[str, Any]
    previous: Previous | None


def base_for(
    value: Any,
    key: tuple[str, str, Any],
    blobs: dict[tuple[str, str, Any], Blob],
    candidates: Iterable[Previous | None],
) -> Previous | None:
    """The version `value` may be stored as a delta of, at `key` = (ns, channel, version).

    One of `candidates` (the saver's last write of the channel, the version a
    read handed out) that is still stored on the thread's lineage (a rewind or
    a delete may have taken it away), whose items are the first items of
    `value` (by identity); the longest, the earliest of equals. None for a
    version put again: stored whole (as a delta, its chain could run back
    through itself and never reach a whole value).
    """
    if not isinstance(value, list) or key in blobs:
        return None
    ns, ch, _ = key
    fits = [
        p
        for p in candidates
        if p is not None
        and (ns, ch, p.version) in blobs
        and (p.anchor is None or (ns, ch, p.anchor[0]) in blobs)
        and p.depth < MAX_DEPTH
        and len(value) >= len(p.items)
        and all(map(operator.is_, p.items, value))
    ]
    return max(fits, key=lambda p: len(p.items), default=None)


def encode(serde: SerializerProtocol, version: Any, value: Any, base: Previous | None) -> Encoded:
    """The stored form of `value` at `version`; `base` is the version it extends (`base_for`).

    A delta of `base` (a merge every MERGE in a row: of `base`'s anchor) while
    the deltas since its whole value add up to less than that value; whole
    otherwise.
    """
    if base is not None:
        anchor = base.anchor or (base.version, len(base.items), base.depth)
        merge = base.run + 1 >= MERGE
        start, of, depth = anchor if merge else (base.version, len(base.items), base.depth)
        type_, data = serde.dumps_typed(value[of:])
        # The bytes of the new items only (a merge's share of them: its items are also in
        # the deltas it covers): merges must not bring the next whole value sooner.
        new = len(value) - len(base.items)
        depth, acc = depth + 1, base.acc + len(data) * new // max(1, len(value) - of)
        if acc < base.whole:
            t, b = stored(type_, data)
            record = {"v": version, "t": t, "b": b, "base": start}
            record.update(depth=depth, acc=acc, whole=base.whole)
            prev = Previous(version, list(value), depth, acc, base.whole)
            if not merge:
                prev.run, prev.anchor = base.run + 1, anchor
            return Encoded(record, prev)
    type_, data = serde.dumps_typed(value)
    t, b = stored(type_, data)
    record = {"v": version, "t": t, "b": b}
    if isinstance(value, list):
        record["whole"] = len(data)
        return Encoded(record, Previous(version, list(value), 0, 0, len(data)))
    return Encoded(record, None)


def empty(version: Any) -> dict[str, Any]:
    """A version whose channel holds no value (LangGraph's "empty")."""
    return {"v": version, "t": EMPTY, "b": ""}


def decode(
    serde: SerializerProtocol,
    blobs: dict[tuple[str, str, Any], Blob],
    key: tuple[str, str, Any],
    known: dict[Any, list[Any]] | None = None,
) -> tuple[bool, Any]:
    """(present, value) of the version at `key` = (ns, channel, version).

    `known`: versions of this channel the saver holds decoded, by version; a
    chain of deltas that reaches one starts from its items instead of
    decoding the whole value again.
    """
    blob = blobs.get(key)
    if blob is None or blob.type == EMPTY:
        return False, None
    chain: list[Blob] = []
    ns, ch, version = key
    start: list[Any] | None = None
    seen = {version}
    while blob is not None:
        if known and version in known:
            start = list(known[version])
            break
        if blob.base is None:
            break
        chain.append(blob)
        version = blob.base
        # A chain back to itself (a version put again as a delta of a later one, by a
        # saver before base_for stored those whole) holds no whole value: as if gone.
        blob = None if version in seen else blobs.get((ns, ch, version))
        seen.add(version)
    if start is None:
        if blob is None:  # the whole value it extends is gone (cannot happen on one lineage)
            return False, None
        value = loads(serde, blob.type, blob.data)
        if not chain:
            return True, value
        start = list(value)
    for piece in reversed(chain):
        start.extend(loads(serde, piece.type, piece.data))
    return True, start


def previous_of(
    blobs: dict[tuple[str, str, Any], Blob], key: tuple[str, str, Any], value: Any
) -> Previous | None:
    """The delta base a value just read gives (so a saver that reads first writes deltas)."""
    blob = blobs.get(key)
    if blob is None or not isinstance(value, list):
        return None
    if blob.base is None:
        return Previous(key[2], list(value), 0, 0, blob.whole or len(unpack(blob.data)))
    return Previous(key[2], list(value), blob.depth, blob.acc, blob.whole)

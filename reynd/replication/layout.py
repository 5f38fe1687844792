"""Where replicated history lives in an object-store prefix, and how a restore reads it.

Pure: key names, the claim record, and the planning of a restore from
listings. No I/O, so every rule here is tested exhaustively.

Under `<prefix>/`:

    generations/00000007.json                  the claim of generation 7 (create-once)
    00000007/wal/<first>-<last>.jsonl          WAL records first..last, the exact framed
                                               bytes of the source's segments
    00000007/snapshots/<seq>.snap              a snapshot file, as on disk
    00000007/retained-<floor>                  the source's retained-history file as of
                                               when its floor reached <floor> (20 digits)
    00000007/shipped-<seq>                     empty: every seq up to <seq> was shipped (each
                                               written after the WAL objects it covers)

Every object is written once (If-None-Match: *) and never changed. A daemon
claims a new generation each time it starts; the claim names the
generation it continues (whose objects below `base_seq` stay valid) or none
(it ships its whole log from its floor). Only the newest claim may write,
so two daemons never interleave in one prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import msgspec

__all__ = [
    "CLAIMS",
    "FORMAT",
    "Claim",
    "GapError",
    "Piece",
    "RestorePlan",
    "WalObject",
    "claim_key",
    "cover",
    "gap_text",
    "parse_claim_key",
    "parse_retained_key",
    "parse_snapshot_key",
    "parse_shipped_key",
    "parse_wal_key",
    "plan_restore",
    "retained_key",
    "shipped_key",
    "snapshot_key",
    "wal_key",
]

FORMAT: Final = 1
CLAIMS: Final = "generations/"

_CLAIM = re.compile(r"generations/(\d{8})\.json")
_WAL = re.compile(r"(\d{8})/wal/(\d{20})-(\d{20})\.jsonl")
_RETAINED = re.compile(r"(\d{8})/retained-(\d{20})")
_SNAPSHOT = re.compile(r"(\d{8})/snapshots/(\d{20})\.snap")
_SHIPPED = re.compile(r"(\d{8})/shipped-(\d{20})")


class Claim(msgspec.Struct, kw_only=True, frozen=True):
    """Who writes generation `generation` of a prefix, and what it continues."""

    format: int = FORMAT
    generation: int
    store_id: str  # the state directory's identity (state/replication.json)
    host: str
    pid: int
    created: float
    base_seq: int  # the first seq this generation ships
    continues: int | None = None  # the generation holding every seq below base_seq


def claim_key(generation: int) -> str:
    return f"{CLAIMS}{generation:08d}.json"


def wal_key(generation: int, first: int, last: int) -> str:
    return f"{generation:08d}/wal/{first:020d}-{last:020d}.jsonl"


def snapshot_key(generation: int, seq: int) -> str:
    return f"{generation:08d}/snapshots/{seq:020d}.snap"


def retained_key(generation: int, floor: int) -> str:
    return f"{generation:08d}/retained-{floor:020d}"


def shipped_key(generation: int, seq: int) -> str:
    return f"{generation:08d}/shipped-{seq:020d}"


def parse_shipped_key(key: str) -> tuple[int, int] | None:
    """(generation, seq) of a shipped marker's key."""
    m = _SHIPPED.fullmatch(key)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_retained_key(key: str) -> tuple[int, int] | None:
    """(generation, floor) of a retained-history object's key."""
    m = _RETAINED.fullmatch(key)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_claim_key(key: str) -> int | None:
    m = _CLAIM.fullmatch(key)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True, order=True)
class WalObject:
    generation: int
    first: int
    last: int

    @property
    def key(self) -> str:
        return wal_key(self.generation, self.first, self.last)


def parse_wal_key(key: str) -> WalObject | None:
    m = _WAL.fullmatch(key)
    if m is None:
        return None
    gen, first, last = (int(g) for g in m.groups())
    return WalObject(gen, first, last) if 1 <= first <= last else None


def parse_snapshot_key(key: str) -> tuple[int, int] | None:
    """(generation, seq) of a snapshot object's key."""
    m = _SNAPSHOT.fullmatch(key)
    return (int(m.group(1)), int(m.group(2))) if m else None


class GapError(Exception):
    """The objects do not hold every seq asked for; the message names the missing range."""


def cover(objects: Iterable[WalObject], lo: int, hi: int) -> list[WalObject]:
    """Fewest objects holding seqs lo..hi contiguously, in seq order (greedy: longest reach).

    An object may overlap the one before it (a tail chunk re-shipped in a
    whole-segment object); the restore skips the seqs it already has.
    """
    if lo > hi:
        return []
    objs = sorted(objects, key=lambda o: (o.first, -o.last))
    chosen: list[WalObject] = []
    need = lo
    i = 0
    while need <= hi:
        best: WalObject | None = None
        while i < len(objs) and objs[i].first <= need:
            if objs[i].last >= need and (best is None or objs[i].last > best.last):
                best = objs[i]
            i += 1
        if best is None:
            after = min((o.first for o in objs if o.first > need), default=hi + 1)
            raise GapError(
                f"seqs {need}..{min(after - 1, hi)} are missing: no WAL object holds them"
            )
        chosen.append(best)
        need = best.last + 1
    return chosen


@dataclass(frozen=True, slots=True)
class Piece:
    """Take seqs lo..hi of `obj` (it may hold more: overlaps, a newer generation's range)."""

    obj: WalObject
    lo: int
    hi: int


def gap_text(gap: tuple[int, int], generation: int, shipped: int) -> str:
    """What a replica missing seqs lacks, in words (restore and follow say what it means next)."""
    return (
        f"seqs {gap[0]}..{gap[1]} are missing from generation {generation}: no WAL object "
        f"holds them, and the last shipped seq is {shipped}"
    )


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a restore downloads, oldest first; records above `head` are left out."""

    generation: int  # the newest claim
    head: int
    floor: int  # the first seq restored
    wal: tuple[Piece, ...]  # contiguous: floor..head
    snapshots: tuple[tuple[int, int], ...]  # (generation, seq), seq <= head
    retained: tuple[int, int] | None  # (generation, floor): the retained file, if floor > 1
    shipped: int = 0  # the last seq the prefix says was shipped (markers, object names)
    gap: tuple[int, int] | None = None  # seqs missing below `shipped` (allow_gap: head before it)


def _by_generation(wal: Iterable[WalObject]) -> dict[int, list[WalObject]]:
    """The WAL objects of each generation, in the order given."""
    by_gen: dict[int, list[WalObject]] = {}
    for obj in wal:
        by_gen.setdefault(obj.generation, []).append(obj)
    return by_gen


def _chain(claims: Mapping[int, Claim]) -> list[tuple[int, int, int | None]]:
    """(generation, lo, hi or None = its end), oldest first: the newest claim's `continues`."""
    chain: list[tuple[int, int, int | None]] = []
    gen: int | None = max(claims)
    upper: int | None = None
    while gen is not None:
        claim = claims.get(gen)
        if claim is None:
            raise GapError(f"generation {gen} is continued but its claim is missing")
        chain.append((gen, claim.base_seq, upper))
        upper = claim.base_seq - 1
        gen = claim.continues
    chain.reverse()
    return chain


def plan_restore(
    claims: Mapping[int, Claim],
    wal: Iterable[WalObject],
    snapshots: Iterable[tuple[int, int]],
    retained: Iterable[tuple[int, int]],
    to_seq: int | None = None,
    *,
    shipped: Iterable[tuple[int, int]] = (),
    allow_gap: bool = False,
) -> RestorePlan:
    """The objects that rebuild the newest generation's history up to `to_seq` (or its end).

    Walks from the newest claim through `continues`: each generation owns
    the seqs from its `base_seq` up to where its successor's start. The
    history starts at the highest floor a retained file of the chain names
    (remote retention collected what is below), else at the oldest
    generation's base. The newest generation must hold every seq up to the
    last one the prefix says it shipped (its `shipped` markers, and the names
    of its WAL objects): `to_seq` or the end past a missing range raises
    GapError naming it, unless `allow_gap` (a follower: the plan ends before
    the gap, named in `gap`). Raises GapError when a needed seq is missing and
    ValueError when `to_seq` is outside what the prefix holds.
    """
    if not claims:
        raise GapError("the prefix holds no generation: nothing was ever shipped there")
    by_gen = _by_generation(wal)
    chain = _chain(claims)
    # A generation's objects are trusted only within the seqs it owns: a
    # superseded writer may have shipped past its successor's base.
    owns = {g: upto for g, _, upto in chain}

    def owned(gen: int, seq: int) -> bool:
        upto = owns.get(gen, -1)
        return gen in owns and (upto is None or seq <= upto)

    floor = chain[0][1]
    kept = max(((f, g) for g, f in retained if owned(g, f - 1) and f >= floor), default=None)
    if kept is not None:
        floor = kept[0]
    end = _end(chain, by_gen, floor)
    if end < floor:
        raise GapError(_nothing(claims, chain[-1][0], by_gen))
    newest = chain[-1][0]
    last = max(
        [end, *(o.last for o in by_gen.get(newest, ())), *(q for g, q in shipped if g == newest)]
    )
    gap = None
    if last > end:
        after = min((o.first for o in by_gen.get(newest, ()) if o.first > end), default=last + 1)
        gap = (end + 1, after - 1)
    if gap is not None and not allow_gap and (to_seq is None or end < to_seq <= last):
        raise GapError(
            f"{gap_text(gap, newest, last)} (objects were removed from the prefix); "
            f"`--to-seq {gap[0] - 1}` restores the history before them"
        )
    head = end if to_seq is None else to_seq
    if not floor <= head <= end:
        raise ValueError(f"seq {head} is not in the replica (it holds seqs {floor}..{last})")
    pieces: list[Piece] = []
    for gen, base, upto in chain:
        lo = max(base, floor)
        hi = head if upto is None else min(upto, head)
        need = lo
        for obj in cover(by_gen.get(gen, ()), lo, hi):
            pieces.append(Piece(obj, need, min(obj.last, hi)))
            need = obj.last + 1
    snaps = tuple(sorted((s for s in snapshots if owned(*s) and s[1] <= head), key=lambda s: s[1]))
    return RestorePlan(
        generation=max(claims),
        head=head,
        floor=floor,
        wal=tuple(pieces),
        snapshots=snaps,
        retained=(kept[1], kept[0]) if kept is not None else None,
        shipped=last,
        gap=gap,
    )


def _nothing(
    claims: Mapping[int, Claim], newest: int, by_gen: Mapping[int, list[WalObject]]
) -> str:
    """Why the newest generation's chain holds no record: a stray claim, or nothing shipped yet."""
    claim = claims[newest]
    others = {g: objs for g, objs in by_gen.items() if g != newest and objs}
    if claim.continues is not None or not others:
        return f"generation {newest}, the newest, holds no WAL object yet: nothing was shipped"
    held = "; ".join(
        f"generation {g} holds seqs {min(o.first for o in objs)}..{max(o.last for o in objs)}"
        for g, objs in sorted(others.items())
    )
    return (
        f"the newest generation {newest} (host {claim.host}, pid {claim.pid}, base seq "
        f"{claim.base_seq}) continues no generation and holds no WAL object, so the history "
        f"the others hold is not its ({held}). If no daemon writes generation {newest} "
        f"(a stray claim), remove the claim {claim_key(newest)} under the prefix"
    )


def _end(
    chain: list[tuple[int, int, int | None]], by_gen: Mapping[int, list[WalObject]], floor: int
) -> int:
    """The last seq of the newest generation's contiguous run (its start - 1 if it has none)."""
    gen, base, _ = chain[-1]
    need = max(base, floor)
    for obj in sorted(by_gen.get(gen, ()), key=lambda o: o.first):
        if obj.first > need:
            break
        need = max(need, obj.last + 1)
    return need - 1

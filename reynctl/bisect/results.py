"""What a bisect step and a bisect end report: the `--json` output of `reynctl bisect`."""

from __future__ import annotations

from typing import Literal

import msgspec

from reynctl.bisect.search import Verdict
from reynd.protocol import methods as m

__all__ = ["Report", "Step"]


class Step(msgspec.Struct, kw_only=True):
    seq: int
    verdict: Verdict
    exit_code: int | None = None  # None: marked by hand (interactive form)


class Report(msgspec.Struct, kw_only=True):
    """What a bisect found (`--json`): `first_bad` when found, else None and `possible`.

    `checkpoint`: the first bad checkpoint as generations.list lists it; `turn`: which
    turn of its agent it ends or lies in (1 = the first); `message`: the message that
    started that turn (the first user message after the last good checkpoint);
    `diff`: state.diff from the last good seq to it, workspace files included."""

    good: int
    bad: int
    candidates: int
    steps: list[Step]
    first_bad: int | None
    possible: list[int]
    last_good: int
    checkpoint: m.Generation | None = None
    turn: int | None = None
    message: str | None = None
    diff: m.DiffResult | None = None
    status: Literal["found", "ambiguous"] = "found"

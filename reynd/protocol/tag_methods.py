"""Tags: durable names for seqs (issue 24). Registered in methods.METHODS.

`tags.set` appends a `tag.set` record, `tags.delete` a `tag.deleted` one;
tags are operator metadata (never rewound: a tag made on a branch later
abandoned still names its seq). Wherever a seq is accepted, `tag` (or
`from_tag`/`to_tag`) may name it instead.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from reynd.protocol import errors
from reynd.protocol.base import MethodDef, Params, Result
from reynd.protocol.names import TagName

__all__ = [
    "DEFS",
    "TagInfo",
    "TagsDeleteParams",
    "TagsListParams",
    "TagsListResult",
    "TagsSetParams",
]


class TagsSetParams(Params, kw_only=True):
    """Name `seq` (default: the tip) `name`; `force` moves a tag that names another seq."""

    name: TagName
    seq: Annotated[int, msgspec.Meta(ge=0)] | None = None
    force: bool = False


class TagsDeleteParams(Params, kw_only=True):
    name: TagName


class TagsListParams(Params, kw_only=True):
    pass


class TagInfo(Result, kw_only=True):
    """A tag: the seq it names (`target`) and its record (`seq`).

    `dangling`: retention collected the history of `target` (below the floor);
    the name is kept, and using it answers below_floor naming the tag.
    """

    name: str
    target: int
    seq: int
    dangling: bool = False


class TagsListResult(Result, kw_only=True):
    tags: list[TagInfo]


DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "tags.set",
        TagsSetParams,
        TagInfo,
        "Name a seq (default: the tip) durably; `force` moves an existing tag.",
        (errors.TagExists, errors.SeqOutOfRange, errors.BelowFloor),
        mutating=True,
    ),
    MethodDef(
        "tags.delete",
        TagsDeleteParams,
        TagInfo,
        "Remove a tag (an appended record); answers what it named.",
        (errors.UnknownTag,),
        mutating=True,
    ),
    MethodDef("tags.list", TagsListParams, TagsListResult, "Every tag, by name."),
)

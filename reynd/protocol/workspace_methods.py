"""`workspace.tree` and `workspace.blob`: the workspace as of any retained seq, read without
restoring it (issue 27: `reynctl bisect` materializes it in a directory of its own).

A client lists the tree once per seq and fetches each blob it has not seen: blobs are
named by their content's sha256, so a bisect over many seqs fetches each file once.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from reynd.protocol import errors
from reynd.protocol.base import SEQ_RANGE_ERRORS, MethodDef, Params, Result
from reynd.protocol.names import TagName

__all__ = ["DEFS", "BlobParams", "BlobResult", "FileEntry", "TreeParams", "TreeResult"]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Digest = Annotated[str, msgspec.Meta(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")]


class TreeParams(Params, kw_only=True):
    """Exactly one of `seq` or `tag`."""

    seq: NonNegative | None = None
    tag: TagName | None = None

    def __post_init__(self) -> None:
        if (self.seq is None) == (self.tag is None):  # methods.one_address's wording
            got = "seq, tag" if self.seq is not None else "none"
            raise ValueError(f"give exactly one of seq / tag (got {got})")


class FileEntry(Result, kw_only=True):
    """A regular file (`kind` "f", `ref` its blob's sha256) or a symlink ("l", `ref` its
    target); `mode`: the permission bits a restore keeps."""

    kind: Literal["f", "l"]
    mode: int
    ref: str
    size: int


class TreeResult(Result, kw_only=True):
    """`enabled`: workspace rewind is on (else `files` is empty); `recorded`: a tree was
    recorded at or below `seq` on its lineage (false when rewind was off back then)."""

    seq: int
    enabled: bool
    recorded: bool
    files: dict[str, FileEntry]


class BlobParams(Params, kw_only=True):
    digest: Digest


class BlobResult(Result, kw_only=True):
    digest: str
    data: bytes  # base64 on the wire


_BLOB_ERRORS: Final = (errors.InvalidParams,)

DEFS: tuple[MethodDef, ...] = (
    MethodDef(
        "workspace.tree",
        TreeParams,
        TreeResult,
        "The workspace's files as of any retained seq (active or abandoned), without a restore.",
        SEQ_RANGE_ERRORS,
    ),
    MethodDef(
        "workspace.blob",
        BlobParams,
        BlobResult,
        "The content of one workspace file, by the sha256 that workspace.tree names.",
        _BLOB_ERRORS,
    ),
)

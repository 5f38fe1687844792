"""The errors the workspace answers with when the file system says no.

An OSError from the workspace (a file the daemon may not read, a full disk,
the root replaced by a symlink) is a refusal the client can act on, never an
internal error: nothing was written when it is raised.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from reynd.protocol import errors
from reynd.workspace.tree import RootUnusable

__all__ = ["not_stored", "refusing"]


def not_stored(exc: OSError) -> errors.StorageUnavailable:
    """The error for changed files the blob store could not take (ENOSPC, EMFILE, EIO...).

    Not fatal, unlike a failed WAL write (docs/durability.md rule 5): no record names a
    blob before it is durable, a failed copy's tmp file is removed, and the WAL
    was not touched, so nothing acknowledged depends on what failed.
    """
    code = exc.errno or errno.EIO
    data = {"store": "workspace", "errno": errno.errorcode.get(code, str(code)), "reason": str(exc)}
    if isinstance(exc, RootUnusable):
        return errors.StorageUnavailable(
            f"the workspace root {exc.filename} is not a directory now ({os.strerror(code)}; "
            "a symlink there is never followed), so nothing was written: "
            "put the workspace directory back, then retry",
            data,
        )
    where = f" at {exc.filename}" if exc.filename else ""
    return errors.StorageUnavailable(
        f"the workspace's changed files could not be stored ({os.strerror(code)}{where}); "
        f"nothing of this write reached the WAL: {_FIXES.get(code, _CHECK_DISK)}, then retry",
        data,
    )


_CHECK_DISK = "check the disk (the daemon's log has the error)"
_FIXES = {
    errno.ENOSPC: "free disk space",
    errno.EDQUOT: "free disk space (the quota is full)",
    errno.EMFILE: "raise the open-file limit (LimitNOFILE=, ulimit -n) or close connections",
    errno.ENFILE: "the system is out of open files: close some",
    errno.EACCES: "make that file readable by the daemon, or ignore it ([workspace] ignore)",
    errno.EPERM: "make that file readable by the daemon, or ignore it ([workspace] ignore)",
}


@contextmanager
def refusing() -> Iterator[None]:
    """An OSError inside (before anything is written) becomes `not_stored`'s refusal."""
    try:
        yield
    except OSError as exc:
        raise not_stored(exc) from exc

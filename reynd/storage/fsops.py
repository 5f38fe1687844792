"""The storage core's file-system calls, behind one indirection.

The WAL, the snapshots and fsutil call `fsops.write(...)`, `fsops.fdatasync(...)`
and so on, never the `os` functions directly, so that a test can put a
simulated disk underneath them (power loss that drops or tears unsynced
writes, I/O errors at the Nth call: tests/storage/simdisk.py).

In production every name below *is* the `os` function: no wrapper, and a
call costs the same one module-attribute lookup that `os.write` did.
`simulated()` says when a layer is installed, for the one caller that must
know: the committer, whose kernel AIO sync would bypass the layer.
Reads of whole files at open (`Path.read_bytes`, `iterdir`) stay direct:
they do not change the disk.

The calls that take `dir_fd` (`open`, `unlink`, `mkdir`, `rmdir`, `symlink`,
and `replace` with `src_dir_fd`/`dst_dir_fd`) take it here too: the workspace
restore works relative to directory descriptors, never through a path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "NAMES",
    "close",
    "fdatasync",
    "fsync",
    "ftruncate",
    "installed",
    "mkdir",
    "open",
    "pread",
    "replace",
    "rmdir",
    "simulated",
    "symlink",
    "unlink",
    "write",
]

open = os.open
close = os.close
write = os.write
pread = os.pread
fsync = os.fsync
fdatasync = os.fdatasync
ftruncate = os.ftruncate
replace = os.replace
unlink = os.unlink
mkdir = os.mkdir
rmdir = os.rmdir
symlink = os.symlink

NAMES = (
    "open",
    "close",
    "write",
    "pread",
    "fsync",
    "fdatasync",
    "ftruncate",
    "replace",
    "unlink",
    "mkdir",
    "rmdir",
    "symlink",
)


_installed: list[object] = []  # the layers of the `installed` blocks now open


def simulated() -> bool:
    """True while a layer is installed: the calls above are not the `os` functions."""
    return bool(_installed)


@contextmanager
def installed(layer: object) -> Iterator[None]:
    """Route each call of NAMES through `layer`'s method of that name, for the block (tests)."""
    scope = globals()
    saved = {name: scope[name] for name in NAMES}
    _installed.append(layer)
    try:
        for name in NAMES:
            scope[name] = getattr(layer, name)
        yield
    finally:
        scope.update(saved)
        _installed.pop()

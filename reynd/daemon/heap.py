"""Giving freed memory back to the OS after a burst (glibc's malloc_trim).

A client that made the daemon hold megabytes of replies leaves them freed
but kept by the C allocator: replies of tens of KiB come from the heap, and
freed heap in the middle of it stays resident. `HeapTrimmer.trim` asks glibc
to return it, on a worker thread (the call releases the GIL; it costs about
10 ms per 150 MiB returned, well under 1 ms when there is nothing to return).
Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import trio

__all__ = ["HeapTrimmer"]


def _malloc_trim() -> Callable[[], object] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class HeapTrimmer:
    """Trims once per request, one at a time: requests during a trim make one more."""

    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._running = False
        self._again = False

    async def trim(self) -> None:
        if self._trim is None:
            return
        if self._running:
            self._again = True  # what was freed since the running one began
            return
        self._running = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await trio.to_thread.run_sync(self._trim)
        finally:
            self._running = False

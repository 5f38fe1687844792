"""SIGTERM and SIGINT, read from a wakeup fd: no Python code runs per signal.

A Python signal handler runs between two bytecodes of whatever the main thread
is doing, and a signal that lands while it runs starts it again inside itself.
A storm of SIGTERMs (a supervisor in a loop, `kill` in a shell loop) arriving
faster than the handler returns nests it until the interpreter raises
RecursionError in the middle of the daemon: trio's own receiver does exactly
this (its handler calls into trio's entry queue, slower still once its wakeup
socket is full).

So the handler is a C function that does nothing, installed for the whole life
of the process, and the signals are read as bytes: CPython's C-level handler
writes each signal's number to the fd given to `signal.set_wakeup_fd` before
it schedules the Python handler. A storm fills the socket's buffer and the rest
are dropped, which is harmless: one SIGTERM pending is as good as a thousand.
"""

from __future__ import annotations

import operator
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Final

import trio

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)

# Any C function taking two arguments would do: it runs no bytecode, so the
# interpreter has nowhere to start a second handler inside the first. Not
# SIG_IGN: an ignored disposition survives exec, and the daemon's children
# must get SIGTERM's default action.
_C_NO_OP: Final = operator.is_


@contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """While open, stop signals do nothing until `stop_signals` reads them.

    On exit they are set to SIG_IGN for good: the process ends next, and
    Python's finalization puts the default action back in place of a handler,
    so a SIGTERM then would turn the exit code into death by signal. No child
    is started from there on to inherit it.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, _C_NO_OP)
    try:
        yield
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


@contextmanager
def stop_signals() -> Iterator[AsyncIterator[int]]:
    """The stop signals that arrive while open, as an async iterator of numbers.

    Takes over the process's wakeup fd from trio (which only uses it to wake
    for Python handlers: the daemon has none that need waking) and leaves none
    on exit: trio closes its socketpair before it puts back the fd it found,
    so its own fd handed back would meet a storm closed (an EPIPE reported on
    stderr per signal) or reused by the next file opened. Open
    `stop_signals_ignored` first.
    """
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield _received(reader)
    finally:
        signal.set_wakeup_fd(-1)
        reader.close()
        writer.close()


async def _received(reader: socket.socket) -> AsyncIterator[int]:
    wanted = set(STOP_SIGNALS)
    while True:
        await trio.lowlevel.wait_readable(reader)
        try:
            data = reader.recv(4096)
        except BlockingIOError:
            continue
        # Signals read together were pending together: one each, as trio counts them.
        for signum in dict.fromkeys(data):
            if signum in wanted:
                yield signum

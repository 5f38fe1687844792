"""fdatasync through Linux kernel AIO: the WAL's sync without a thread hop.

The event loop must not block on an fsync, so a sync runs elsewhere and its
end must wake the loop. Through a thread that costs two hand-offs per batch,
each a wake-up of a sleeping thread on another CPU plus a pass of the GIL:
100 µs and more on a VM, as much as the sync itself. Kernel AIO
(`IOCB_CMD_FDSYNC`, Linux 4.18+) runs the same `vfs_fsync(datasync=1)` as
`fdatasync(2)` on a kernel worker and signals an eventfd the loop waits on:
one wake-up, and no Python thread.

No dependency: four system calls through ctypes (`io_setup`, `io_submit`,
`io_getevents`, `io_destroy`), on the architectures whose numbers are known
here. Anything else, or a kernel that refuses, gets `None` from `open` and
the caller syncs on a thread as before.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from typing import Final

__all__ = ["KernelSync"]

# (io_setup, io_destroy, io_submit, io_getevents): arch/x86/entry/syscalls and
# include/uapi/asm-generic/unistd.h (arm64 uses the generic table).
_SYSCALLS: Final = {"x86_64": (206, 207, 209, 208), "aarch64": (0, 1, 2, 4)}
_IOCB_CMD_FDSYNC: Final = 3
_IOCB_FLAG_RESFD: Final = 1


class _Iocb(ctypes.Structure):
    # include/uapi/linux/aio_abi.h, little-endian layout (aio_key before aio_rw_flags).
    _fields_ = (
        ("aio_data", ctypes.c_uint64),
        ("aio_key", ctypes.c_uint32),
        ("aio_rw_flags", ctypes.c_int32),
        ("aio_lio_opcode", ctypes.c_uint16),
        ("aio_reqprio", ctypes.c_int16),
        ("aio_fildes", ctypes.c_uint32),
        ("aio_buf", ctypes.c_uint64),
        ("aio_nbytes", ctypes.c_uint64),
        ("aio_offset", ctypes.c_int64),
        ("aio_reserved2", ctypes.c_uint64),
        ("aio_flags", ctypes.c_uint32),
        ("aio_resfd", ctypes.c_uint32),
    )


class _IoEvent(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_uint64),
        ("obj", ctypes.c_uint64),
        ("res", ctypes.c_int64),
        ("res2", ctypes.c_int64),
    )


class KernelSync:
    """One fdatasync in flight at a time; its completion makes `eventfd` readable.

    Use: `submit(fd)`, wait until `eventfd` is readable (the event loop's
    epoll), then `reap()`: None when the data is durable, else the OSError
    the sync failed with (a failed fsync: never retry it, docs/durability.md rule 5).
    """

    def __init__(self, libc: ctypes.CDLL, numbers: tuple[int, int, int, int]) -> None:
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._setup, self._destroy, self._submit, self._getevents = numbers
        self._ctx = ctypes.c_ulong(0)
        self.eventfd = -1
        if self._syscall(self._setup, ctypes.c_long(1), ctypes.byref(self._ctx)) != 0:
            raise _errno_error("io_setup")
        try:
            self.eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except BaseException:
            self.close()
            raise
        self._iocb = _Iocb(
            aio_lio_opcode=_IOCB_CMD_FDSYNC, aio_flags=_IOCB_FLAG_RESFD, aio_resfd=self.eventfd
        )
        self._iocbs = (ctypes.POINTER(_Iocb) * 1)(ctypes.pointer(self._iocb))
        self._event = _IoEvent()

    @classmethod
    def open(cls) -> tuple[KernelSync | None, str]:
        """A KernelSync, or None and why not (the caller then syncs on a thread)."""
        numbers = _SYSCALLS.get(platform.machine())
        if not sys.platform.startswith("linux") or numbers is None:
            return None, f"no kernel AIO numbers for {sys.platform}/{platform.machine()}"
        try:
            return cls(ctypes.CDLL(None, use_errno=True), numbers), "kernel AIO"
        except OSError as exc:
            return None, f"kernel AIO unavailable: {exc}"

    def submit(self, fd: int) -> None:
        """Start an fdatasync of `fd`. OSError: not started (sync some other way)."""
        self._iocb.aio_fildes = fd
        if self._syscall(self._submit, self._ctx, ctypes.c_long(1), self._iocbs) != 1:
            raise _errno_error("io_submit")

    def reap(self) -> OSError | None:
        """The result of the sync `eventfd` signalled: None when durable, else its error."""
        os.eventfd_read(self.eventfd)
        while True:
            got = self._syscall(
                self._getevents,
                self._ctx,
                ctypes.c_long(1),
                ctypes.c_long(1),
                ctypes.byref(self._event),
                None,
            )
            if got == 1:
                break
            if got < 0 and ctypes.get_errno() == errno.EINTR:
                continue
            # Cannot happen with one sync in flight and its eventfd signalled;
            # if it does, durability is unknown: report a failed sync.
            return _errno_error("io_getevents") if got < 0 else OSError(errno.EIO, "no AIO event")
        res = self._event.res
        return None if res >= 0 else OSError(-res, f"fdatasync (AIO): {os.strerror(-res)}")

    def close(self) -> None:
        """Release the AIO context and the eventfd (no sync may be in flight)."""
        if self._ctx.value:
            self._syscall(self._destroy, self._ctx)
            self._ctx = ctypes.c_ulong(0)
        if self.eventfd >= 0:
            os.close(self.eventfd)
            self.eventfd = -1


def _errno_error(call: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{call}: {os.strerror(code)}")

"""An asyncio transport for the sans-io JSON-RPC session (`reynctl.jsonrpc`).

`AsyncClient` owns one Unix-socket connection: a reader task feeds the bytes
it receives to the `Session`, resolves the future of each answer by id and
queues what the daemon pushes (`notify`, `lagged`). Calls may overlap (the
daemon answers them in any order). When the connection ends, every pending
call fails with `ConnectionClosed` and `notifications()` ends with it.

asyncio only (textual runs on it); the trio daemon never imports this.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

from reynctl.errors import (
    ClientError,
    ConnectionClosed,
    DaemonTimeout,
    DaemonUnreachable,
    NoDaemon,
    SocketPermissionDenied,
    StaleSocket,
)
from reynctl.jsonrpc import ErrorResponse, Response, ServerMessage, Session, decode_result
from reynctl.trust import check_daemon

__all__ = ["AsyncClient", "open_client"]

T = TypeVar("T")

_RECV = 1 << 16


class AsyncClient:
    """One connection to the daemon; create with `open_client`."""

    def __init__(
        self,
        path: Path,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        timeout: float | None = 30.0,
    ) -> None:
        self.path = path
        self.timeout = timeout
        self._reader = reader
        self._writer = writer
        self._session = Session()
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._pushed: asyncio.Queue[ServerMessage | ClientError] = asyncio.Queue()
        self._closed: ClientError | None = None
        self._task = asyncio.create_task(self._read_loop(), name=f"reynctl-reader {path}")

    @property
    def closed(self) -> ClientError | None:
        """Why the connection ended, or None while it is open."""
        return self._closed

    async def call(self, method: str, params: Any, result_type: type[T]) -> T:
        """Call `method`; raises the daemon's `ReyndError` or a `ClientError`."""
        if self._closed is not None:
            raise self._closed
        rid, data = self._session.request(method, params)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, OSError):
            self._waiting.pop(rid, None)
            self._fail(ConnectionClosed(self.path, "while sending"))
            raise ConnectionClosed(self.path, "while sending") from None
        try:
            raw = await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            raise DaemonTimeout(self.path, method, self.timeout or 0) from None
        finally:
            self._waiting.pop(rid, None)
        return decode_result(raw, result_type)

    async def notifications(self) -> AsyncIterator[ServerMessage]:
        """What the daemon pushes, in order; raises ConnectionClosed when it hangs up."""
        while True:
            item = await self._pushed.get()
            if isinstance(item, ClientError):
                self._pushed.put_nowait(item)  # every later reader sees the end too
                raise item
            yield item

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        self._fail(ConnectionClosed(self.path, "closed by this client"))
        self._task.cancel()
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
        try:
            await self._task
        except asyncio.CancelledError:
            if (task := asyncio.current_task()) is not None and task.cancelling():
                raise

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_RECV)
                if not data:
                    detail = "in the middle of a message" if self._session.partial else ""
                    self._fail(ConnectionClosed(self.path, detail))
                    return
                for event in self._session.receive(data):
                    self._dispatch(event)
        except (ConnectionError, OSError):
            self._fail(ConnectionClosed(self.path, "reset"))
        except ClientError as exc:  # a protocol violation: nothing further can be trusted
            self._fail(exc)

    def _dispatch(self, event: Response | ErrorResponse | ServerMessage) -> None:
        if isinstance(event, ServerMessage):
            self._pushed.put_nowait(event)
            return
        if event.id is None:  # an error the daemon could not attribute: fail every call
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(event.error)
            return
        waiter = self._waiting.get(event.id)
        if waiter is None or waiter.done():
            return  # a call that timed out or was cancelled meanwhile
        if isinstance(event, ErrorResponse):
            waiter.set_exception(event.error)
        else:
            waiter.set_result(event.raw)

    def _fail(self, exc: ClientError) -> None:
        if self._closed is not None:
            return
        self._closed = exc
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(exc)
        self._pushed.put_nowait(exc)


async def open_client(
    path: Path,
    *,
    timeout: float | None = 30.0,  # noqa: ASYNC109
    daemon_uid: int | None = None,
) -> AsyncClient:
    """Connect to the daemon at `path`; a `DaemonUnreachable` subclass names the cause.

    The daemon must run as our uid, root, or `daemon_uid` (else UntrustedDaemon,
    before anything is sent: see reynctl.trust).
    """
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(os.fspath(path), limit=_RECV), timeout
        )
    except FileNotFoundError:
        raise NoDaemon(path) from None
    except ConnectionRefusedError:
        if not path.is_socket():  # noqa: ASYNC240 (a stat of a local path, once)
            raise DaemonUnreachable(path, "not a socket") from None
        raise StaleSocket(path) from None
    except PermissionError:
        raise SocketPermissionDenied(path) from None
    except TimeoutError:
        raise DaemonTimeout(path, "connect", timeout or 0) from None
    except OSError as exc:
        reason = "not a socket" if exc.errno == errno.ENOTSOCK else exc.strerror or str(exc)
        raise DaemonUnreachable(path, reason) from None
    try:
        check_daemon(writer.get_extra_info("socket"), path, daemon_uid)
    except BaseException:
        writer.close()
        raise
    return AsyncClient(path, reader, writer, timeout=timeout)

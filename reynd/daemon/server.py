"""The Unix socket server: connections, framing, limits, transport-level methods.

Framing is one JSON-RPC message per line. Each connection has one reader task
that splits lines out of a bytearray and starts one task per message in the
connection's request nursery (at most `max_requests_per_connection` at once:
the reader waits for a slot, which back-pressures a flooding client).
Responses and notifications share the connection's write lock.

Replies made and not yet written count against the connection's budget
(`max_unsent_bytes_per_connection`, rpc.ReplyBudget): past it, the reader
reads no more and no new request or batch member of that connection starts
until the client has read enough. Once a write finds the client gone,
everything still running for the connection (requests, batches, subscription
pumps, the reader) is cancelled: no work is done for a client that cannot
receive it.

A line longer than `max_message_bytes` is answered with one -32008 error
(id null) and skipped up to its newline without being buffered; the
connection then continues with the next line, so one bad message does not cost
a client its subscriptions.

Slots cannot be held by clients that do nothing (_Connection.watch): a line
must end within `line_timeout_s` of its first byte (else one -32019 error,
id null, and the connection is closed), and a connection with no call in
flight and no subscription is closed after `idle_timeout_s` without a request.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog
import trio

from reynd.daemon.context import CallContext, Peer, ServerInfo
from reynd.daemon.heap import HeapTrimmer
from reynd.daemon.hub import Hub, Subscription
from reynd.daemon.listen import peer_credentials
from reynd.daemon.rpc import (
    Dispatcher,
    Handler,
    QuickCall,
    ReplyBudget,
    Send,
    encode_error_line,
)
from reynd.protocol import errors, limits, moves
from reynd.protocol import methods as m
from reynd.protocol.openrpc import openrpc_document
from reynd.protocol.peer import peer_groups

__all__ = ["Server", "ServerLimits"]

log = structlog.get_logger("reynd.server")

_RECEIVE_SIZE = 65536
_INLINE_RUN = 16  # quick calls a reader runs back to back before it yields
_ACCEPT_RETRY = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS))
# Connections being refused at once, each holding a descriptor (fdlimit.RESERVE_MIN
# counts them): past the cap, a flood waits in the backlog, not in our fd table.
_MAX_REFUSING = 4


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Transport limits (from DaemonConfig)."""

    max_message_bytes: int = limits.MAX_MESSAGE_BYTES
    max_connections: int = limits.MAX_CONNECTIONS
    max_requests_per_connection: int = limits.MAX_REQUESTS_PER_CONNECTION
    max_batch_members: int = limits.MAX_BATCH_MEMBERS
    max_subscriptions_per_connection: int = limits.MAX_SUBSCRIPTIONS_PER_CONNECTION
    max_unsent_bytes_per_connection: int = limits.MAX_UNSENT_BYTES_PER_CONNECTION
    allowed_gid: int | None = None
    # How long a reader polls for a client's next line before it sleeps (_Receiver).
    busy_poll_s: float = limits.BUSY_POLL_US / 1e6
    # A line must end this long after its first byte; 0: no limit.
    line_timeout_s: float = limits.LINE_TIMEOUT_S
    # A connection with no call in flight and no subscription is closed after
    # this long without a request; 0: never.
    idle_timeout_s: float = limits.IDLE_TIMEOUT_S


class _Connection:
    """One client: its stream, its write lock and its subscriptions (an rpc.Output)."""

    __slots__ = (
        "budget",
        "calls",
        "client",
        "closed",
        "id",
        "last_active",
        "line_since",
        "lock",
        "peer",
        "pending",
        "pumps",
        "scope",
        "stream",
        "subs",
        "watch",
    )

    def __init__(
        self, id: int, stream: trio.SocketStream, peer: Peer | None, max_unsent: int
    ) -> None:
        self.id = id
        self.stream = stream
        self.peer = peer
        self.client = ""  # named by session.hello
        self.lock = trio.Lock()
        self.closed = False
        self.budget = ReplyBudget(max_unsent)
        # Everything run for this client; cancelled when a write finds it gone.
        self.scope = trio.CancelScope()
        self.subs: dict[str, Subscription] = {}
        # Subscriptions whose pump starts once the reply to `subscribe` is written,
        # keyed by the id() of that request's CallContext.
        self.pending: dict[int, list[Subscription]] = {}
        self.pumps: trio.Nursery | None = None
        # For the timeouts (Server._watch): calls started and not finished, when
        # the last one finished (or a subscription ended), since when the reader
        # waits for the end of a line (None: for none, or it is not reading),
        # and the watchdog's sleep, whose deadline a new partial line brings forward.
        self.calls = 0
        self.last_active = trio.current_time()
        self.line_since: float | None = None
        self.watch: trio.CancelScope | None = None

    @property
    def idle(self) -> bool:
        """Nothing running for the client and nothing it is subscribed to."""
        return not self.calls and not self.subs and not self.pending

    def line_begun(self, line_timeout: float) -> None:
        """The reader now waits for the rest of a line begun (or resumed) just now."""
        now = trio.current_time()
        self.line_since = now
        if self.watch is not None and line_timeout:
            self.watch.deadline = min(self.watch.deadline, now + line_timeout)

    async def line(self, data: bytes) -> None:
        """Send one line; a peer that went away is not an error (it just gets nothing)."""
        if self.closed:
            return
        data += b"\n"
        sent = 0
        if not self.lock.locked():
            # Nothing else is being written (one reply at a time, the common
            # case): a direct write usually takes the whole line, and nothing
            # can interleave before it returns, so neither lock nor budget.
            sent = self._write_now(data)
            if sent == len(data) or self.closed:
                return
        size = len(data) - sent
        self.budget.hold(size)
        try:
            if self.lock.locked():
                await self.lock.acquire()
            else:
                self.lock.acquire_nowait()
            try:
                await self._send(memoryview(data)[sent:] if sent else data)
            finally:
                self.lock.release()
        finally:
            self.budget.release(size)

    @contextlib.asynccontextmanager
    async def pieces(self) -> AsyncIterator[Send]:
        """Hold the connection to write one line piece by piece (a large batch reply)."""
        async with self.lock:
            try:
                yield self._send_counted
            except BaseException:
                # A line cut short would garble every later one: end the connection.
                self._cut()
                await trio.aclose_forcefully(self.stream)
                raise
            await self._send(b"\n")

    async def _send_counted(self, data: bytes) -> None:
        self.budget.hold(len(data))
        try:
            await self._send(data)
        finally:
            self.budget.release(len(data))

    async def _send(self, data: bytes | memoryview) -> None:
        """Write `data` whole (under the lock); a client gone cuts the connection.

        A reply usually fits the socket buffer: one direct non-blocking write
        then, without send_all's trip through the scheduler (per reply, that
        trip is a good part of a small request's cost). Whatever is left
        goes through send_all, which waits for room.
        """
        if self.closed:
            return
        sent = self._write_now(data)
        if sent == len(data) or self.closed:
            return
        try:
            await self.stream.send_all(memoryview(data)[sent:])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._cut()

    def _write_now(self, data: bytes | memoryview) -> int:
        """What one non-blocking write took of `data` (a client gone cuts the connection)."""
        fd = self.stream.socket.fileno()
        if fd < 0:
            return 0
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError:  # EPIPE, ECONNRESET: the client went away
            self._cut()
            return 0

    def _cut(self) -> None:
        """Nothing more can reach the client: stop writing and working for it.

        Its requests, batches, pumps and reader end at their next checkpoint.
        """
        self.closed = True
        self.scope.cancel()


class _Receiver:
    """Reads a connection's socket; once a read drained it, polls for `spin` seconds first.

    A client with one request in flight sends its next one some tens of
    microseconds after it reads the reply. Waiting for it through epoll puts
    the loop to sleep when nothing else runs: the CPU goes idle, and waking
    it (on a VM, an interrupt through the hypervisor) and running the next
    request on caches other work has used cost more than the request itself.
    So the reader first keeps trying the read, yielding to the other tasks
    between tries (a runnable task makes trio poll, not sleep), and waits on
    epoll only when `spin` has passed without data: bounded CPU (at most
    `spin` after each drained read, none once idle) for latency, the trade
    of Linux's busy-poll sockets. A read shorter than the buffer drained the
    socket; after a full one the next read is tried at once.

    No polling while the connection has a call in flight (`busy`): such a
    client waits for its reply (a pipelining one sent its lines already),
    and a durable append's reply is a sync away. Polling through it cost
    each append up to `spin` of CPU, taken from the client and the disk's
    completion on a machine of two cores.
    """

    __slots__ = ("_busy", "_drained", "_fd", "_spin")

    def __init__(self, fd: int, spin: float, busy: Callable[[], bool]) -> None:
        self._fd = fd
        self._spin = spin
        self._busy = busy
        self._drained = False

    async def __call__(self) -> bytes:
        until = 0.0
        while True:
            if self._drained:
                now = time.perf_counter()
                if not until:
                    until = now + self._spin
                if now >= until or self._busy():
                    await trio.lowlevel.wait_readable(self._fd)
                else:
                    await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.checkpoint()  # a flooding client yields to the others
            try:
                chunk = os.read(self._fd, _RECEIVE_SIZE)
            except BlockingIOError:
                self._drained = True
                continue
            self._drained = len(chunk) < _RECEIVE_SIZE
            return chunk


class _Workers:
    """The tasks that run one connection's requests, each parked between requests.

    A request runs in a task of its own, as many at once as the connection's
    slots allow; a task that finished one waits for the next instead of
    ending, because starting and ending a task costs more than a small read
    itself. Each line wakes (or starts) one task, and a task takes the oldest
    line waiting, so requests start in the order they came whichever task the
    scheduler runs first. `close` (the client sent its last line) ends the
    idle tasks; a busy one ends once no line waits.
    """

    __slots__ = ("_closing", "_idle", "_lines", "_nursery", "_run")

    def __init__(self, nursery: trio.Nursery, run: Callable[[bytes], Awaitable[None]]) -> None:
        self._nursery = nursery
        self._run = run
        self._idle: list[trio.lowlevel.Task] = []
        self._lines: collections.deque[bytes] = collections.deque()
        self._closing = False

    def submit(self, line: bytes) -> None:
        """Queue `line` and wake an idle task for it, or start one when none is idle."""
        self._lines.append(line)
        if self._idle:
            trio.lowlevel.reschedule(self._idle.pop())
        else:
            self._nursery.start_soon(self._work)

    @property
    def waiting(self) -> bool:
        """A line is queued that no task has started yet."""
        return bool(self._lines)

    def close(self) -> None:
        self._closing = True
        idle, self._idle = self._idle, []
        for task in idle:
            trio.lowlevel.reschedule(task)

    async def _work(self) -> None:
        # Lines and wake-ups (or starts) are one for one; at close a task may
        # find the line it was woken for taken by another: it just ends.
        while self._lines:
            await self._run(self._lines.popleft())
            if self._closing:
                continue
            task = trio.lowlevel.current_task()
            self._idle.append(task)

            def abort(_: object, task: trio.lowlevel.Task = task) -> trio.lowlevel.Abort:
                self._idle.remove(task)  # cancelled while idle (the connection is cut)
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)


class Server:
    """Serves the App's handlers plus the transport's own methods on a listener."""

    def __init__(
        self,
        app_handlers: Mapping[str, Handler],
        hub: Hub,
        info: ServerInfo,
        shutdown: trio.Event,
        limits: ServerLimits | None = None,
        *,
        head: Callable[[], int],
        quick: Mapping[str, Callable[[Any], bool]] | None = None,
        brief: Collection[str] = (),
    ) -> None:
        """`head`: reads the tip (a subscription starts there); `quick`: the methods answered
        without waiting, by params, and `brief`: those that wait for no more than a sync
        (Dispatcher; the daemon's tables are daemon/quick.py)."""
        self.hub = hub
        self.info = info
        self.limits = limits or ServerLimits()
        self._shutdown = shutdown
        self._head = head
        self._dispatcher = Dispatcher(
            {**app_handlers, **self._own_handlers()},
            max_batch_members=self.limits.max_batch_members,
            quick=quick,
            brief=brief,
        )
        self._conn_ids = itertools.count(1)
        self._connections: dict[int, _Connection] = {}
        self._admitted = 0  # connections accepted and not refused, until they end
        self._inflight = 0
        self._idle = trio.Event()
        self._idle.set()
        self._accept_scope = trio.CancelScope()
        self._conn_scope = trio.CancelScope()
        self._discover = msgspec.Raw(msgspec.json.encode(openrpc_document()))
        self._heap = HeapTrimmer()

    # -- lifecycle -----------------------------------------------------------

    async def serve(
        self,
        listener: trio.SocketListener,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections until `stop`; `started` once the listener is accepting."""
        with self._conn_scope:
            async with trio.open_nursery() as nursery:
                task_status.started()
                with self._accept_scope:
                    await self._accept_loop(listener, nursery)
                await trio.sleep_forever()  # until stop() cancels the connections

    async def stop(self, grace: float) -> None:
        """Stop accepting, refuse new requests, give in-flight ones `grace` s, then close all."""
        self._accept_scope.cancel()
        self._dispatcher.refuse_all(
            errors.ShuttingDown("The daemon is shutting down; retry once it is back")
        )
        with trio.move_on_after(grace):
            await self._idle.wait()
        self._conn_scope.cancel()

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        refusing = trio.Semaphore(_MAX_REFUSING)
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_RETRY:
                        raise
                    # Out of fds or memory: wait instead of spinning, keep serving the others.
                    log.warning("accept.failed", error=os.strerror(exc.errno or 0))
                    await trio.sleep(0.1)
                    continue
                # Counted here, not in the connection's task: a burst of accepts
                # before those tasks run must not pass the cap.
                if self._admitted >= self.limits.max_connections:
                    await refusing.acquire()
                    nursery.start_soon(self._refuse_extra, stream, refusing)
                    continue
                self._admitted += 1
                nursery.start_soon(self._serve_connection, stream)

    async def _refuse_extra(self, stream: trio.SocketStream, refusing: trio.Semaphore) -> None:
        """One connection past the cap: one connection_limit error line, then closed."""
        conn_id = next(self._conn_ids)
        limit = self.limits.max_connections
        try:
            async with stream:
                await self._refuse(
                    stream,
                    errors.ConnectionLimit(
                        f"Too many connections (limit {limit}); retry later",
                        {"limit": limit},
                    ),
                )
            log.warning("connection.refused", conn=conn_id, reason="limit")
        finally:
            refusing.release()

    # -- one connection --------------------------------------------------------

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            await self._serve_admitted(stream)
        finally:
            self._admitted -= 1

    async def _serve_admitted(self, stream: trio.SocketStream) -> None:
        conn_id = next(self._conn_ids)
        async with stream:
            peer = self._peer(stream)
            if not self._allowed(stream, peer):
                uid = peer.uid if peer else None
                err: errors.ReyndError = errors.PermissionDenied(
                    f"Permission denied: uid {uid} may not use this daemon "
                    "(same user only, or the configured allowed_group)",
                    {"uid": uid},
                )
                await self._refuse(stream, err)
                log.warning("connection.refused", conn=conn_id, reason="peer", peer=peer)
                return
            conn = _Connection(conn_id, stream, peer, self.limits.max_unsent_bytes_per_connection)
            self._connections[conn_id] = conn
            self.info.connections = len(self._connections)
            log.debug("connection.open", conn=conn_id, peer=peer)
            try:
                with conn.scope:
                    async with trio.open_nursery() as pumps:
                        conn.pumps = pumps
                        if self.limits.line_timeout_s or self.limits.idle_timeout_s:
                            pumps.start_soon(self._watch, conn)
                        async with trio.open_nursery() as requests:
                            await self._read_loop(conn, requests)
                        # The client is done sending and every reply is written:
                        # its subscriptions end with the connection.
                        pumps.cancel_scope.cancel()
                if conn.closed or conn.budget.throttled:
                    # It may have left megabytes of freed replies resident.
                    await self._heap.trim()
            except Exception:
                # Whatever failed here ends this connection, never the server.
                log.exception("connection.failed", conn=conn_id)
            finally:
                for sub_id in list(conn.subs):
                    self.hub.unsubscribe(sub_id)
                self.info.subscriptions = len(self.hub)
                del self._connections[conn_id]
                self.info.connections = len(self._connections)
                log.debug("connection.close", conn=conn_id, client_gone=conn.closed)

    async def _watch(self, conn: _Connection) -> None:
        """Close the connection once a line takes too long or it idled too long.

        Sleeps until the nearest deadline and looks again: activity since
        only moves them later (an idle one is counted from `last_active`),
        and a partial line begun meanwhile brings the sleep's deadline
        forward itself (`line_begun`). Runs in the pumps nursery: it ends
        with the connection.
        """
        line_timeout = self.limits.line_timeout_s
        idle_timeout = self.limits.idle_timeout_s
        while True:
            now = trio.current_time()
            line_deadline = math.inf
            if line_timeout and conn.line_since is not None:
                line_deadline = conn.line_since + line_timeout
            if now >= line_deadline:
                await self._line_timed_out(conn, line_timeout)
                return
            idle_deadline = math.inf
            if idle_timeout:
                idle_deadline = (conn.last_active if conn.idle else now) + idle_timeout
                if conn.idle and now >= idle_deadline:
                    log.info("connection.idle_closed", conn=conn.id, idle_timeout_s=idle_timeout)
                    conn.scope.cancel()
                    return
            with trio.CancelScope(deadline=min(line_deadline, idle_deadline)) as conn.watch:
                await trio.sleep_forever()
            conn.watch = None

    async def _line_timed_out(self, conn: _Connection, limit: float) -> None:
        """One -32019 error line (id null), then the connection is closed."""
        err = errors.LimitExceeded(
            f"Request line not ended within {limit:g} s of its first byte: the connection is "
            "closed (send each message whole, ended by a newline)",
            {"limit_name": "line_timeout_s", "limit": limit},
        )
        with trio.move_on_after(1.0):  # a client that reads nothing gets nothing
            await conn.line(encode_error_line(err))
        log.warning("connection.line_timed_out", conn=conn.id, line_timeout_s=limit)
        conn.scope.cancel()

    async def _refuse(self, stream: trio.SocketStream, err: errors.ReyndError) -> None:
        with trio.move_on_after(1.0):  # a refused peer never holds a task for long
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(encode_error_line(err) + b"\n")

    def _peer(self, stream: trio.SocketStream) -> Peer | None:
        try:
            pid, uid, gid = peer_credentials(stream.socket)
        except OSError:
            return None
        return Peer(pid, uid, gid)

    def _allowed(self, stream: trio.SocketStream, peer: Peer | None) -> bool:
        if peer is None:
            return False
        if peer.uid == os.geteuid():
            return True
        group = self.limits.allowed_gid
        if group is None:
            return False
        return peer.gid == group or group in peer_groups(stream.socket)

    async def _read_loop(self, conn: _Connection, requests: trio.Nursery) -> None:
        """Split the stream into lines and run each in a task of its own, until EOF."""
        slots = trio.Semaphore(self.limits.max_requests_per_connection)
        workers = _Workers(requests, lambda line: self._run(conn, line, slots))
        try:
            await self._read_lines(conn, slots, workers)
        finally:
            workers.close()

    # A named exception to the complexity rules: the connection's reader, on the hot path.
    # Its framing state (buffer, scan position, oversize discard, throttle, line timer)
    # lives in this one loop's locals; split, it would travel between helpers per chunk.
    async def _read_lines(  # noqa: C901, PLR0912, PLR0915 (one pass of the framing state machine)
        self, conn: _Connection, slots: trio.Semaphore, workers: _Workers
    ) -> None:
        limit = self.limits.max_message_bytes
        line_timeout = self.limits.line_timeout_s
        receive = _Receiver(
            conn.stream.socket.fileno(), self.limits.busy_poll_s, lambda: conn.calls > 0
        )
        buf = bytearray()
        scanned = 0  # bytes of buf already searched for a newline
        discarding = False  # inside an oversize line: drop bytes up to its newline
        throttled = False  # logged once per connection
        inline = 0  # quick calls run in this reader
        while True:
            try:
                chunk = await receive()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return  # closed here, or reset by the client
            if not chunk:
                return
            ended = False  # a line ended in this chunk
            if discarding:
                cut = chunk.find(b"\n")
                if cut < 0:
                    continue
                chunk = chunk[cut + 1 :]
                discarding = False
                ended = True
            buf += chunk
            start = 0
            while (end := buf.find(b"\n", scanned)) >= 0:
                ended = True
                if end - start > limit:
                    await conn.line(self._too_large(limit))
                else:
                    line = bytes(buf[start:end])
                    if line and not line.isspace():
                        if conn.budget.exceeded:
                            # The client leaves its replies unread: read nothing more.
                            if not throttled:
                                throttled = True
                                log.info(
                                    "connection.throttled", conn=conn.id, unsent=conn.budget.unsent
                                )
                            conn.line_since = None  # not reading: no line is late
                            await conn.budget.room()
                        try:  # no trip through the scheduler while a slot is free
                            slots.acquire_nowait()
                        except trio.WouldBlock:
                            conn.line_since = None
                            await slots.acquire()
                        self._begin()
                        conn.calls += 1
                        # Started in order (no earlier line waits) and done without
                        # waiting, or within a sync and alone: no hand-over to a
                        # request task.
                        quick = (
                            None
                            if workers.waiting
                            else self._dispatcher.quick_call(
                                line, alone=conn.calls == 1 and buf.find(b"\n", end + 1) < 0
                            )
                        )
                        if quick is None:
                            workers.submit(line)
                        else:
                            # Reading waits on the call, as on a slot: no line is late
                            # meanwhile (a partial one left is timed again below).
                            conn.line_since = None
                            await self._run(conn, line, slots, quick)
                            inline += 1
                            if inline % _INLINE_RUN == 0:
                                # A client pipelining many lets the others in; one
                                # found gone stops here (its scope is cancelled).
                                await trio.lowlevel.checkpoint()
                start = scanned = end + 1
            if start:
                del buf[:start]
            scanned = len(buf)
            if scanned > limit:
                # Answer now and stop buffering: the rest of this line is skipped.
                await conn.line(self._too_large(limit))
                buf.clear()
                scanned = 0
                discarding = True
            if not (buf or discarding):
                conn.line_since = None
            elif ended or conn.line_since is None:
                conn.line_begun(line_timeout)

    def _too_large(self, limit: int) -> bytes:
        return encode_error_line(
            errors.MessageTooLarge(
                f"Message too large: a line may hold at most {limit} bytes; it was skipped",
                {"limit": limit},
            )
        )

    def _begin(self) -> None:
        self._inflight += 1
        if self._idle.is_set():
            self._idle = trio.Event()

    async def _run(
        self,
        conn: _Connection,
        line: bytes,
        slots: trio.Semaphore,
        quick: QuickCall | None = None,
    ) -> None:
        ctx = CallContext(conn.id, conn.peer, self.info, conn.client)
        try:
            try:
                await self._dispatcher.handle(line, ctx, conn, quick)
            except Exception:
                # The dispatcher answers every error itself; this is a bug in
                # it. One message must never take the daemon down with it.
                log.exception("rpc.unhandled", conn=conn.id, line_bytes=len(line))
                await conn.line(encode_error_line(errors.InternalError("Internal error")))
            started = conn.pending.pop(id(ctx), None)
            if started and conn.pumps is not None:
                for sub in started:
                    conn.pumps.start_soon(self._pump, conn, sub)
        finally:
            slots.release()
            conn.calls -= 1
            if not conn.calls:
                conn.last_active = trio.current_time()
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    async def _pump(self, conn: _Connection, sub: Subscription) -> None:
        try:
            await sub.pump(conn.line)
        finally:
            # Ended by unsubscribe, dropped as lagged or cut with its connection.
            conn.subs.pop(sub.id, None)
            conn.last_active = trio.current_time()
            self.hub.unsubscribe(sub.id)
            self.info.subscriptions = len(self.hub)

    # -- the transport's own methods ---------------------------------------------

    def _own_handlers(self) -> dict[str, Handler]:
        return {
            "subscribe": self._subscribe,
            "unsubscribe": self._unsubscribe,
            "daemon.shutdown": self._shutdown_method,
            "rpc.discover": self._rpc_discover,
            "session.hello": self._hello,
        }

    async def _hello(
        self, params: moves.SessionHelloParams, ctx: CallContext
    ) -> moves.SessionHelloResult:
        """Name the connection's client: reset records it makes keep the name."""
        self._connections[ctx.connection_id].client = params.client
        peer = ctx.peer
        return moves.SessionHelloResult(
            client=params.client,
            uid=None if peer is None else peer.uid,
            pid=None if peer is None else peer.pid,
        )

    async def _subscribe(self, params: m.SubscribeParams, ctx: CallContext) -> m.SubscribeResult:
        conn = self._connections[ctx.connection_id]
        limit = self.limits.max_subscriptions_per_connection
        if len(conn.subs) >= limit:
            raise errors.LimitExceeded(
                f"Too many subscriptions on this connection (limit {limit}): one subscription "
                "can take several topics; unsubscribe the ones you no longer read",
                {"limit_name": "max_subscriptions_per_connection", "limit": limit},
            )
        # Register before reading the head: an event in between is both notified
        # and <= head, never lost (clients skip seqs they already have).
        sub = self.hub.subscribe(conn.id, params.topics)
        conn.subs[sub.id] = sub
        self.info.subscriptions = len(self.hub)
        conn.pending.setdefault(id(ctx), []).append(sub)
        return m.SubscribeResult(subscription=sub.id, head=self._head())

    async def _unsubscribe(self, params: m.UnsubscribeParams, ctx: CallContext) -> m.OkResult:
        conn = self._connections[ctx.connection_id]
        if conn.subs.pop(params.subscription, None) is None:
            raise errors.InvalidParams(
                f"Invalid params: no subscription {params.subscription!r} on this connection",
                {"field": "subscription", "reason": "unknown subscription"},
            )
        self.hub.unsubscribe(params.subscription)
        self.info.subscriptions = len(self.hub)
        return m.OkResult()

    async def _shutdown_method(self, params: m.ShutdownParams, ctx: CallContext) -> m.OkResult:
        # The reply is written before the connections close: stop() waits for
        # in-flight requests, this one included.
        log.info("shutdown.requested", conn=ctx.connection_id, peer=ctx.peer)
        self._shutdown.set()
        return m.OkResult()

    async def _rpc_discover(self, params: m.RpcDiscoverParams, ctx: CallContext) -> msgspec.Raw:
        return self._discover

"""`reynd serve`: start the parts in order, serve, shut down cleanly.

Order of start-up: the App (takes the state lock, opens storage), the listening
socket, then READY=1, so that a client that sees the socket answer (or
systemd that sees READY) can rely on storage being open. Shutdown reverses it:
STOPPING=1, stop accepting, in-flight requests get a grace period and are then
cancelled, the App closes storage, the socket file is removed.

Exit codes: 0 clean shutdown; 1 another daemon holds the state directory or
answers on the socket; 2 usage or configuration error (including a socket
directory that is not ours alone); 3 any other failure
(cannot bind, storage failure, bug: the log has the traceback).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import structlog
import trio

from reynd import __version__
from reynd.daemon import systemd
from reynd.daemon.app import App
from reynd.daemon.config import DaemonConfig
from reynd.daemon.context import ServerInfo
from reynd.daemon.fdlimit import connection_cap, fds_in_use, raise_soft_limit
from reynd.daemon.hub import Hub
from reynd.daemon.listen import AnotherDaemon, ListenError, UnsafeDirectory, open_socket
from reynd.daemon.quick import BRIEF_CALLS, quick_calls
from reynd.daemon.server import Server, ServerLimits
from reynd.daemon.stop_signals import stop_signals, stop_signals_ignored
from reynd.replication.objects import Location
from reynd.replication.shipper import ReplicaRefused
from reynd.storage.errors import StorageError
from reynd.storage.lock import StateLocked

__all__ = ["EXIT_ANOTHER_DAEMON", "EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "ServeOptions", "serve"]

EXIT_OK = 0
EXIT_ANOTHER_DAEMON = 1
EXIT_USAGE = 2
EXIT_FAILURE = 3

log = structlog.get_logger("reynd.main")

# Records acknowledged before the nesting limit (protocol/limits.py) existed
# nest up to ~1000 levels, where the decoder's recursion stopped them then.
# Every component (msgspec, json, the config store) must still handle them at
# every start, whatever the call stack above: leave room well beyond that.
_RECURSION_LIMIT = 5000


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Everything `serve` needs, resolved by the command line."""

    state_dir: Path
    socket: Path
    config: DaemonConfig
    config_path: Path | None = None
    follow: Location | None = None  # serve a read-only replica of this prefix
    log: str = ""  # where the log goes (daemon.status shows it)


def serve(opts: ServeOptions) -> int:
    """Run the daemon until it is told to stop; returns the process exit code."""
    # Outside the signal receiver's lifetime (start-up, the last steps after
    # storage is closed) a SIGTERM must not kill us with the default action.
    with stop_signals_ignored():
        sys.setrecursionlimit(max(sys.getrecursionlimit(), _RECURSION_LIMIT))
        return _run(opts)


def _run(opts: ServeOptions) -> int:
    try:
        code = trio.run(_serve, opts)
    except BaseException as exc:  # mapped to an exit code below
        leaf = _single(exc)
        if isinstance(leaf, StateLocked | AnotherDaemon):
            print(f"reynd: {leaf}", file=sys.stderr)
            return EXIT_ANOTHER_DAEMON
        if isinstance(leaf, UnsafeDirectory | ReplicaRefused):  # the operator must act
            print(f"reynd: {leaf}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(leaf, ListenError | StorageError):
            print(f"reynd: {leaf}", file=sys.stderr)
            return EXIT_FAILURE
        log.critical("fatal", exc_info=exc)
        print(f"reynd: fatal: {leaf!r} (see the log above)", file=sys.stderr)
        return EXIT_FAILURE
    return code


def _single(exc: BaseException) -> BaseException:
    """The lone exception inside nested one-member groups (trio's strict groups)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _serve(opts: ServeOptions) -> int:
    config = opts.config
    fd_limit, raised_from = raise_soft_limit()  # before storage opens anything
    shutdown = trio.Event()
    info = ServerInfo(started_at=time.time(), started_monotonic=time.monotonic(), log=opts.log)
    hub = Hub(config.subscriber_queue)
    log.info(
        "starting",
        version=__version__,
        pid=os.getpid(),
        state_dir=str(opts.state_dir),
        socket=str(opts.socket),
        config=str(opts.config_path) if opts.config_path else None,
        fd_limit=fd_limit,
        fd_limit_raised_from=raised_from,
    )
    with stop_signals() as signals:
        async with trio.open_nursery() as root:
            root.start_soon(_watch_signals, signals, shutdown, root.cancel_scope)
            app = App(
                opts.state_dir,
                hub.publish,
                config.storage,
                config.retention,
                workspace=config.workspace,
                audit=config.audit,
                replicate=config.replicate,
                follow=opts.follow,
                on_fatal=shutdown.set,
                listens=hub.listens,
            )
            await root.start(app.run)
            bound = open_socket(opts.socket)
            try:
                info.socket = bound.path
                listener = trio.SocketListener(trio.socket.from_stdlib_socket(bound.sock))
                info.max_connections = _connection_cap(config.max_connections, fd_limit)
                limits = ServerLimits(
                    max_message_bytes=config.max_message_bytes,
                    max_connections=info.max_connections,
                    max_requests_per_connection=config.max_requests_per_connection,
                    max_batch_members=config.max_batch_members,
                    max_subscriptions_per_connection=config.max_subscriptions_per_connection,
                    max_unsent_bytes_per_connection=config.max_unsent_bytes_per_connection,
                    allowed_gid=config.allowed_gid(),
                    busy_poll_s=config.busy_poll_us / 1e6,
                    line_timeout_s=config.line_timeout_s,
                    idle_timeout_s=config.idle_timeout_s,
                )
                store = app.store

                def head() -> int:  # the tip, for subscriptions and quick calls
                    return store.head

                server = Server(
                    app.handlers(),
                    hub,
                    info,
                    shutdown,
                    limits,
                    head=head,
                    quick=quick_calls(head),
                    brief=BRIEF_CALLS,
                )
                await root.start(server.serve, listener)
                where = bound.path or "an inherited socket"
                status = _status_line(app, where)
                systemd.notify(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")
                log.info("ready", socket=str(where), inherited=bound.inherited)
                if systemd.notify_socket() is not None:
                    root.start_soon(_report_status, app, where, status)
                interval = systemd.watchdog_interval()
                if interval is not None:
                    root.start_soon(systemd.run_watchdog, interval)
                await shutdown.wait()
                systemd.notify("STOPPING=1\nSTATUS=shutting down")
                log.info("stopping", in_flight_grace_s=config.shutdown_grace_s)
                await server.stop(config.shutdown_grace_s)
            finally:
                bound.remove()
            # The App closes storage on cancellation, with its last sync shielded.
            root.cancel_scope.cancel()
    if app.committer.failure is not None:
        print(
            f"reynd: the WAL failed to write, sync or apply an append ({app.committer.failure!r}); "
            "restart to recover",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if app.failure is not None:
        print(f"reynd: fatal: {_single(app.failure)!r} (see the log above)", file=sys.stderr)
        return EXIT_FAILURE
    log.info("stopped")
    return EXIT_OK


def _connection_cap(configured: int, fd_limit: int) -> int:
    """`configured`, or fewer when the open-file limit leaves less room (fdlimit.py)."""
    in_use = fds_in_use()
    cap = connection_cap(configured, fd_limit, in_use)
    if cap < configured:
        log.warning(
            "connections.capped",
            max_connections=cap,
            configured=configured,
            fd_limit=fd_limit,
            fds_in_use=in_use,
            fix="raise the open-file limit (LimitNOFILE= in the unit, ulimit -n)",
        )
    return cap


STATUS_INTERVAL_S = 2.0  # how often `systemctl status` may see a new head


def _status_line(app: App, where: object) -> str:
    """One line for `systemctl status`: where it serves, the head, the agents, the replica."""
    store = app.store
    line = (
        f"serving on {where}; head {store.head} on branch {store.lineage.branch_of(store.head)}, "
        f"{len(store.state.agents)} agents"
    )
    if app.shipper is not None:
        r = app.shipper.info()
        line += f"; replication {r.state}, {r.backlog_records} records not shipped"
    if app.follower is not None:
        f = app.follower.info()
        line += f"; following {f.url} ({f.state}, {f.lag_records} records behind)"
    return line


async def _report_status(app: App, where: object, sent: str) -> None:
    """Keep systemd's STATUS= current (only what changed, at most every STATUS_INTERVAL_S)."""
    while True:
        await trio.sleep(STATUS_INTERVAL_S)
        line = _status_line(app, where)
        if line != sent:
            systemd.notify(f"STATUS={line}")
            sent = line


async def _watch_signals(
    signals: AsyncIterator[int], shutdown: trio.Event, root: trio.CancelScope
) -> None:
    async for signum in signals:
        if shutdown.is_set():
            # A second signal: skip the grace period.
            log.warning("signal.again", signal=signal.Signals(signum).name)
            root.cancel()
            return
        log.info("signal", signal=signal.Signals(signum).name)
        shutdown.set()

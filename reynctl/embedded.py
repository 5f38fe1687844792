"""A real `reynd serve` child process on a private state directory and socket.

Used by `reynctl demo`. Readiness comes from the daemon itself, over the same
sd_notify datagram socket systemd would read (`READY=1`), with a deadline;
the child's log goes to a file that is shown if it fails to start.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from reynctl.client import Client
from reynctl.errors import ClientError
from reynd.protocol.errors import ShuttingDown

__all__ = ["EmbeddedDaemon", "EmbeddedDaemonError", "daemon_command"]

# Run the daemon's own entry point with this interpreter, so the demo works
# from a venv or a checkout without the `reynd` script on PATH.
_ENTRY = "import sys; sys.argv[0] = 'reynd'; from reynd.daemon.cli import main; main()"


class EmbeddedDaemonError(ClientError):
    """The embedded daemon did not start or stop as expected."""

    name = "embedded_daemon"
    code = -33011


def daemon_command(state_dir: Path, sock: Path) -> list[str]:
    """The argv of `reynd serve` on `state_dir` and `sock`."""
    return [
        sys.executable,
        "-c",
        _ENTRY,
        "serve",
        "--state-dir",
        str(state_dir),
        "--socket",
        str(sock),
    ]


class EmbeddedDaemon:
    """Start with `start()` (or `with`), talk to `socket`, stop with `stop()`."""

    def __init__(self, workdir: Path, *, ready_timeout: float = 20.0) -> None:
        self.workdir = workdir
        self.state_dir = workdir / "state"
        self.socket = workdir / "reynd.sock"
        self.log_path = workdir / "reynd.log"
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Spawn the daemon and return once it has sent READY=1."""
        notify_path = self.workdir / "notify.sock"
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            notify.bind(os.fspath(notify_path))
            env = {
                k: v
                for k, v in os.environ.items()
                if k not in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC")
            }
            env["NOTIFY_SOCKET"] = os.fspath(notify_path)
            with self.log_path.open("wb") as log:
                self.proc = subprocess.Popen(
                    daemon_command(self.state_dir, self.socket),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=env,
                )
            self._wait_ready(notify)
        finally:
            notify.close()
            notify_path.unlink(missing_ok=True)

    def _wait_ready(self, notify: socket.socket) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout
        while (remaining := deadline - time.monotonic()) > 0:
            # Wake up at least every 0.2 s to notice a daemon that died early.
            readable, _, _ = select.select([notify], [], [], min(remaining, 0.2))
            if readable:
                fields = notify.recv(4096).decode(errors="replace").splitlines()
                if "READY=1" in fields:
                    return
            elif self.proc.poll() is not None:
                raise EmbeddedDaemonError(
                    f"the embedded daemon exited with status {self.proc.returncode} "
                    f"before it was ready:\n{self.log_tail()}"
                )
        self.kill()
        raise EmbeddedDaemonError(
            f"the embedded daemon was not ready within {self.ready_timeout:g}s:\n{self.log_tail()}"
        )

    def client(self, timeout: float | None = 30.0) -> Client:
        """A new connection to the embedded daemon."""
        return Client(self.socket, timeout=timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """Ask the daemon to shut down (daemon.shutdown); kill it past `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        try:
            with self.client(timeout=timeout) as c:
                c.shutdown()
        except (ClientError, ShuttingDown):
            pass  # already going away; the wait below decides
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise EmbeddedDaemonError(
                f"the embedded daemon did not stop within {timeout:g}s; killed it"
            ) from None

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 8, width: int = 400) -> str:
        """The last lines of the daemon's log, indented and cut to `width`."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "  (no log)"
        tail = [line if len(line) <= width else line[:width] + " …" for line in text.splitlines()]
        return "\n".join("  " + line for line in tail[-lines:]) or "  (empty log)"

    def __enter__(self) -> EmbeddedDaemon:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.stop(timeout=10.0 if exc_type is None else 3.0)
        except EmbeddedDaemonError:
            if exc_type is None:
                raise

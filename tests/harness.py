"""Run the real `reynd serve` as a subprocess and talk to it over its socket.

Readiness is the daemon's own sd_notify READY=1, read from a datagram socket
the harness binds and passes as $NOTIFY_SOCKET: no sleeps, no polling of the
socket file. Clients are deliberately primitive (blocking socket, one JSON
object per line) so that tests exercise the wire format, not a client library.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_Socket = socket.socket  # Daemon has a field named `socket`

READY_TIMEOUT = 30.0
IO_TIMEOUT = 15.0
# retention.set params that turn the default rewind horizon off: a test that needs GC
# to move the floor says so (storing a keep key keeps the horizon in force).
NO_HORIZON = {"horizon_checkpoints": 0, "horizon_age_s": 0}

# Variables of the test runner's environment that would change what the daemon does.
_SCRUB = (
    "REYN_SOCKET",
    "REYN_STATE_DIR",
    "REYN_CONFIG",
    "NOTIFY_SOCKET",
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "JOURNAL_STREAM",
    # The replication tests bring their own store and credentials.
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


@contextlib.contextmanager
def short_tempdir(prefix: str = "reynd-") -> Iterator[Path]:
    """A directory under /tmp with a short path (socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Client:
    """A blocking newline-delimited JSON-RPC connection."""

    def __init__(self, path: Path, timeout: float = IO_TIMEOUT) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self._buf = bytearray()
        self._next_id = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        """Send raw bytes (framing is the caller's business)."""
        self.sock.sendall(data)

    def send_json(self, obj: Any) -> None:
        self.send(json.dumps(obj).encode() + b"\n")

    def recv_line(self) -> bytes:
        """The next line; raises EOFError when the daemon closed the connection."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return line
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the daemon closed the connection")
            self._buf += chunk

    def recv_json(self) -> Any:
        return json.loads(self.recv_line())

    def at_eof(self) -> bool:
        """True if the daemon closed the connection (after any buffered lines)."""
        try:
            self.recv_line()
        except EOFError:
            return True
        return False

    def request(self, method: str, params: Any = None, id: Any = None) -> dict[str, Any]:
        """Send one request and return its whole response object."""
        if id is None:
            self._next_id += 1
            id = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
        if params is not None:
            msg["params"] = params
        self.send_json(msg)
        while True:
            reply = self.recv_json()
            if isinstance(reply, dict) and "id" in reply and reply["id"] == id:
                return reply
            # A notification or another reply: not ours; callers that care read them.

    def call(self, method: str, params: Any = None) -> Any:
        """The result of one request; AssertionError with the error object otherwise."""
        reply = self.request(method, params)
        assert "error" not in reply, reply["error"]
        return reply["result"]


@dataclass
class Daemon:
    """A running `reynd serve` process."""

    state_dir: Path
    socket: Path
    proc: subprocess.Popen[bytes]
    stderr_path: Path
    notify_sock: _Socket
    notifications: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def cpu_seconds(self) -> float:
        """User + system CPU time the daemon has used so far (/proc, clock-tick grain)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def connect(self) -> Client:
        return Client(self.socket)

    def call(self, method: str, params: Any = None) -> Any:
        with self.connect() as client:
            return client.call(method, params)

    def wait_notification(self, prefix: str, timeout: float = READY_TIMEOUT) -> str:
        """Block until an sd_notify datagram contains a line starting with `prefix`."""
        deadline = time.monotonic() + timeout
        while True:
            for message in self.notifications:
                if any(line.startswith(prefix) for line in message.splitlines()):
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {prefix!r} from the daemon; stderr:\n{self.stderr()}")
            # Short receive timeouts only to notice a daemon that died instead.
            self.notify_sock.settimeout(min(remaining, 0.5))
            try:
                self.notifications.append(self.notify_sock.recv(4096).decode())
            except TimeoutError:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"reynd exited with {self.proc.returncode} before {prefix!r}; "
                        f"stderr:\n{self.stderr()}"
                    ) from None

    def wait(self, timeout: float = READY_TIMEOUT) -> int:
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM, expect: int | None = 0) -> int:
        """Signal the daemon and wait for it; asserts the exit code when `expect` is set."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(READY_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"reynd did not stop; stderr:\n{self.stderr()}") from None
        finally:
            self.notify_sock.close()
        if expect is not None:
            assert code == expect, (
                f"reynd exited {code}, expected {expect}; stderr:\n{self.stderr()}"
            )
        return code


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str, mode: str | None = None) -> Iterator[Path]:
    """`path` (made here) on a tmpfs of its own of `size` ("4m"): a disk that fills for real.

    Mounting needs root (CI runs as root): elsewhere the test is skipped, saying so.
    """
    import pytest

    path.mkdir()
    options = f"size={size}" + (f",mode={mode}" if mode else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (root only): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def daemon_command(state_dir: Path, socket_path: Path | None, *args: str) -> list[str]:
    cmd = [sys.executable, "-m", "reynd.daemon.cli", "serve", "--state-dir", str(state_dir)]
    if socket_path is not None:
        cmd += ["--socket", str(socket_path)]
    return [*cmd, "--log-format", "json", "--log-level", "debug", *args]


def daemon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(extra or {})
    return env


def start_daemon(
    workdir: Path,
    *,
    state_dir: Path | None = None,
    socket_path: Path | None = None,
    config: str | None = None,
    args: Sequence[str] = (),
    command: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    stderr_marker: str | None = None,
    umask: int = -1,
    stderr_fd: int | None = None,
    nofile: tuple[int, int] | None = None,
) -> Daemon:
    """Start `reynd serve` in `workdir` (a short path) and wait for READY=1.

    `config` is written to `<state_dir>/reynd.toml`; `command` replaces the
    command line (e.g. to run under systemd-socket-activate); with
    `stderr_marker`, returns once a line of stderr contains it (stderr is then
    copied to the log file by a thread, so the process never blocks on it).
    `umask` is the daemon's (-1: ours). `stderr_fd`: the daemon's stderr (a
    terminal, say) instead of the log file. `nofile`: the daemon's RLIMIT_NOFILE
    (soft, hard), as `ulimit -Sn`/`-Hn` would set it (through util-linux's prlimit).
    """
    state_dir = state_dir or workdir / "state"
    socket_path = socket_path or workdir / "run" / "reynd.sock"
    if config is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / "reynd.toml").write_text(config)
    notify_path = workdir / f"notify-{len(list(workdir.glob('notify-*')))}"
    notify_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify_sock.bind(str(notify_path))
    stderr_path = workdir / f"stderr-{notify_path.name}.log"
    cmd = list(command) if command else daemon_command(state_dir, socket_path, *args)
    if nofile is not None:  # prlimit execs the daemon: same pid
        cmd = ["prlimit", f"--nofile={nofile[0]}:{nofile[1]}", "--", *cmd]
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=daemon_env({"NOTIFY_SOCKET": str(notify_path), **(env or {})}),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr_marker else stderr_fd or stderr,
            umask=umask,
        )
    daemon = Daemon(state_dir, socket_path, proc, stderr_path, notify_sock)
    if stderr_marker:
        seen = threading.Event()
        copier = threading.Thread(
            target=_copy_stderr, args=(proc, stderr_path, stderr_marker, seen), daemon=True
        )
        copier.start()
        if not seen.wait(READY_TIMEOUT):
            proc.kill()
            proc.wait()
            notify_sock.close()
            raise TimeoutError(f"no {stderr_marker!r} on stderr:\n{daemon.stderr()}")
    if wait_ready:
        try:
            daemon.wait_notification("READY=1")
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            notify_sock.close()
            raise
    return daemon


def _copy_stderr(
    proc: subprocess.Popen[bytes], path: Path, marker: str, seen: threading.Event
) -> None:
    assert proc.stderr is not None
    with path.open("ab") as out:
        for line in proc.stderr:
            out.write(line)
            out.flush()
            if marker.encode() in line:
                seen.set()
    seen.set()  # EOF: let the waiter look at the log


def run_daemon_to_exit(
    workdir: Path,
    *,
    state_dir: Path,
    socket_path: Path,
    config_path: Path | None = None,
    timeout: float = READY_TIMEOUT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a daemon that is expected to refuse to start; returns its exit code and stderr."""
    args = ["--config", str(config_path)] if config_path else []
    return subprocess.run(
        daemon_command(state_dir, socket_path, *args),
        cwd=workdir,
        env=daemon_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def reynctl_json(sock: Path, *args: str) -> Any:
    """`reynctl --json ARGS` against the daemon at `sock`: its output, decoded."""
    out = subprocess.run(
        [sys.executable, "-m", "reynctl", "--socket", str(sock), "--json", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)

"""Where the daemon logs, and how (real daemon, tests/harness.py).

--log-file and the REYN_LOG_* variables, the log's location in daemon.status
and `reynctl status`, journald's native protocol (a datagram socket standing
in for journald's, as $REYN_JOURNAL_SOCKET allows), NO_COLOR on a terminal.
"""

from __future__ import annotations

import json
import os
import pty
import socket
import stat
import struct
import subprocess
import sys
from pathlib import Path

from tests.harness import daemon_env, start_daemon
from tests.runtime_helpers import wait_until
from tests.test_reynctl_cli import ok, reynctl


def test_log_file_and_level_from_the_environment(short_tmp: Path) -> None:
    log = short_tmp / "logs" / "reynd.log"
    log.parent.mkdir()
    # Not daemon_command: it names --log-level, which would win over the variable.
    command = [
        *(sys.executable, "-m", "reynd.daemon.cli", "serve"),
        *("--state-dir", str(short_tmp / "state"), "--socket", str(short_tmp / "r.sock")),
    ]
    env = {"REYN_LOG_LEVEL": "warning", "REYN_LOG_FILE": str(log)}
    d = start_daemon(short_tmp, command=command, env=env, socket_path=short_tmp / "r.sock")
    try:
        d.call("daemon.status")
        assert d.call("daemon.status")["log"] == str(log)
        shown = ok(reynctl("--color", "never", "status", sock=d.socket))
        assert f"log          {log}" in shown, shown
    finally:
        d.stop()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    records = [json.loads(line) for line in log.read_text().splitlines()]
    # At the default level the file would start with `starting` and `ready` (info).
    assert {r["level"] for r in records} <= {"warning", "error", "critical"}, records
    # Nothing on stderr: the file has it all.
    assert d.stderr().strip() == ""


def test_log_file_at_info_has_every_write(short_tmp: Path) -> None:
    log = short_tmp / "reynd.log"
    d = start_daemon(short_tmp, args=["--log-file", str(log), "--log-level", "info"])
    try:
        d.call("wal.append", {"agent": "ada", "kind": "agent.created"})
    finally:
        d.stop()
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert "ready" in events and "rpc" in events and "stopped" in events, events


def test_a_log_file_that_cannot_be_opened_is_a_usage_error(short_tmp: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "reynd.daemon.cli", "serve", "--state-dir", str(short_tmp)),
            *("--socket", str(short_tmp / "s.sock"), "--log-file", str(short_tmp / "no" / "x")),
        ],
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "cannot open the log file" in done.stderr and "No such file" in done.stderr


def _fields(datagram: bytes) -> dict[str, str]:
    """journald's native protocol: KEY=value lines, or KEY, a 64-bit length, the bytes."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(datagram):
        nl = datagram.index(b"\n", pos)
        line = datagram[pos:nl]
        if b"=" in line:
            key, _, value = line.partition(b"=")
            pos = nl + 1
        else:
            key = line
            (size,) = struct.unpack_from("<Q", datagram, nl + 1)
            value = datagram[nl + 9 : nl + 9 + size]
            assert datagram[nl + 9 + size : nl + 10 + size] == b"\n"
            pos = nl + 10 + size
        out[key.decode()] = value.decode()
    return out


def test_native_journald_fields_when_stderr_is_the_journal(short_tmp: Path) -> None:
    journal_path = short_tmp / "journal.sock"
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind(str(journal_path))
    journal.settimeout(30)
    # start_daemon writes stderr to stderr-notify-0.log (truncated, same inode): make it
    # first so that $JOURNAL_STREAM can name it, as systemd names the journal's stream.
    stderr_file = short_tmp / "stderr-notify-0.log"
    stderr_file.touch()
    st = stderr_file.stat()
    env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}", "REYN_JOURNAL_SOCKET": str(journal_path)}
    d = start_daemon(short_tmp, env=env, args=["--log-format", "auto", "--log-level", "info"])
    try:
        assert d.stderr_path == stderr_file
        assert d.call("daemon.status")["log"] == "journald"
        d.call("wal.append", {"agent": "ada", "kind": "agent.created"})
        seen: list[dict[str, str]] = []

        def rpc_seen() -> dict[str, str] | None:
            seen.append(_fields(journal.recv(65536)))
            return next((f for f in seen if f.get("REYND_EVENT") == "rpc"), None)

        rpc = wait_until(rpc_seen, "the rpc event in the journal")
    finally:
        d.stop()
    journal.close()
    ready = next(f for f in seen if f.get("REYND_EVENT") == "ready")
    assert ready["PRIORITY"] == "6" and ready["SYSLOG_IDENTIFIER"] == "reynd"
    assert ready["MESSAGE"].startswith("ready socket=")
    assert rpc["METHOD"] == "wal.append" and rpc["OUTCOME"] == "ok", rpc
    assert float(rpc["DURATION_MS"]) >= 0
    assert d.stderr().strip() == ""  # everything went to the journal


def _console_output(short_tmp: Path, extra_env: dict[str, str]) -> bytes:
    master, slave = pty.openpty()
    try:
        d = start_daemon(
            short_tmp,
            env=extra_env,
            args=["--log-format", "auto", "--log-level", "info"],
            stderr_fd=slave,
        )
    finally:
        os.close(slave)
    out = b""
    try:
        while b"ready" not in out:
            out += os.read(master, 65536)
    finally:
        d.stop()
        os.close(master)
    return out


def test_no_color_turns_colours_off_on_a_terminal(short_tmp: Path) -> None:
    (short_tmp / "a").mkdir()
    (short_tmp / "b").mkdir()
    coloured = _console_output(short_tmp / "a", {})
    plain = _console_output(short_tmp / "b", {"NO_COLOR": "1"})
    assert b"\x1b[" in coloured
    assert b"ready" in plain and b"\x1b[" not in plain

"""sd_notify, watchdog interval and log formats, on their own."""

from __future__ import annotations

import io
import json
import os
import socket
from collections.abc import Iterator

import pytest
import structlog

from reynd.daemon import systemd
from reynd.daemon.logs import configure_logging


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def test_notify_abstract_socket() -> None:
    name = f"reynd-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind("\0" + name)
        receiver.settimeout(5)
        assert systemd.notify("READY=1\nSTATUS=ok", {"NOTIFY_SOCKET": "@" + name})
        assert receiver.recv(100) == b"READY=1\nSTATUS=ok"


def test_notify_without_systemd_is_a_no_op() -> None:
    assert not systemd.notify("READY=1", {})
    assert not systemd.notify("READY=1", {"NOTIFY_SOCKET": "/nonexistent/sock"})


def test_watchdog_interval() -> None:
    assert systemd.watchdog_interval({}) is None
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "4000000"}) == 2.0
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}) is None


def test_inherited_sockets_ignored_for_another_pid() -> None:
    env = {"LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "x"}
    assert systemd.inherited_sockets(env) == []
    assert env == {}  # unset so that children never see them


class _Stream(io.StringIO):
    """A text stream with a binary `buffer`, like sys.stderr."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.raw_buffer = io.BytesIO()
        self._tty = tty

    @property
    def buffer(self) -> io.BytesIO:
        return self.raw_buffer

    def isatty(self) -> bool:
        return self._tty


def test_json_lines_with_journald_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "8:1234")
    stream = _Stream(tty=False)
    assert configure_logging("auto", "info", stream).format == "json"
    log = structlog.get_logger("t")
    log.debug("hidden")
    log.warning("careful", n=1)
    lines = stream.raw_buffer.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(b"<4>{")
    record = json.loads(lines[0][3:])
    assert record["event"] == "careful" and record["n"] == 1 and record["level"] == "warning"


def test_console_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    stream = _Stream(tty=True)
    assert configure_logging("auto", "debug", stream).format == "console"
    structlog.get_logger("t").info("hello", key="value")
    out = stream.getvalue()
    assert "hello" in out and "key" in out and "value" in out

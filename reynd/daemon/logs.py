"""structlog set-up: JSON lines for services, key=value for people, native fields for journald.

JSON is encoded with msgspec (structlog's JSONRenderer expects str; msgspec
returns bytes, so lines go to a BytesLogger on stderr's buffer, or on the
`--log-file`). Under journald (stderr is the stream $JOURNAL_STREAM names)
each event is sent to the journal's socket in its native protocol: one field
per key (`METHOD=state.get`, `DURATION_MS=0.4`, ...), so `journalctl
REYND_EVENT=rpc METHOD=rewind` filters on them. If that socket cannot be
reached, lines go to stderr with a `<N>` syslog priority prefix instead.
`NO_COLOR` turns colours off on a terminal.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import struct
import sys
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

__all__ = ["JOURNAL_SOCKET_ENV", "LOG_FORMATS", "LOG_LEVELS", "LogSetup", "configure_logging"]

LogFormat = Literal["auto", "json", "console"]
LOG_FORMATS: tuple[str, ...] = ("auto", "json", "console")
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warning", "error")

# syslog priorities by structlog level name.
_PRIORITY = {
    "debug": b"<7>",
    "info": b"<6>",
    "warning": b"<4>",
    "error": b"<3>",
    "exception": b"<3>",
    "critical": b"<2>",
}


def _json_renderer(prefixed: bool) -> Callable[[Any, str, MutableMapping[str, Any]], bytes]:
    encode = msgspec.json.Encoder(enc_hook=repr).encode

    def render(_logger: Any, method: str, event: MutableMapping[str, Any]) -> bytes:
        line = encode(event)
        return _PRIORITY.get(method, b"<6>") + line if prefixed else line

    return render


_open_files: list[Any] = []

# Every mutating call logs a line (rpc.Dispatcher._logged): at a few thousand
# appends a second, structlog's own TimeStamper and ExceptionRenderer were a
# third of a line's cost, and a line a fifth of an append's CPU.
_second = -1
_second_text = ""


def iso_utc_timestamp(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """`timestamp`, exactly as TimeStamper(fmt="iso", utc=True) writes it, the date and
    time of day formatted once a second (`2026-01-02T03:04:05.678901Z`)."""
    global _second, _second_text  # noqa: PLW0603 (a one-entry cache)
    now = time.time_ns() // 1000
    second, micros = divmod(now, 1_000_000)
    if second != _second:
        _second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = second
    # isoformat leaves the fraction out when it is zero; so does this.
    event["timestamp"] = f"{_second_text}.{micros:06d}Z" if micros else f"{_second_text}Z"
    return event


def _only_with_exc_info(renderer: Any) -> Any:
    """`renderer` (an ExceptionRenderer), run only for an event that carries exc_info."""

    def render(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        return renderer(logger, method, event) if "exc_info" in event else event

    return render


class LogSetup:
    """Where the log goes (for `daemon.status`), and in which format."""

    def __init__(self, fmt: Literal["json", "console", "journald"], where: str) -> None:
        self.format = fmt
        self.where = where


def configure_logging(
    fmt: str = "auto",
    level: str = "info",
    stream: Any = None,
    *,
    log_file: Path | None = None,
) -> LogSetup:
    """Configure structlog for the daemon.

    `log_file`: append there (created 0600) instead of stderr; OSError if it
    cannot be opened. `auto` is console on a terminal, else JSON, or
    journald's native fields when stderr is the journal.
    """
    where = "stderr"
    if log_file is not None:
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
        _open_files.append(stream)  # the loggers hold its buffer only: keep it open
        where = str(log_file.resolve())
    stream = sys.stderr if stream is None else stream
    journal = _journal_socket() if log_file is None and fmt in ("auto", "json") else None
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        iso_utc_timestamp,
    ]
    chosen: Literal["json", "console", "journald"] = "console"
    if journal is not None:
        processors = [*shared, structlog.processors.format_exc_info, _journal_renderer()]
        factory: Any = lambda *_: _JournalLogger(journal, stream)  # noqa: E731
        chosen, where = "journald", "journald"
    elif fmt == "json":
        tracebacks = _only_with_exc_info(
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        )
        prefixed = log_file is None and bool(os.environ.get("JOURNAL_STREAM"))
        processors = [*shared, tracebacks, _json_renderer(prefixed)]
        factory = structlog.BytesLoggerFactory(stream.buffer)
        chosen = "json"
    else:
        colors = stream.isatty() and not os.environ.get("NO_COLOR")
        processors = [*shared, structlog.dev.ConsoleRenderer(colors=colors)]
        factory = structlog.WriteLoggerFactory(stream)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    # The storage core logs through the standard library (it runs without the
    # daemon too): send those records down the same structlog pipeline.
    root = logging.getLogger()
    root.handlers = [_ToStructlog()]
    root.setLevel(level.upper())
    # The S3 client's own debug output is a line per header and hook: the
    # shipper and follower log what matters (replicate.*, follow.*).
    for name in ("boto3", "botocore", "s3transfer", "urllib3"):
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))
    return LogSetup(chosen, where)


# -- journald's native protocol ------------------------------------------------------------

JOURNAL_SOCKET = "/run/systemd/journal/socket"
# Where journald listens, when not at JOURNAL_SOCKET (a container, a test).
JOURNAL_SOCKET_ENV = "REYN_JOURNAL_SOCKET"
_NOT_FIELD = re.compile(r"[^A-Z0-9_]")
# Fields journald or its clients give a meaning: ours get a prefix instead.
_RESERVED = frozenset(("MESSAGE", "MESSAGE_ID", "PRIORITY", "SYSLOG_IDENTIFIER", "ERRNO"))


def _journal_socket() -> socket.socket | None:
    """A socket to journald when stderr is the journal ($JOURNAL_STREAM is its dev:inode)."""
    stream = os.environ.get("JOURNAL_STREAM", "")
    try:
        dev, ino = (int(x) for x in stream.split(":"))
        st = os.fstat(2)
    except (ValueError, OSError):
        return None
    if (st.st_dev, st.st_ino) != (dev, ino):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        sock.connect(os.environ.get(JOURNAL_SOCKET_ENV) or JOURNAL_SOCKET)
    except OSError:
        sock.close()
        return None
    return sock


def _field(name: str, value: str) -> bytes:
    data = value.encode("utf-8", "backslashreplace")
    key = name.encode()
    if b"\n" not in data:
        return key + b"=" + data + b"\n"
    return key + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"


def _journal_renderer() -> Callable[[Any, str, MutableMapping[str, Any]], dict[str, bytes]]:
    """The datagram, and the line to write instead if the journal refuses it.

    A dict: structlog passes a last processor's dict to the logger as keywords.
    """
    encode = msgspec.json.Encoder(enc_hook=repr).encode

    def render(_logger: Any, method: str, event: MutableMapping[str, Any]) -> dict[str, bytes]:
        line = encode(event)
        name = str(event.get("event", ""))
        rest = {k: v for k, v in event.items() if k not in ("event", "level", "timestamp")}
        summary = " ".join(f"{k}={v}" for k, v in rest.items() if k != "exception")
        parts = [
            _field("MESSAGE", f"{name} {summary}".rstrip()),
            b"PRIORITY=" + _PRIORITY.get(method, b"<6>")[1:2] + b"\n",
            b"SYSLOG_IDENTIFIER=reynd\n",
            _field("REYND_EVENT", name),
        ]
        for key, value in rest.items():
            field = _NOT_FIELD.sub("_", key.upper()).lstrip("_") or "FIELD"
            if field in _RESERVED or field[0].isdigit():
                field = "REYND_" + field
            text = value if isinstance(value, str) else encode(value).decode()
            parts.append(_field(field, text))
        return {"datagram": b"".join(parts), "line": _PRIORITY.get(method, b"<6>") + line}

    return render


class _JournalLogger:
    """Sends each event as one datagram; a line on stderr if the journal refuses it."""

    def __init__(self, sock: socket.socket, fallback: Any) -> None:
        self._sock = sock
        self._fallback = fallback

    def msg(self, *, datagram: bytes, line: bytes) -> None:
        try:
            self._sock.send(datagram)
        except OSError:  # too large for one datagram, journald gone...
            self._fallback.buffer.write(line + b"\n")
            self._fallback.buffer.flush()

    log = debug = info = warning = error = critical = exception = msg


class _ToStructlog(logging.Handler):
    """A stdlib handler that re-emits each record as a structlog event."""

    def emit(self, record: logging.LogRecord) -> None:
        structlog.get_logger().log(record.levelno, record.getMessage(), logger=record.name)

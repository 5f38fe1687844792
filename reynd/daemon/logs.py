"""structlog set-up: JSON lines for services, key=value for people.

JSON is encoded with msgspec (structlog's JSONRenderer expects str; msgspec
returns bytes, so lines go to a BytesLogger on stderr's buffer). Under journald
($JOURNAL_STREAM set) each line starts with a `<N>` syslog priority so the
journal records the level.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, MutableMapping
from typing import Any, Literal

import msgspec
import structlog

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "configure_logging"]

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


def _json_renderer(journald: bool) -> Callable[[Any, str, MutableMapping[str, Any]], bytes]:
    encode = msgspec.json.Encoder(enc_hook=repr).encode

    def render(_logger: Any, method: str, event: MutableMapping[str, Any]) -> bytes:
        line = encode(event)
        return _PRIORITY.get(method, b"<6>") + line if journald else line

    return render


def configure_logging(
    fmt: str = "auto", level: str = "info", stream: Any = None
) -> Literal["json", "console"]:
    """Configure structlog for the daemon; returns the format chosen for `auto`."""
    stream = sys.stderr if stream is None else stream
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        journald = bool(os.environ.get("JOURNAL_STREAM"))
        tracebacks = structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        )
        processors = [*shared, tracebacks, _json_renderer(journald)]
        factory: Any = structlog.BytesLoggerFactory(stream.buffer)
    else:
        processors = [*shared, structlog.dev.ConsoleRenderer(colors=stream.isatty())]
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
    return "json" if fmt == "json" else "console"


class _ToStructlog(logging.Handler):
    """A stdlib handler that re-emits each record as a structlog event."""

    def emit(self, record: logging.LogRecord) -> None:
        structlog.get_logger().log(record.levelno, record.getMessage(), logger=record.name)

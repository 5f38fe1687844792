"""The limits' defaults are declared once (reynd.protocol.limits): the daemon and the docs agree."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from reynd.daemon.config import DaemonConfig
from reynd.daemon.hub import Hub
from reynd.daemon.rpc import Dispatcher
from reynd.daemon.server import ServerLimits
from reynd.protocol import limits
from reynd.protocol.read_methods import WalReadParams

DOCS = Path(__file__).resolve().parent.parent / "docs"
CONFIG = DaemonConfig()
# Keys of the docs' reynd.toml example that show a setting, not the default.
EXAMPLES = {"socket", "allowed_group", "workspace.path", "workspace.ignore"}
UNITS = {"": 1, "MiB": limits.MiB, "s": 1, "µs": 1}


def _defaults(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every scalar default of the config, by its dotted key."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            out |= _defaults(item, f"{prefix}{key}.")
        else:
            out[prefix + key] = item
    return out


DEFAULTS = _defaults(msgspec.to_builtins(CONFIG))
# The keys of reynd.toml by their last part (unique: the docs name them so).
BY_NAME = {key.rsplit(".", 1)[-1]: value for key, value in DEFAULTS.items()}


def _default(parameter: str, owner: Any) -> Any:
    return inspect.signature(owner).parameters[parameter].default


def test_the_transport_starts_from_the_config_defaults() -> None:
    server = ServerLimits()
    for field in (
        "max_message_bytes",
        "max_connections",
        "max_requests_per_connection",
        "max_batch_members",
        "max_subscriptions_per_connection",
        "max_unsent_bytes_per_connection",
        "line_timeout_s",
        "idle_timeout_s",
    ):
        assert getattr(server, field) == getattr(CONFIG, field), field
    assert server.busy_poll_s == CONFIG.busy_poll_us / 1e6
    assert _default("max_batch_members", Dispatcher) == CONFIG.max_batch_members
    assert _default("queue_size", Hub) == CONFIG.subscriber_queue
    read = msgspec.inspect.type_info(WalReadParams)
    assert isinstance(read, msgspec.inspect.StructType)
    (limit,) = [f.type for f in read.fields if f.name == "limit"]
    assert isinstance(limit, msgspec.inspect.IntType) and limit.le == limits.MAX_READ_RECORDS


def _section(name: str, heading: str) -> str:
    text = (DOCS / name).read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _number(value: str, unit: str) -> float:
    return float(value.replace(",", "")) * UNITS[unit]


def test_the_limits_table_shows_the_defaults() -> None:
    table = _section("protocol.md", "\n## Limits\n")
    set_by_config = re.findall(r"^\|[^|]*\| `(\w+)` = ([\d.,]+) ?(MiB|s|)? \|", table, re.M)
    assert len(set_by_config) >= 7
    for key, value, unit in set_by_config:
        assert _number(value, unit) == BY_NAME[key], key
    fixed = re.findall(
        r"^\|[^|]*\| ([\d,]+) \(fixed\) \|[^|]*`data.limit_name` = `(\w+)`", table, re.M
    )
    assert {name for _, name in fixed} == {"max_depth", "max_append_events"}
    for value, name in fixed:
        assert _number(value, "") == getattr(limits, name.upper()), name


def test_the_config_example_shows_the_defaults() -> None:
    section = _section("protocol.md", "\n## Configuration (`reynd.toml`)\n")
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block is not None
    example = _defaults(tomllib.loads(block[1]))
    assert set(example) - EXAMPLES <= set(DEFAULTS)
    for key, value in example.items():
        if key not in EXAMPLES:
            assert value == DEFAULTS[key], key


def test_the_docs_say_the_defaults() -> None:
    said = 0
    for doc in sorted(DOCS.glob("*.md")):
        text = " ".join(doc.read_text().split())
        for key, value, unit in re.findall(
            r"`(\w+)` \((?:default )?([\d.,]+) ?(MiB|s|µs|)(?:[,;)]| by default)", text
        ):
            if key in BY_NAME:
                assert _number(value, unit) == BY_NAME[key], (doc.name, key)
                said += 1
    assert said >= 8

"""The daemon's configuration file, reynd.toml.

Looked up at `--config`, then $REYN_CONFIG, then `<state_dir>/reynd.toml` if it
exists; absent means defaults. Unknown keys and bad values are refused at
start-up with a message naming the key: a typo must not silently fall back to
a default.
"""

from __future__ import annotations

import grp
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import msgspec

from reynd.audit.options import AuditOptions
from reynd.core.retention import RetentionPolicy, legacy, without_horizon
from reynd.protocol import limits
from reynd.protocol.limits import MiB
from reynd.protocol.validation import validation_details
from reynd.replication.config import ReplicateConfig
from reynd.storage.options import StorageOptions
from reynd.workspace.config import WorkspaceConfig

__all__ = [
    "CONFIG_ENV",
    "ConfigError",
    "ConfigUnreadable",
    "DaemonConfig",
    "find_config",
    "load_config",
]

CONFIG_ENV = "REYN_CONFIG"


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file and the key."""


class ConfigUnreadable(ConfigError):
    """The file is there but the OS will not give it back (EIO, EISDIR, ELOOP...).

    Not a mistake in the file: `reynd serve` exits 3 (a storage failure), not 2.
    """


class DaemonConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Top-level keys of reynd.toml; `[storage]` belongs to the storage core.

    The limits' defaults are reynd.protocol.limits'; the bounds a file may set are here.
    """

    # Socket path; --socket and $REYN_SOCKET take precedence.
    socket: str | None = None
    # Longest accepted line (one JSON-RPC message), newline excluded.
    max_message_bytes: Annotated[int, msgspec.Meta(ge=1024, le=256 * MiB)] = (
        limits.MAX_MESSAGE_BYTES
    )
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=65536)] = limits.MAX_CONNECTIONS
    # Requests of one connection that may run at the same time.
    max_requests_per_connection: Annotated[int, msgspec.Meta(ge=1, le=4096)] = (
        limits.MAX_REQUESTS_PER_CONNECTION
    )
    # Members of one JSON-RPC batch (a larger batch gets one limit_exceeded error).
    max_batch_members: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = limits.MAX_BATCH_MEMBERS
    # Live subscriptions of one connection (one subscription may take every topic).
    max_subscriptions_per_connection: Annotated[int, msgspec.Meta(ge=1, le=4096)] = (
        limits.MAX_SUBSCRIPTIONS_PER_CONNECTION
    )
    # Replies of one connection made but not yet read by the client; past it the
    # daemon reads and starts nothing more of that connection until it reads.
    max_unsent_bytes_per_connection: Annotated[int, msgspec.Meta(ge=64 * 1024, le=256 * MiB)] = (
        limits.MAX_UNSENT_BYTES_PER_CONNECTION
    )
    # Group name or gid whose members may connect besides the daemon's own uid.
    allowed_group: str | int | None = None
    # Notifications queued per subscriber before it is dropped as lagged.
    subscriber_queue: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = limits.SUBSCRIBER_QUEUE
    # Microseconds a connection's reader keeps polling for the client's next line
    # after a drained read before it sleeps in epoll (server._Receiver); 0: never.
    busy_poll_us: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = limits.BUSY_POLL_US
    # Seconds a request line may take to arrive, from its first byte to its newline;
    # past it the client gets one limit_exceeded error and is disconnected. 0: no limit.
    line_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = limits.LINE_TIMEOUT_S
    # Seconds a connection with no call in flight and no subscription may go without
    # a request before it is closed. 0: never.
    idle_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=86400)] = limits.IDLE_TIMEOUT_S
    # Seconds in-flight requests get to finish at shutdown before they are cancelled.
    shutdown_grace_s: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 5.0
    storage: StorageOptions = msgspec.field(default_factory=StorageOptions)
    # The base policy: keys set at run time with retention.set live in
    # state/config/config.db and override these one by one (docs/operations.md).
    retention: RetentionPolicy = msgspec.field(default_factory=RetentionPolicy)
    audit: AuditOptions = msgspec.field(default_factory=AuditOptions)
    workspace: WorkspaceConfig = msgspec.field(default_factory=WorkspaceConfig)
    replicate: ReplicateConfig = msgspec.field(default_factory=ReplicateConfig)

    def allowed_gid(self) -> int | None:
        """The allowed group as a gid (resolved by name); ConfigError if unknown."""
        group = self.allowed_group
        if group is None or isinstance(group, int):
            return group
        if group.isdigit():
            return int(group)
        try:
            return grp.getgrnam(group).gr_gid
        except KeyError:
            raise ConfigError(f"allowed_group: no group named {group!r}") from None


def find_config(
    explicit: str | os.PathLike[str] | None, state_dir: Path, env: Mapping[str, str] | None = None
) -> Path | None:
    """--config, then $REYN_CONFIG (both must exist), then <state_dir>/reynd.toml if present.

    Present means there in any form: one that is not a readable file is reported
    by load_config, never silently replaced by the defaults.
    """
    env = os.environ if env is None else env
    named = explicit or env.get(CONFIG_ENV)
    if named:
        return Path(named)
    default = state_dir / "reynd.toml"
    try:
        default.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        pass  # there but unreadable: load_config says why
    return default


def load_config(path: Path | None) -> DaemonConfig:
    """Read and validate the file; defaults when `path` is None."""
    if path is None:
        return DaemonConfig()
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError as exc:  # named by --config or $REYN_CONFIG
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except OSError as exc:
        raise ConfigUnreadable(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        config = msgspec.convert(raw, DaemonConfig)
    except msgspec.ValidationError as exc:
        key, reason = validation_details(exc)
        if "unknown field" in reason:
            raise ConfigError(f"{path}: unknown key {key!r}") from None
        raise ConfigError(f"{path}: bad value for {key!r}: {reason}") from None
    table = raw.get("retention")
    if isinstance(table, dict) and legacy(table):
        # A [retention] table written before the default horizon keeps its meaning.
        config.retention = without_horizon(config.retention)
    try:
        config.allowed_gid()  # fail now, not at the first connection
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        config.replicate.location()
    except ValueError as exc:
        raise ConfigError(f"{path}: bad value for 'replicate.url': {exc}") from None
    return config

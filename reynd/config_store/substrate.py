"""The config generation store in the daemon: a Substrate (reynd/daemon/hooks.py).

- `start(head)`: open (migrating the schema), finish a restore that a crash
  interrupted (the newest reset record has no `restored` line), index the
  boundaries committed since the last capture, mirror the agents, load the
  runtime settings (they override reynd.toml key by key).
- `on_generation(seq)`: a boundary is durable: index it; capture a new
  generation file only if the database changed since the last one.
- `after_reset(target, reset_seq)`: capture what is being left, then
  `restore_to_seq(target)`, re-mirror the agents as of target, reload settings.
- `set_retention(changes)`: the durable write behind `retention.set`.

The settings (retention) are operator policy: a restore keeps the live ones
(ConfigCore.restore_to_seq), so a rewind never brings back an old policy;
the agents' configurations are rewound.

Every file operation runs on a worker thread, one at a time (a trio.Lock).
A write first indexes the boundaries committed before it, so a generation
never holds a change made after its boundary.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from reynd.config_store import db
from reynd.config_store.core import ConfigCore
from reynd.config_store.generations import ConfigFileDamaged
from reynd.core.retention import HORIZON_KEYS, RetentionPolicy, legacy, without_horizon
from reynd.protocol import errors
from reynd.protocol.events import AgentConfigured, AgentCreated, Event
from reynd.storage.store import Store

__all__ = ["RETENTION_PREFIX", "ConfigStore"]

log = structlog.get_logger("reynd.config")

RETENTION_PREFIX = "retention."


class ConfigStore:
    """Runtime configuration in SQLite, with a generation per boundary; follows every reset."""

    def __init__(
        self,
        state_dir: Path,
        store: Store,
        base_retention: RetentionPolicy,
        use_retention: Callable[[RetentionPolicy], None],
    ) -> None:
        self.core = ConfigCore(state_dir / "state" / "config")
        self._store = store
        self._base = base_retention
        self._policy = base_retention
        self._use_retention = use_retention
        self._lock = trio.Lock()
        self._mirror_due = trio.Event()
        self._mirror_from: int | None = None  # seq of the first agent change not mirrored yet
        self._opened = False

    # -- Substrate ---------------------------------------------------------------------

    async def start(self, head: int) -> None:
        async with self._lock:
            await trio.to_thread.run_sync(self.core.open, head)
            self._opened = True
            resets = self._store.lineage.resets
            if resets and self.core.index.reset_state(resets[-1][0]) != "done":
                reset, target = resets[-1]
                log.warning("config.restore_after_crash", reset_seq=reset, target=target)
                # ConfigFileDamaged (a StorageError) stops the daemon with its message.
                await self._reset(target, reset, raw=True)
            else:
                pending = self._pending(self._store.head)
                await trio.to_thread.run_sync(self.core.seal, pending)
                await self._mirror()
                await self._load_settings()
            log.info(
                "config.open",
                path=str(self.core.db_path),
                generations=len(self.core.index.seqs),
                files=self.core.generation_count(),
                retention=msgspec.to_builtins(self._policy),
            )

    async def before_reset(self, target: int, force: bool, files: int | None) -> None:
        return None

    async def reset_records(
        self, target: int, files: int | None
    ) -> tuple[Sequence[Event], Sequence[Event]]:
        return (), ()

    async def after_reset(self, target: int, reset_seq: int) -> None:
        async with self._lock:
            await self._reset(target, reset_seq)

    async def on_generation(self, seq: int) -> None:
        async with self._lock:
            if seq <= self.core.index.through:
                return  # indexed already, by a write or a reset that came first
            if not self.core.dirty:
                # Nothing changed since the last generation: this boundary is
                # indexed lazily, with the live content, by the next write,
                # reset or start (each seals what is pending first). No I/O here.
                return
            pending = self._pending(seq)
            captures = self.core.captures
            await trio.to_thread.run_sync(self.core.seal, pending)
            if self.core.captures != captures:
                log.debug("config.generation", seq=seq, hash=self.core.current)

    # -- the daemon's other calls ----------------------------------------------------------

    def observe(self, events: Sequence[Event]) -> None:
        """From the commit hook: agent configs changed, refresh the mirror soon."""
        for e in events:
            if isinstance(e, AgentCreated | AgentConfigured):
                self._mirror_from = min(self._mirror_from or e.seq, e.seq)
                self._mirror_due.set()

    async def run(self) -> None:
        """Keep the agents mirror current; boundaries before the change keep the old content."""
        while True:
            await self._mirror_due.wait()
            self._mirror_due = trio.Event()
            changed_at, self._mirror_from = self._mirror_from, None
            async with self._lock:
                if changed_at is not None:
                    pending = self._pending(changed_at - 1)
                    await trio.to_thread.run_sync(self.core.seal, pending)
                await self._mirror()

    async def set_retention(self, changes: Mapping[str, Any]) -> RetentionPolicy:
        """Persist `retention.set` changes (durable on return), then put them in force."""
        async with self._lock:
            pending = self._pending(self._store.head)
            stored = await trio.to_thread.run_sync(self.core.settings)
            settings = {RETENTION_PREFIX + k: v for k, v in self._complete(stored, changes).items()}

            def write() -> None:
                self.core.seal(pending)
                self.core.write_settings(settings)

            try:
                await trio.to_thread.run_sync(write)
            except (OSError, sqlite3.OperationalError) as exc:
                raise _not_written(exc) from exc
            await self._load_settings()
            return self._policy

    def close(self) -> None:
        if self._opened:
            self.core.close()
            self._opened = False

    # -- internals (the lock held) ---------------------------------------------------------

    async def _reset(self, target: int, reset_seq: int, *, raw: bool = False) -> None:
        lineage = self._store.lineage
        pending = self._pending(reset_seq - 1)
        try:
            done = await trio.to_thread.run_sync(
                self.core.reset, reset_seq, target, lineage, pending
            )
        except ConfigFileDamaged as exc:
            if raw:
                raise
            # The message says it all; a traceback would only hide it.
            log.error(  # noqa: TRY400
                "config.restore_failed", reset_seq=reset_seq, target=target, error=str(exc)
            )
            raise errors.ConfigDamaged(
                f"the rewind is recorded but the runtime configuration was not restored: {exc}",
                {"path": str(exc.path), "reset_seq": reset_seq, "target": target},
            ) from None
        await self._mirror()
        await self._load_settings()
        if done:
            log.info(
                "config.restored",
                target=target,
                reset_seq=reset_seq,
                hash=self.core.current,
                retention=msgspec.to_builtins(self._policy),
            )

    def _pending(self, upto: int) -> list[int]:
        """The first and last boundaries at or below `upto` not indexed yet (O(log n)).

        They all share one content (a change seals what is pending before it),
        so a seal needs only the first (a change point) and the last (how far).
        """
        span = self._store.catalog.span(self.core.index.through, upto)
        return sorted(set(span)) if span else []

    async def _mirror(self) -> None:
        wanted = {
            name: db.agent_row(a.executor, a.options, a.session, a.created_seq)
            for name, a in self._store.state.agents.items()
        }
        await trio.to_thread.run_sync(self.core.sync_agents, wanted)

    async def _load_settings(self) -> None:
        settings = await trio.to_thread.run_sync(self.core.settings)
        policy = self._retention_from(settings)
        if policy != self._policy:
            self._policy = policy
            self._use_retention(policy)

    def _complete(self, stored: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
        """`changes`, with the horizon in force added when they alone would make it legacy.

        Setting a keep key must not turn the default horizon off by the back
        door: only an old version's stored settings read as legacy.
        """
        keys = {k.removeprefix(RETENTION_PREFIX) for k in stored if k.startswith(RETENTION_PREFIX)}
        if not legacy(keys | set(changes)) or legacy(keys):
            return dict(changes)
        current = msgspec.to_builtins(self._policy)
        return {**{k: current[k] for k in sorted(HORIZON_KEYS)}, **changes}

    def _retention_from(self, settings: Mapping[str, Any]) -> RetentionPolicy:
        """reynd.toml's [retention], overridden key by key by the stored settings.

        Stored settings an older reynd wrote (keep keys, no horizon key) keep
        their meaning: no default horizon.
        """
        keys = {
            k.removeprefix(RETENTION_PREFIX) for k in settings if k.startswith(RETENTION_PREFIX)
        }
        base = msgspec.to_builtins(without_horizon(self._base) if legacy(keys) else self._base)
        fields: dict[str, Any] = {}
        for key, value in sorted(settings.items()):
            if not key.startswith(RETENTION_PREFIX):
                continue
            name = key.removeprefix(RETENTION_PREFIX)
            try:
                msgspec.convert({**base, **fields, name: value}, RetentionPolicy)
            except msgspec.ValidationError as exc:
                log.warning("config.setting_ignored", key=key, value=value, reason=str(exc))
                continue
            fields[name] = value
        return msgspec.convert({**base, **fields}, RetentionPolicy)


def _not_written(exc: OSError | sqlite3.OperationalError) -> errors.StorageUnavailable:
    """The error for a configuration write the disk refused (nothing of it took effect)."""
    if isinstance(exc, OSError):
        code = exc.errno or errno.EIO
        full = code in (errno.ENOSPC, errno.EDQUOT)
        reason = os.strerror(code)
    else:  # SQLite rolled the transaction back itself; it names no errno
        full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        code = errno.ENOSPC if full else errno.EIO
        reason = str(exc)
    fix = "free disk space" if full else "check the disk (the daemon's log has the error)"
    return errors.StorageUnavailable(
        f"the configuration could not be written ({reason}); nothing changed: {fix}, then retry",
        {"store": "config", "errno": errno.errorcode.get(code, str(code)), "reason": str(exc)},
    )

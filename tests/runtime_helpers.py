"""Helpers for the agent-runtime tests (real daemon over its socket, tests/harness.py).

Synchronization is by polling the daemon (agents.get, state.get) or the
durable WAL file (read-only: one JSON line per record, docs/format.md) with a
bounded deadline: never by sleeping a guessed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.harness import READY_TIMEOUT, Daemon, start_daemon

T = TypeVar("T")

DEADLINE = 10.0
PROGRAM = str(Path(__file__).with_name("runtime_program.py"))


def wait_until(fn: Callable[[], T | None], what: str, timeout: float = DEADLINE) -> T:
    """Poll `fn` until it returns something truthy; AssertionError naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {value!r}")
        time.sleep(0.005)


def error_of(d: Daemon, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC error object of a call that must fail."""
    with d.connect() as c:
        reply = c.request(method, params)
    assert "error" in reply, f"{method} {params} should have failed: {reply}"
    error: dict[str, Any] = reply["error"]
    return error


def agent(d: Daemon, name: str) -> dict[str, Any]:
    info: dict[str, Any] = d.call("agents.get", {"agent": name})
    return info


def head(d: Daemon) -> int:
    return int(d.call("daemon.status")["head"])


def state(d: Daemon, name: str, seq: int | None = None) -> dict[str, Any]:
    """`name`'s state as of `seq` (the tip when None), through state.get."""
    params: dict[str, Any] = {"agent": name}
    if seq is not None:
        params["seq"] = seq
    agents: dict[str, Any] = d.call("state.get", params)["agents"]
    return agents[name]  # type: ignore[no-any-return]


def agents_at(d: Daemon, seq: int | None = None) -> dict[str, Any]:
    """Every agent's state as of `seq` (the tip when None)."""
    result = d.call("state.get", {} if seq is None else {"seq": seq})
    agents: dict[str, Any] = result["agents"]
    return agents


def chain(d: Daemon, name: str, turn_id: str, seq: int | None = None) -> dict[str, Any] | None:
    for c in state(d, name, seq)["pending_chains"]:
        if c["turn_id"] == turn_id:
            return c  # type: ignore[no-any-return]
    return None


def create_builtin(d: Daemon, name: str, **options: Any) -> dict[str, Any]:
    info: dict[str, Any] = d.call(
        "agents.create", {"name": name, "executor": "builtin", "options": options}
    )
    return info


def create_program(d: Daemon, name: str, prog_dir: Path) -> dict[str, Any]:
    """An agent whose `command` executor is tests/runtime_program.py."""
    prog_dir.mkdir(parents=True, exist_ok=True)
    options = {
        "argv": [sys.executable, "-S", PROGRAM],
        "env": {"PROG_DIR": str(prog_dir)},
        "timeout": 30,
    }
    info: dict[str, Any] = d.call(
        "agents.create", {"name": name, "executor": "command", "options": options}
    )
    return info


def send(d: Daemon, name: str, text: str, *, wait: bool = True, timeout: float = DEADLINE) -> Any:
    return d.call("agents.send", {"agent": name, "text": text, "wait": wait, "timeout": timeout})


def wal_records(d: Daemon) -> list[dict[str, Any]]:
    """Every durable record, in seq order, read from the WAL files (all branches)."""
    out: list[dict[str, Any]] = []
    for path in sorted(d.state_dir.rglob("wal/*.jsonl")):
        for line in path.read_bytes().split(b"\n"):
            if line.startswith(b"{"):
                try:
                    out.append(json.loads(line)["rec"])
                except ValueError:
                    break  # a line being written: not durable yet
    out.sort(key=lambda r: r["seq"])
    return out


def records(d: Daemon, *, after: int = 0, **match: Any) -> list[dict[str, Any]]:
    """WAL records above `after` whose fields equal `match`."""
    return [
        r
        for r in wal_records(d)
        if r["seq"] > after and all(r.get(k) == v for k, v in match.items())
    ]


def wait_turn_end(d: Daemon, turn_id: str, *, after: int = 0) -> dict[str, Any]:
    """The turn.ended record of `turn_id` above seq `after`, once it is durable.

    Its `outcome` is filled in (the WAL omits the default, `completed`).
    """
    found = wait_until(
        lambda: records(d, after=after, kind="turn.ended", turn_id=turn_id),
        f"turn.ended of {turn_id} above seq {after}",
    )
    return {"outcome": "completed", **found[0]}


def wait_open_step(d: Daemon, name: str, step: int, timeout: float = DEADLINE) -> dict[str, Any]:
    """Until `name` runs `step`: agents.get says so and its step.started is durable."""

    def probe() -> dict[str, Any] | None:
        info = agent(d, name)
        if info["status"] != "running" or info["step"] != step:
            return None
        c = chain(d, name, info["turn_id"])
        return c if c is not None and c["open_step"] == step else None

    return wait_until(probe, f"{name} running step {step}", timeout)


def log_lines(d: Daemon, event: str) -> list[dict[str, Any]]:
    """The daemon's JSON log lines of `event` so far (start_daemon logs JSON at debug)."""
    out = []
    for line in d.stderr().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event") == event:
            out.append(obj)
    return out


def wait_for_log(d: Daemon, event: str, count: int = 1) -> list[dict[str, Any]]:
    """Poll the log until `event` was logged `count` times; its lines."""

    def enough() -> list[dict[str, Any]] | None:
        lines = log_lines(d, event)
        return lines if len(lines) >= count else None

    return wait_until(enough, f"{count}x {event!r} in the log", READY_TIMEOUT)


def pid_gone(pid: int) -> bool:
    """No such process: not running, and not a zombie waiting to be reaped."""
    return not Path(f"/proc/{pid}").exists()


def read_pid(path: Path) -> int:
    def text() -> str | None:
        return path.read_text() if path.exists() else None

    return int(wait_until(text, f"pid file {path}"))


def kill_daemon(d: Daemon) -> None:
    """SIGKILL: a crash, nothing flushed or closed."""
    d.stop(signal.SIGKILL, expect=-signal.SIGKILL)


def restart(d: Daemon, workdir: Path, env: dict[str, str] | None = None) -> Daemon:
    """A new daemon on the same state directory and socket path."""
    return start_daemon(workdir, state_dir=d.state_dir, socket_path=d.socket, env=env)


def kill_stray(pid: int) -> None:
    """Test cleanup only: a process the daemon should have killed."""
    if not pid_gone(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

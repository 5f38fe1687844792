"""The steps a clean stop cut, so that the next start re-runs them without an operator.

On a crash, a step that started without a committed result is ambiguous: its
executor call may have had effects, and the operator decides. On a clean stop
(SIGTERM, `daemon.shutdown`) the daemon cancels that call itself, as a rewind
does; once its last append is durable, and still holding the state lock, it
publishes `state/clean-stop`: one framed line (the WAL's framing, so
checksummed and readable with jq) naming those steps and the head:

    {"crc":"...","len":N,"rec":{"version":1,"head":H,"steps":[{"agent":"a","turn_id":"t3","step":1,"started_seq":9}]}}

The next start honours a step only if the recovered state matches exactly
(same head, that step still open with that started_seq), and removes the file
durably before any runner starts: a crash during the re-run leaves no file,
and the step is ambiguous again. The WAL's record format is unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import msgspec
import structlog

from reynd.protocol.state import RuntimeState
from reynd.storage import fsops
from reynd.storage.framing import FrameInvalid, encode_frame, next_frame
from reynd.storage.fsutil import atomic_write, fsync_dir

__all__ = ["NAME", "CleanStop", "CutStep", "honoured", "open_steps", "save", "take"]

log = structlog.get_logger("reynd.clean_stop")

NAME: Final = "clean-stop"
VERSION: Final = 1


class CutStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """An open step: started at `started_seq`, no committed result."""

    agent: str
    turn_id: str
    step: int
    started_seq: int


class CleanStop(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = VERSION
    head: int
    steps: list[CutStep]


def open_steps(state: RuntimeState, agents: Iterable[str]) -> list[CutStep]:
    """Every open step of `agents` in `state`."""
    out: list[CutStep] = []
    for name in agents:
        agent = state.agents.get(name)
        for chain in agent.pending_chains if agent else ():
            if chain.open_step is not None and chain.open_step_seq is not None:
                out.append(
                    CutStep(
                        agent=name,
                        turn_id=chain.turn_id,
                        step=chain.open_step,
                        started_seq=chain.open_step_seq,
                    )
                )
    return out


def honoured(stop: CleanStop, head: int, state: RuntimeState) -> frozenset[CutStep]:
    """The steps of `stop` that the recovered state (at `head`) still has open, as listed."""
    if stop.head != head:
        return frozenset()  # the log changed since (a repair, a restored copy): trust nothing
    return frozenset(stop.steps) & frozenset(open_steps(state, state.agents))


def save(state_dir: Path, head: int, steps: list[CutStep]) -> None:
    """Publish the file atomically (tmp, fsync, rename, fsync the dir); no step, no file."""
    if steps:
        atomic_write(
            state_dir / NAME, encode_frame(msgspec.json.encode(CleanStop(head=head, steps=steps)))
        )


def take(state_dir: Path, head: int, state: RuntimeState) -> frozenset[CutStep]:
    """Read the file, remove it durably, and return the steps to re-run at once.

    A damaged file, or one of a newer version, is ignored (its steps become
    ambiguous: the safe side). Blocking: run it in a worker thread.
    """
    path = state_dir / NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return frozenset()
    steps: frozenset[CutStep] = frozenset()
    try:
        body, _ = next_frame(data, 0)
        stop = msgspec.json.decode(body, type=CleanStop)
    except (FrameInvalid, msgspec.DecodeError) as exc:
        log.warning("clean_stop.ignored", path=str(path), reason=str(exc))
    else:
        if stop.version > VERSION:
            log.warning("clean_stop.ignored", path=str(path), reason=f"version {stop.version}")
        else:
            steps = honoured(stop, head, state)
            log.info(
                "clean_stop.read",
                head=stop.head,
                listed=len(stop.steps),
                resumed=len(steps),
                recovered_head=head,
            )
    with contextlib.suppress(FileNotFoundError):
        fsops.unlink(path)
    fsync_dir(state_dir)  # gone for good before any step runs again
    return steps

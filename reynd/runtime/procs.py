"""Records of the executors' process groups, so that a crash leaves no orphan behind.

The command executor runs each program as the leader of a new session (and
process group). When the daemon dies by SIGKILL, nobody kills that group: it
lives on, and an operator's `retry` would run the step beside it. So each
executor process is recorded in `state/procs/` while it runs (pid, its start
time, the boot id, a random token) and the record removed once the process
is reaped. At start, before any agent runs, `reap_orphans` kills every
recorded group still alive and removes the records.

Why not PR_SET_PDEATHSIG: trio spawns from a worker thread, and Linux sends
that signal when the *thread* that forked exits; idle worker threads exit
after a while, so it would kill healthy programs at random.

No fsync, on purpose: a power loss kills the processes too, and a process
crash keeps the page cache, so the records are there exactly when needed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec
import structlog

from reynd.storage.fsutil import make_dirs, open_private

__all__ = [
    "TOKEN_ENV",
    "GroupRecord",
    "ProcStat",
    "ProcessGroups",
    "encode",
    "load",
    "new_token",
    "parse_stat",
    "victims",
]

log = structlog.get_logger("reynd.procs")

TOKEN_ENV: Final = "REYND_PROC_TOKEN"  # in the program's environment: marks its descendants
_PROC: Final = Path("/proc")
_ROUNDS: Final = 5  # kill, wait, look again: a member may have forked meanwhile
_EXIT_WAIT: Final = 5.0  # seconds; SIGKILLed, a process never runs user code again anyway


class GroupRecord(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One executor process: the leader of its own session and process group."""

    pid: int  # also its pgid and sid (setsid at spawn)
    start: int  # /proc/<pid>/stat starttime (clock ticks since boot): tells a reused pid
    boot_id: str  # start times restart at each boot
    token: str  # the value of TOKEN_ENV in the program's environment


class ProcStat(msgspec.Struct, frozen=True, kw_only=True):
    """What /proc/<pid>/stat says about one process."""

    pid: int
    state: str
    pgid: int
    sid: int
    start: int


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(GroupRecord)


def encode(record: GroupRecord) -> bytes:
    return _encoder.encode(record) + b"\n"


def new_token() -> str:
    return secrets.token_hex(8)


def parse_stat(text: bytes) -> ProcStat | None:
    """Parse /proc/<pid>/stat; None when it does not have the expected shape.

    The command name (field 2) may hold spaces and parentheses: split at the
    last `)`. Fields 3 on are then state, ppid, pgrp, session, ..., 22 starttime.
    """
    head, sep, tail = text.rpartition(b")")
    pid = head.partition(b" (")[0]
    fields = tail.split()
    if not sep or not pid.isdigit() or len(fields) < 20:
        return None
    try:
        return ProcStat(
            pid=int(pid),
            state=fields[0].decode(),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            start=int(fields[19]),
        )
    except (ValueError, UnicodeDecodeError):
        return None


def victims(
    record: GroupRecord, procs: Mapping[int, ProcStat], boot_id: str
) -> tuple[list[int], bool]:
    """The live processes of `record`'s group and session, and whether they need the token check.

    With the leader there (alive, or a zombie not reaped yet) and started at
    the recorded time, its pid cannot have been reused, and Linux keeps a pid
    number allocated while any process still has it as its pgid or sid: every
    member is ours. With the leader gone, the pid may have been reused once
    all our members died (a pid wrap-around), so members are only candidates:
    the caller kills those whose environment carries the record's token.
    A pid that now names a process started at another time was reused: nothing.
    """
    if record.boot_id != boot_id:
        return [], False  # a reboot ended them all
    leader = procs.get(record.pid)
    if leader is not None and leader.start != record.start:
        return [], False
    members = sorted(
        p.pid
        for p in procs.values()
        if p.state != "Z" and record.pid in (p.pgid, p.sid) and p.start >= record.start
    )
    return members, leader is None


def load(path: Path) -> GroupRecord | None:
    """A record file's content; None when it cannot be read or parsed."""
    try:
        return _decoder.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None


def _stat(pid: int) -> ProcStat | None:
    try:
        return parse_stat((_PROC / str(pid) / "stat").read_bytes())
    except OSError:
        return None  # exited meanwhile


def _processes() -> dict[int, ProcStat]:
    out: dict[int, ProcStat] = {}
    for entry in os.scandir(_PROC):
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            out[stat.pid] = stat
    return out


def _carries(pid: int, token: str) -> bool:
    """True when `pid`'s environment has the record's token (only our descendants do)."""
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{TOKEN_ENV}={token}".encode() in environ.split(b"\0")


def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _wait_exit(pids: list[int], timeout: float) -> list[int]:
    """Wait until each process has exited (a zombie counts); returns those still running."""
    fds: dict[int, int] = {}
    poller = select.poll()
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # already reaped
            except OSError:
                continue  # no pidfd (old kernel): SIGKILL is pending, it will not run again
            fds[fd] = pid
            poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while fds and (left := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                poller.unregister(fd)
                os.close(fd)
                del fds[fd]
        return sorted(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


class ProcessGroups:
    """The record directory (0700, files 0600) of one state directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        make_dirs(directory)
        self._boot_id = _boot_id()

    def add(self, pid: int, token: str) -> Path | None:
        """Record a just-spawned executor process; returns the record's path.

        Runs on the event loop: one small write, no fsync (see the module).
        None when the process is already gone or the file cannot be written
        (logged: the program runs, without the crash-time safety net).
        """
        stat = _stat(pid)
        if stat is None:
            return None
        record = GroupRecord(pid=pid, start=stat.start, boot_id=self._boot_id, token=token)
        path = self.directory / f"{pid}-{token}.json"
        try:
            # One write of a few dozen bytes: a crash cannot leave half of it.
            fd = open_private(path, os.O_WRONLY | os.O_EXCL | os.O_CLOEXEC)
            try:
                os.write(fd, encode(record))
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("procs.record_failed", pid=pid, path=str(path), error=str(exc))
            return None
        return path

    def remove(self, path: Path) -> None:
        """Drop a record once its process is reaped."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def _alive(
        self,
        records: list[tuple[Path, GroupRecord]],
        procs: dict[int, ProcStat],
        verified: set[int],
    ) -> dict[int, int]:
        """Each live process of a recorded group -> its group's index in `records`.

        `verified`: the leaders seen alive (their members stay ours), updated.
        """
        found: dict[int, int] = {}
        for i, (_, record) in enumerate(records):
            pids, check = victims(record, procs, self._boot_id)
            if check and record.pid not in verified:
                pids = [pid for pid in pids if _carries(pid, record.token)]
            elif pids:
                verified.add(record.pid)
            for pid in pids:
                found.setdefault(pid, i)
        return found

    def reap_orphans(self) -> list[int]:
        """Kill (SIGKILL) every recorded group still alive, then remove the records.

        Call at start, holding the state directory's lock and before any
        executor runs: every record then belongs to a previous daemon.
        Returns the pids killed. Blocking: run it in a worker thread.

        A member the daemon may not signal (EPERM: another user's process,
        e.g. a setuid program the step ran) is logged and left alive, and its
        group's record kept, so that each start tries again until that group
        is gone; it never stops the daemon from starting.
        """
        paths = sorted(p for p in self.directory.iterdir() if p.is_file())
        records = _load_all(paths)
        killed: list[int] = []
        refused: dict[int, int] = {}  # pid -> its group's index in records
        verified: set[int] = set()  # leaders seen alive: their members stay ours
        for _ in range(_ROUNDS):
            found = self._alive(records, _processes(), verified)
            # Not one already killed and stuck exiting, nor one we may not signal.
            fresh = sorted(found.keys() - killed - refused.keys())
            if not fresh:
                break
            signalled = _kill_all(fresh, found, records, refused)
            killed.extend(signalled)
            still = _wait_exit(signalled, _EXIT_WAIT)
            if still:
                log.warning("procs.still_exiting", pids=still)
        if killed:
            log.warning("procs.orphans_killed", pids=sorted(killed), records=len(records))
        keep = {records[i][0] for i in refused.values()}
        for path in paths:
            if path not in keep:
                self.remove(path)
        return sorted(killed)


def _load_all(paths: list[Path]) -> list[tuple[Path, GroupRecord]]:
    """The readable records among `paths` (an unreadable one is logged and skipped)."""
    records: list[tuple[Path, GroupRecord]] = []
    for path in paths:
        record = load(path)
        if record is None:
            log.warning("procs.record_unreadable", path=str(path))
        else:
            records.append((path, record))
    return records


def _kill_all(
    fresh: list[int],
    found: dict[int, int],
    records: list[tuple[Path, GroupRecord]],
    refused: dict[int, int],
) -> list[int]:
    """SIGKILL each pid of `fresh`; the ones signalled. One we may not signal goes to `refused`.

    `found` maps each pid to its group's index in `records`.
    """
    signalled: list[int] = []
    for pid in fresh:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:
            refused[pid] = found[pid]
            path, record = records[found[pid]]
            log.warning(
                "procs.orphan_not_killed",
                pid=pid,
                group=record.pid,
                record=str(path),
                error="permission denied: another user's process; kill it by hand",
            )
            continue
        signalled.append(pid)
    return signalled

"""The audit EventStore: `<state_dir>/events/<run_id>[.<n>].jsonl.gz` (codec.py).

Durability contract (docs/audit.md), deliberately weaker than the WAL's:

- recording is an in-memory append on the trio thread (`record` encodes the
  committed batch once and appends the bytes to a buffer): no I/O, no await,
  nothing on the commit path can block on the audit log;
- a background task writes the buffer out on a worker thread at most
  `flush_interval_s` later (sooner when `buffer_bytes` wait), and readers
  flush before they read; there is no fsync per append, so a crash (of the
  process or the machine) may lose the last lines, which is accepted by
  design: recovery never reads this log (it reads the WAL only);
- a clean shutdown writes `run.stopped` and syncs the file once;
- a write error is logged and the lines are dropped: the audit log never
  takes the daemon down.

Files rotate by size and are collected by their own retention, independent
of the WAL's: a WAL collection never touches them.

One run per daemon start (run ids and file names: files.py; reading back:
reader.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
import structlog
import trio

from reynd.audit.codec import compress
from reynd.audit.files import AuditFile, file_name, new_run_id, parse_name
from reynd.audit.options import AuditOptions
from reynd.audit.reader import LineCache, Loaded
from reynd.audit.record import (
    RUN_STARTED,
    RUN_STOPPED,
    AuditLine,
    line_kind,
    reset_summary,
    summarize,
)
from reynd.core.lineage import Lineage
from reynd.core.reflog import by_of
from reynd.protocol import audit_methods as am
from reynd.protocol import events as ev
from reynd.protocol import methods as m
from reynd.storage.fsutil import make_dirs, open_private

__all__ = ["EventStore"]

log = structlog.get_logger("reynd.audit")


class EventStore:
    """The audit log of this daemon run (writer) and of every run on disk (reader)."""

    def __init__(self, directory: Path, options: AuditOptions, run: str) -> None:
        self.directory = directory
        self.options = options
        self.run_id = run
        self._files: list[AuditFile] = []
        self._buffer = bytearray()
        self._next_index = 0
        self._pending_reset: tuple[ev.Rewind, int] | None = None
        self._encoder = msgspec.json.Encoder()
        self._decoder = msgspec.json.Decoder(AuditLine)
        self._cache = LineCache(64 * 1024 * 1024)
        self._fd: int | None = None
        self._write_lock = trio.Lock()
        self._read_lock = trio.Lock()
        self._wake = trio.Event()
        self._full = trio.Event()
        self._closed = False
        self.dropped_bytes = 0
        self.last_error: str | None = None

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, options: AuditOptions, *, head: int, branch: int, floor: int
    ) -> EventStore:
        """Scan `directory` (created if absent), start a new run, apply retention.

        Blocking: call it on a worker thread.
        """
        make_dirs(directory)
        files = []
        for path in directory.iterdir():
            parsed = parse_name(path.name)
            if parsed is not None and path.is_file():
                files.append(AuditFile(parsed[0], parsed[1], path, path.stat().st_size))
        files.sort(key=lambda f: (f.run, f.n))
        run = new_run_id([f.run for f in files], time.time(), os.getpid())
        store = cls(directory, options, run)
        store._files = files
        store._add(
            AuditLine(
                i=0,
                kind=RUN_STARTED,
                seq=head,
                branch=branch,
                ts=time.time(),
                summary=f"daemon started (pid {os.getpid()}) at seq {head}",
                info={"pid": os.getpid(), "head": head, "floor": floor},
            )
        )
        store._write(store._take())  # the run's first file exists from the start
        store._collect()  # a new run adds a file: older runs may now be over the limits
        return store

    # -- recording (trio thread, the hot path) ---------------------------------------------

    def record(self, events: Sequence[ev.Event], lineage: Lineage) -> None:
        """Buffer one committed batch: one encode, one buffer append, no I/O."""
        if self._closed:
            return
        lines: list[AuditLine] = []
        for event in events:
            if self._pending_reset is not None:
                self._emit_reset(None)  # a reset that never reported its outcome
            branch = lineage.branch_of(event.seq)
            if isinstance(event, ev.Rewind):
                # Written with its outcome when the reset finishes (reset_done).
                if lines:
                    self._extend(lines)
                    lines = []
                self._pending_reset = (event, branch)
                continue
            lines.append(
                AuditLine(
                    i=self._next_index + len(lines),
                    kind=line_kind(event),
                    seq=event.seq,
                    branch=branch,
                    ts=event.ts,
                    agent=event.agent if isinstance(event, ev.AgentEvent) else None,
                    summary=summarize(event),
                    event=event,  # type: ignore[arg-type]  # every committed event is in AnyEvent
                )
            )
        if lines:
            self._extend(lines)

    def reset_done(self, result: m.RewindResult) -> None:
        """The reset record's line, with what the reset did."""
        if self._closed:
            return
        pending = self._pending_reset
        if pending is not None and pending[0].seq == result.reset_seq:
            self._emit_reset(result)

    def _emit_reset(self, result: m.RewindResult | None) -> None:
        assert self._pending_reset is not None
        event, branch = self._pending_reset
        self._pending_reset = None
        info = am.ResetInfo(
            op=event.mode,
            target=event.target_n,
            supersedes=event.supersedes,
            agent=event.agent,
            reason=event.reason,
            by=by_of(event),
            # What the record itself keeps (issue 24); the finished reset says the same.
            cancelled=[am.CancelledTurn(agent=a, turn_id=t) for a, t in event.cancelled],
        )
        if result is not None:
            info.mode = result.mode
            info.cancelled = [
                am.CancelledTurn(agent=c.agent, turn_id=c.turn_id) for c in result.cancelled
            ]
            info.duration_ms = round(result.duration_ms, 3)
        self._add(
            AuditLine(
                i=self._next_index,
                kind=line_kind(event),
                seq=event.seq,
                branch=branch,
                ts=event.ts,
                agent=event.agent,
                summary=reset_summary(info, event.seq),
                reset=info,
                event=event,
            )
        )

    def _add(self, line: AuditLine) -> None:
        self._extend([line])

    def _extend(self, lines: list[AuditLine]) -> None:
        self._buffer += self._encoder.encode_lines(lines)
        self._next_index += len(lines)
        self._wake.set()
        if len(self._buffer) >= self.options.buffer_bytes:
            self._full.set()

    def _take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data

    # -- writing (worker thread) ------------------------------------------------------------

    async def run(self) -> None:
        """The flusher: writes buffered lines out, off the event loop."""
        while True:
            await self._wake.wait()
            with trio.move_on_after(self.options.flush_interval_s):
                await self._full.wait()
            await self.flush()

    async def flush(self) -> None:
        """Write every line recorded so far (no fsync)."""
        async with self._write_lock:
            self._wake = trio.Event()
            self._full = trio.Event()
            data = self._take()
            if data:
                await trio.to_thread.run_sync(self._write, data)

    async def aclose(self, head: int, branch: int) -> None:
        """Write `run.stopped`, flush, sync once and close (call shielded)."""
        if self._closed:
            return
        if self._pending_reset is not None:
            self._emit_reset(None)
        self._add(
            AuditLine(
                i=self._next_index,
                kind=RUN_STOPPED,
                seq=head,
                branch=branch,
                ts=time.time(),
                summary=f"daemon stopped at seq {head}",
                info={"head": head, "dropped_bytes": self.dropped_bytes},
            )
        )
        await self.flush()
        self._closed = True
        async with self._write_lock:
            await trio.to_thread.run_sync(self._close_fd)

    def _close_fd(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as exc:
            log.warning("audit.sync_failed", error=str(exc))
        finally:
            os.close(fd)

    def _current(self) -> AuditFile:
        last = self._files[-1] if self._files else None
        if last is None or last.run != self.run_id:
            last = AuditFile(self.run_id, 0, self.directory / file_name(self.run_id, 0), 0)
            self._files.append(last)
        return last

    def _write(self, data: bytes) -> None:
        try:
            self._write_lines(data)
        except OSError as exc:
            self.dropped_bytes += len(data)
            self.last_error = str(exc)
            log.warning("audit.write_failed", error=str(exc), dropped_bytes=len(data))
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            current = self._current()
            if current.size:
                # A member may be cut short at the end: the next ones go in a new file.
                try:
                    self._rotate(current)
                except OSError as again:  # the log never takes the daemon down
                    log.warning("audit.rotate_failed", error=str(again))

    def _write_lines(self, data: bytes) -> None:
        """Append whole lines as gzip members (codec.py), rotating before a file would pass
        `file_bytes`: a member is never split across files."""
        for member in self._members(data):
            current = self._current()
            if current.size and current.size + len(member) > self.options.file_bytes:
                self._rotate(current)
                current = self._current()
            if self._fd is None:
                self._fd = open_private(current.path, os.O_WRONLY | os.O_APPEND)
                current.size = os.fstat(self._fd).st_size
            view = memoryview(member)
            while view:
                written = os.write(self._fd, view)
                current.size += written
                view = view[written:]

    def _members(self, data: bytes) -> list[bytes]:
        """`data` compressed, in as few members as keep each within `file_bytes` (a single
        line that does not fit is a member alone)."""
        member = compress(data)
        if len(member) <= self.options.file_bytes:
            return [member]
        cut = data.rfind(b"\n", 0, len(data) // 2) + 1 or data.find(b"\n") + 1
        if cut <= 0 or cut >= len(data):
            return [member]
        return self._members(data[:cut]) + self._members(data[cut:])

    def _rotate(self, current: AuditFile) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._files.append(
            AuditFile(
                self.run_id,
                current.n + 1,
                self.directory / file_name(self.run_id, current.n + 1),
                0,
            )
        )
        self._collect()

    def _collect(self) -> None:
        """Audit retention: drop whole files, oldest first, never the one being written."""
        opts = self.options
        total = sum(f.size for f in self._files)
        while len(self._files) > 1:
            over_bytes = opts.max_total_bytes and total > opts.max_total_bytes
            over_files = opts.max_files and len(self._files) > opts.max_files
            if not (over_bytes or over_files):
                break
            oldest = self._files[0]
            try:
                os.unlink(oldest.path)
            except FileNotFoundError:
                pass
            except OSError as exc:  # read-only, EIO: keep it, try again at the next rotation
                log.warning("audit.collect_failed", file=oldest.path.name, error=str(exc))
                return
            total -= oldest.size
            del self._files[0]
            log.info("audit.collected", file=oldest.path.name, bytes=oldest.size)

    # -- reading ----------------------------------------------------------------------------

    def files(self) -> list[AuditFile]:
        """The files on disk now, oldest first (a copy)."""
        # tuple() copies in one step: the writer thread may rotate meanwhile.
        return [AuditFile(f.run, f.n, f.path, f.size) for f in tuple(self._files)]

    def runs(self) -> list[str]:
        return sorted({f.run for f in tuple(self._files)} | {self.run_id})

    async def load(self, runs: set[str] | None = None) -> Loaded:
        """Every line of `runs` (all when None) written so far, after a flush."""
        await self.flush()
        async with self._write_lock:
            files = [f for f in self.files() if runs is None or f.run in runs]
        async with self._read_lock:
            return await trio.to_thread.run_sync(self._load, files)

    def _load(self, files: list[AuditFile]) -> Loaded:
        out = Loaded()
        for f in files:
            lines, damaged = self._cache.lines(f.path, f.size, f.compressed, self._decoder)
            out.runs.setdefault(f.run, []).extend(lines)
            out.damaged += damaged
        for lines in out.runs.values():
            lines.sort(key=lambda line: line.i)
        return out

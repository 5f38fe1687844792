"""Run a program per act-step: a StepRequest as JSON on stdin, a StepResult as JSON on stdout.

This wraps any real model CLI. The program's exit status must be 0 and its
stdout one JSON object; anything else is a step error that quotes stderr. On
cancel (a rewind, agents.cancel) the process is killed at once and reaped:
no zombie, no result committed.

The program leads a new session and process group. While it runs, the group
is recorded in the state directory (`reynd.runtime.procs`), so that the next
start kills it if the daemon dies without reaping it (SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import msgspec
import trio

from reynd.protocol.events import Effect
from reynd.protocol.executor import CommandOptions, StepRequest, StepResult
from reynd.runtime.executors.base import StepFailed
from reynd.runtime.procs import TOKEN_ENV, ProcessGroups, new_token

__all__ = ["CommandExecutor"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(StepResult)


async def _kill_group(process: trio.Process) -> None:
    # The program may have children of its own (a shell, a model CLI): kill the
    # whole process group it leads, then let trio reap the leader.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.kill()


class CommandExecutor:
    def __init__(self, options: CommandOptions, groups: ProcessGroups | None = None) -> None:
        self.options = options
        self.calls = 0
        self._groups = groups

    async def step(self, request: StepRequest) -> StepResult:
        self.calls += 1
        opts = self.options
        try:
            with trio.fail_after(opts.timeout):
                proc = await self._run(_encoder.encode(request))
        except trio.TooSlowError:
            raise StepFailed(f"{opts.argv[0]} did not answer within {opts.timeout:g}s") from None
        except OSError as exc:
            raise StepFailed(f"cannot run {opts.argv[0]}: {exc}") from None
        stderr = proc.stderr.decode(errors="replace").strip()[-500:]
        if proc.returncode != 0:
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with status {proc.returncode}"
            )
            raise StepFailed(
                f"{opts.argv[0]} {how}" + (f": {stderr}" if stderr else ""),
                exit_code=proc.returncode if proc.returncode > 0 else None,
            )
        try:
            return _decoder.decode(proc.stdout)
        except msgspec.DecodeError as exc:
            head = proc.stdout[:200].decode(errors="replace")
            raise StepFailed(
                f"{opts.argv[0]} did not print a StepResult as JSON ({exc}); stdout began {head!r}",
                exit_code=0,
            ) from None

    def effect(
        self, request: StepRequest, result: StepResult | None, failure: StepFailed | None
    ) -> Effect:
        """The program ran (or tried to) with its exit status; its own tokens, if it says."""
        code = 0 if result is not None else failure.exit_code if failure else None
        return Effect(
            executor="command",
            argv=tuple(self.options.argv),
            exit_code=code,
            tokens_in=result.tokens_in if result else 0,
            tokens_out=result.tokens_out if result else 0,
        )

    async def _run(self, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        """trio.run_process, with the process group recorded from spawn to reap."""
        opts = self.options
        token = new_token()
        # Descendants inherit the token: it tells our orphans from a reused pid's.
        env = {**os.environ, **opts.env, TOKEN_ENV: token}
        done: list[subprocess.CompletedProcess[bytes]] = []
        spawn_error: Exception | None = None
        record: Path | None = None

        async def run(task_status: trio.TaskStatus[trio.Process]) -> None:
            done.append(
                await trio.run_process(
                    opts.argv,
                    stdin=stdin,
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    env=env,
                    cwd=opts.cwd,
                    start_new_session=True,
                    deliver_cancel=_kill_group,
                    task_status=task_status,
                )
            )

        try:
            async with trio.open_nursery() as nursery:
                try:
                    process: trio.Process = await nursery.start(run)
                except Exception as exc:
                    # Popen's own refusal (OSError, ValueError): no process exists.
                    # Raised below, outside the nursery, so it is not wrapped in a group.
                    spawn_error = exc
                else:
                    if self._groups is not None:
                        record = self._groups.add(process.pid, token)
        finally:
            # The leader is reaped here, on success, failure or cancellation alike.
            if record is not None and self._groups is not None:
                self._groups.remove(record)
        if spawn_error is not None:
            raise spawn_error
        return done[0]

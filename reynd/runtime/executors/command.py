"""Run a program per act-step: a StepRequest as JSON on stdin, a StepResult as JSON on stdout.

This wraps any real model CLI. The program's exit status must be 0 and its
stdout one JSON object; anything else is a step error that quotes stderr. On
cancel (a rewind, agents.cancel) the process is killed at once and reaped:
no zombie, no result committed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Annotated

import msgspec
import trio

from reynd.protocol.executor import StepRequest, StepResult
from reynd.runtime.executors.base import StepFailed

__all__ = ["CommandExecutor", "CommandOptions"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(StepResult)


class CommandOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    argv: Annotated[list[str], msgspec.Meta(min_length=1)]
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    env: dict[str, str] = {}
    cwd: str | None = None


async def _kill_group(process: trio.Process) -> None:
    # The program may have children of its own (a shell, a model CLI): kill the
    # whole process group it leads, then let trio reap the leader.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.kill()


class CommandExecutor:
    def __init__(self, options: CommandOptions) -> None:
        self.options = options
        self.calls = 0

    async def step(self, request: StepRequest) -> StepResult:
        self.calls += 1
        opts = self.options
        env = {**os.environ, **opts.env} if opts.env else None
        try:
            with trio.fail_after(opts.timeout):
                proc = await trio.run_process(
                    opts.argv,
                    stdin=_encoder.encode(request),
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    env=env,
                    cwd=opts.cwd,
                    start_new_session=True,
                    deliver_cancel=_kill_group,
                )
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
            raise StepFailed(f"{opts.argv[0]} {how}" + (f": {stderr}" if stderr else ""))
        try:
            return _decoder.decode(proc.stdout)
        except msgspec.DecodeError as exc:
            head = proc.stdout[:200].decode(errors="replace")
            raise StepFailed(
                f"{opts.argv[0]} did not print a StepResult as JSON ({exc}); stdout began {head!r}"
            ) from None

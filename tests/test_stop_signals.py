"""A storm of SIGTERMs is read, not nested: the process keeps running its own code.

A Python signal handler that is still running when the next signal lands is
started again inside itself; a storm faster than the handler nests it until
RecursionError (trio's own receiver did this to the daemon under load in CI).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

# Reads stop signals until it has seen READS batches of them, working between reads.
CHILD = textwrap.dedent(
    """
    import sys, trio
    from reynd.daemon.stop_signals import stop_signals, stop_signals_ignored

    READS = int(sys.argv[1])

    async def main() -> None:
        with stop_signals() as signals:
            print("ready", flush=True)
            seen = 0
            async for _ in signals:
                seen += 1
                sum(range(200))  # some bytecode for a signal to land in
                if seen == READS:
                    return

    with stop_signals_ignored():
        trio.run(main)
        print("done", flush=True)
    """
)


def storm(reads: int) -> tuple[int, int, str, str]:
    """SIGTERM the child in a tight loop until it exits: (sent, exit code, stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(reads)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.communicate()
    sent = 0
    give_up = time.monotonic() + 60  # a child wedged by its own handlers never exits
    while proc.poll() is None:  # a zombie still takes a signal; poll reaps it
        if time.monotonic() > give_up:
            proc.kill()
            raise AssertionError(f"still running after {sent} SIGTERMs: {proc.communicate()}")
        os.kill(proc.pid, signal.SIGTERM)
        sent += 1
    out, err = proc.communicate()
    return sent, proc.returncode, out, err


def test_a_storm_of_sigterms_is_read_to_the_end_without_recursion() -> None:
    sent, code, out, err = storm(20_000)
    assert code == 0 and out == "done\n", (sent, code, err[-2000:])
    assert "RecursionError" not in err
    assert sent >= 20_000


def test_signals_outside_the_reader_do_nothing() -> None:
    """Before and after the reader, SIGTERM meets the no-op handler, not the default action."""
    sent, code, out, err = storm(1)
    assert sent >= 1 and code == 0 and out == "done\n", (sent, code, err[-2000:])

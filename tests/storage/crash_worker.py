"""A scripted Store workload for the crash tests; run by path with sys.executable.

    python crash_worker.py ROOT 'JSON script'

Script steps: ["append", n] appends the next n events of the deterministic
stream (helpers.scripted_op) one call each, ["batch", n] in one call,
["forever", size] appends batches of `size` until killed, ["rewind", n],
["checkout", n], ["snapshot"], ["gc", {policy}] (a collection under that
RetentionPolicy). Every acknowledged step prints one line, flushed, only after
the call returned:

    ack SEQ INDEX      append of stream event INDEX got SEQ
    reset SEQ TARGET   a reset record
    snap SEQ           a snapshot written
    gc FLOOR           a collection finished; FLOOR is the new floor
    done

Crash points are armed by the parent through REYN_CRASH_AT.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec
from helpers import opts, scripted_op, to_event

from reynd.core.retention import RetentionPolicy
from reynd.storage.gc import collect
from reynd.storage.store import Store


def main() -> None:
    root = Path(sys.argv[1])
    script = json.loads(sys.argv[2])
    out = sys.stdout
    store = Store.open(root, opts())
    index = store.head  # the stream continues where the log stands (no resets there)

    def append(n: int) -> None:
        nonlocal index
        ops = [scripted_op(index + k) for k in range(n)]
        written = store.append([to_event(op) for op in ops])
        for k, e in enumerate(written):
            out.write(f"ack {e.seq} {index + k}\n")
        out.flush()
        index += n

    for step in script:
        kind = step[0]
        if kind == "append":
            for _ in range(step[1]):
                append(1)
        elif kind == "batch":
            append(step[1])
        elif kind == "forever":
            while True:
                append(step[1])
        elif kind in ("rewind", "checkout"):
            if kind == "rewind":
                record = store.rewind(step[1])
            else:
                _, record = store.checkout(step[1])
            out.write(f"reset {record.seq} {record.target_n}\n")
            out.flush()
        elif kind == "snapshot":
            out.write(f"snap {store.snapshot_now()}\n")
            out.flush()
        elif kind == "gc":
            report = collect(store, msgspec.convert(step[1], RetentionPolicy))
            out.write(f"gc {report.floor}\n")
            out.flush()
        else:
            raise ValueError(step)
    store.close()
    out.write("done\n")
    out.flush()


if __name__ == "__main__":
    main()

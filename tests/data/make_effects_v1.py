"""Make tests/data/effects-v1.tar.gz: a state directory written before issue 25's effects.

Its memos and failed turn ends carry no `effect` (the format of commit
711e433), and its segment indexes are version 3: a command step that
answered, `true` and `false` (each fails its turn), and a builtin turn of
three steps, after `mark`. The archive is kept, with the figures the test
expects in effects-v1.json, so that tests/test_rewind_preview.py can check
that such a directory opens and that a preview counts those steps as
unknown, not as none. Runs only against that version (the daemon it starts
is the reynd found first on the path), e.g. from a tree of 711e433 with this
file and tests/data/pack.py copied in (PYTHONPATH absolute: the daemon runs
in another directory):

    PYTHONPATH=$PWD python -m tests.data.make_effects_v1 OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.data.pack import pack
from tests.harness import start_daemon

CONFIG = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 1\n"
# A program on any PATH: the archive must not name this machine's interpreter.
ANSWER = [
    "python3",
    "-c",
    "import json, sys; json.load(sys.stdin); "
    'print(json.dumps({"done": True, "reply": "ok", "tokens_in": 3, "tokens_out": 4}))',
]
COMMANDS = {"cmd": ANSWER, "yes": ["true"], "no": ["false"]}


def main(out: Path) -> None:
    work = out / "work"
    state_dir = work / "project" / ".reyn"
    d = start_daemon(work, state_dir=state_dir, config=CONFIG)
    facts: dict[str, Any] = {}
    try:
        d.call("agents.create", {"name": "b", "executor": "builtin"})
        for name, argv in COMMANDS.items():
            options = {"argv": argv}
            d.call("agents.create", {"name": name, "executor": "command", "options": options})
        mark = d.call("daemon.status")["head"]
        for name in ("cmd", "yes", "no", "b"):
            d.call("agents.send", {"agent": name, "text": "go", "wait": True, "timeout": 30})
        facts = {"mark": mark, "head": d.call("daemon.status")["head"], "unknown_steps": 6}
    finally:
        d.stop()
    pack(work, out, "effects-v1", facts)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""`python -m bench --quick --json` prints one JSON object whose `targets` are data.

Run at small sizes and without the peer (LangGraph is the bench extra, not a
test dependency); only the shape is checked: this machine is shared and noisy,
so whether a target is met is not for a test to say. Every target is listed,
each `{name, value, goal, met}`, and `met` agrees with value and goal.
"""

from __future__ import annotations

import json
import operator
import subprocess
import sys
from pathlib import Path

from bench.targets import GOALS

# Parts that --no-peer skips (LangGraph and PostgreSQL); every other target is measured.
_SKIPPED = {
    "workload.ahead_of_peer",
    "workload.bytes_per_turn_flat",
    "commit.64_writers_vs_postgres",
    *(name for name in GOALS if name.startswith("langgraph.")),
}
_OPS = {"<": operator.lt, "<=": operator.le, ">=": operator.ge}


def test_quick_json_lists_every_target_as_name_value_goal_met(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "--quick",
        "--json",
        "--no-peer",
        "--sizes",
        "1000,2000",
        "--appends",
        "64",
        "--seconds",
        "0.2",
        "--out",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # one JSON object, nothing else on stdout
    assert isinstance(result, dict)
    targets = result["targets"]
    assert [t["name"] for t in targets] == list(GOALS)
    for t in targets:
        assert set(t) >= {"name", "value", "goal", "met"}, t
        assert t["goal"] == GOALS[t["name"]]
        assert isinstance(t["met"], bool), t
        if t["name"] in _SKIPPED:
            assert t["value"] is None and t["met"] is False, t
            continue
        assert isinstance(t["value"], int | float), t
        op, bound = t["goal"].split()
        assert t["met"] == _OPS[op](t["value"], float(bound)), t
    # The same object is written beside the text report.
    written = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert written["targets"] == targets
    assert "Targets (value vs goal)" in (tmp_path / "out" / "bench.txt").read_text()

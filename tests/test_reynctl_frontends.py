"""reynctl's frontends and CLI consistency (issue 25): the real process, a real daemon."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_reynctl_cli import _env

TIMEOUT = 30


def test_tui_with_stdout_not_a_terminal_refuses_at_once(tmp_path: Path):
    # stdout is a pipe: a TUI there would write escape codes into it, forever.
    proc = subprocess.run(
        [sys.executable, "-m", "reynctl", "--socket", str(tmp_path / "none.sock"), "tui"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "stdout is not a terminal" in proc.stderr

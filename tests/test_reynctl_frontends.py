"""reynctl's frontends and CLI consistency (issue 25): the real process, a real daemon."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from reynctl.cli import cli
from reynctl.client import Client
from tests.harness import Daemon
from tests.test_reynctl_cli import _complete, _env, _stop, ok, reynctl, seed

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


# -- watch --no-initial ---------------------------------------------------------------------


def _read_line(fd: int, timeout: float = 20.0) -> bytes:
    """One line from `fd`, read byte by byte (so nothing after it is consumed), bounded."""
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"no line within {timeout}s (have {line!r})"
        byte = os.read(fd, 1)
        assert byte, f"EOF (have {line!r})"
        line += byte
    return line


def test_watch_no_initial_streams_only_changes(daemon: Daemon):
    seed(daemon.socket, turns=1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "reynctl", "--socket", str(daemon.socket), "watch", "--no-initial"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        # Subscribed once it says so (stderr); only then is a change sure to be seen.
        assert b"watching for changes" in _read_line(proc.stderr.fileno())
        with Client(daemon.socket) as c:
            seq = c.append(
                agent="ada", kind="message.received", data={"message_id": "m9", "text": "hi"}
            ).seq
        first = _read_line(proc.stdout.fileno()).decode()
        assert first.split()[:2] == [str(seq), "records"], first  # no state dump before it
    finally:
        code, err = _stop(proc)
    assert code == 130, err


# -- options after the subcommand, help -----------------------------------------------------


def test_color_is_accepted_after_the_subcommand(daemon: Daemon):
    seed(daemon.socket, turns=1)
    coloured = ok(reynctl("generations", "--color", "always", sock=daemon.socket))
    assert "\x1b[" in coloured
    plain = ok(reynctl("--color", "always", "generations", "--color", "never", sock=daemon.socket))
    assert "\x1b[" not in plain


def test_help_command_prints_the_help_of_a_command():
    runner = CliRunner()
    top = runner.invoke(cli, ["help"])
    assert top.exit_code == 0 and top.output == runner.invoke(cli, ["--help"]).output
    one = runner.invoke(cli, ["help", "rewind"])
    assert one.exit_code == 0 and one.output == runner.invoke(cli, ["rewind", "--help"]).output
    nested = runner.invoke(cli, ["help", "agents", "create"])
    assert nested.output == runner.invoke(cli, ["agents", "create", "--help"]).output
    bad = runner.invoke(cli, ["help", "frobnicate"])
    assert bad.exit_code == 2 and "reynctl help" in bad.output


def test_socket_help_describes_the_lookup():
    text = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    for step in ("$REYN_SOCKET", "reynd.toml", "$REYN_STATE_DIR", ".reyn", "/run/reynd/reynd.sock"):
        assert step in text, step


# -- paging, completion ------------------------------------------------------------------


def test_paging_hint_keeps_the_flags_it_was_given(daemon: Daemon):
    ends = seed(daemon.socket, turns=4)
    with Client(daemon.socket) as c:
        c.rewind(seq=ends[0])
    proc = reynctl("generations", "--all-branches", "--limit", "2", sock=daemon.socket)
    hint = next(line for line in ok(proc) and proc.stderr.splitlines() if "more:" in line)
    assert "--all-branches" in hint and "--limit 2" in hint and "--cursor" in hint, hint
    cmd = hint.split("more:", 1)[1].split()
    assert cmd[0] == "reynctl"
    again = ok(reynctl(*cmd[1:], sock=daemon.socket))  # runnable as printed
    assert again.strip()


def test_completion_of_rewind_offers_only_active_seqs(daemon: Daemon):
    ends = seed(daemon.socket)
    with Client(daemon.socket) as c:
        c.rewind(seq=ends[0])  # ends[1] and ends[2] are abandoned now
    rewind = {int(s) for s in _complete(f"reynctl --socket {daemon.socket} rewind ")}
    checkout = {int(s) for s in _complete(f"reynctl --socket {daemon.socket} checkout ")}
    assert ends[0] in rewind and not rewind & {ends[1], ends[2]}
    assert {ends[0], ends[1], ends[2]} <= checkout


# -- answer to a question nobody asked -------------------------------------------------------


def test_answer_to_an_unknown_question_warns_and_needs_buffer(daemon: Daemon):
    daemon.call("agents.create", {"name": "ada"})
    head = daemon.call("daemon.status")["head"]
    typo = reynctl("answer", "ada", "t1.s9", "Kyoto", sock=daemon.socket)
    assert typo.returncode == 1, typo.stderr
    assert "t1.s9" in typo.stderr and "--buffer" in typo.stderr
    assert daemon.call("daemon.status")["head"] == head  # nothing recorded
    kept = ok(reynctl("answer", "ada", "t1.s9", "Kyoto", "--buffer", sock=daemon.socket))
    assert "buffered" in kept
    assert daemon.call("daemon.status")["head"] > head


# -- --json errors carry a code ---------------------------------------------------------------


def test_json_error_for_an_unreachable_daemon_carries_a_code(tmp_path: Path):
    proc = reynctl("--json", "status", sock=tmp_path / "absent.sock")
    assert proc.returncode == 3
    err = json.loads(proc.stderr)["error"]
    assert err["name"] == "no_daemon" and isinstance(err["code"], int), err


def test_client_codes_are_distinct_and_never_the_daemons():
    from reynctl import demo, embedded, errors
    from reynd.protocol.errors import ReyndError

    found: list[type[errors.ClientError]] = [errors.ClientError]
    for cls in found:  # grows as it goes: every subclass, at any depth
        found += cls.__subclasses__()
    codes = {c.name: c.code for c in found}
    assert {demo.DemoFailed.name, embedded.EmbeddedDaemonError.name} <= set(codes)
    assert len(codes) >= 12 and len(set(codes.values())) == len(codes), codes
    assert all(code in errors.CLIENT_CODES for code in codes.values()), codes
    daemon = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, ReyndError)]
    assert not {c.code for c in daemon} & set(codes.values())

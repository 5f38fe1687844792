"""One daemon per state dir, found from the project directory as git finds `.git`.

`reynd serve` in a project uses the nearest `.reyn/` from the working directory
up (else creates `./.reyn`) and, unless told otherwise, a socket named after
that state dir; `reynctl` anywhere in the project finds the same state dir and
so the same socket. Two projects run two daemons side by side, and reynctl in
one never talks to the other's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reynctl.client import find_socket
from reynd.protocol.paths import find_state_dir, resolve_state_dir, state_socket
from tests.harness import Daemon, start_daemon
from tests.test_reynctl_cli import _env


def reynctl_in(cwd: Path, runtime: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real reynctl run from `cwd`, with no socket or state dir given."""
    return subprocess.run(
        [sys.executable, "-m", "reynctl", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_env({"XDG_RUNTIME_DIR": str(runtime)}),
        timeout=60,
        check=False,
    )


def serve_in(project: Path, runtime: Path) -> Daemon:
    """`reynd serve` started in `project` with no --state-dir and no --socket."""
    state = project / ".reyn"
    command = [sys.executable, "-m", "reynd.daemon.cli", "serve", "--log-format", "json"]
    return start_daemon(
        project,
        state_dir=state,
        socket_path=state_socket(state, {"XDG_RUNTIME_DIR": str(runtime)}),
        command=command,
        env={"XDG_RUNTIME_DIR": str(runtime)},
    )


def test_two_projects_two_daemons_each_reached_from_its_own_tree(tmp_path: Path):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "src" / "deep").mkdir(parents=True)
    b.mkdir()
    da = serve_in(a, runtime)
    db = serve_in(b, runtime)  # used to fail: the one per-user socket was taken
    try:
        da.call("agents.create", {"name": "only-in-a"})
        for cwd, daemon in ((a / "src" / "deep", da), (b, db)):
            proc = reynctl_in(cwd, runtime, "--json", "status")
            assert proc.returncode == 0, proc.stderr
            status = json.loads(proc.stdout)
            assert status["state_dir"] == str(daemon.state_dir)
        listed = json.loads(reynctl_in(b, runtime, "--json", "agents", "list").stdout)
        assert listed["agents"] == []

        # Outside any project: the per-user socket (systemd's), and a hint.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        proc = reynctl_in(elsewhere, runtime, "status")
        assert proc.returncode == 3
        assert str(runtime / "reynd" / "reynd.sock") in proc.stderr
        assert "no .reyn directory" in proc.stderr
    finally:
        da.stop()
        db.stop()


def test_state_dir_is_found_upward_and_the_socket_follows_it(tmp_path: Path):
    project = tmp_path / "proj"
    (project / ".reyn").mkdir(parents=True)
    (project / "x" / "y").mkdir(parents=True)
    (tmp_path / "file-not-dir").mkdir()
    (tmp_path / "file-not-dir" / ".reyn").write_text("a file is not a state dir")
    env = {"XDG_RUNTIME_DIR": "/run/user/7"}

    assert find_state_dir(env, project / "x" / "y") == project / ".reyn"
    assert find_state_dir(env, tmp_path / "file-not-dir") is None
    assert find_state_dir({**env, "REYN_STATE_DIR": "/srv/s"}, project) == Path("/srv/s")
    assert resolve_state_dir(None, env, project / "x") == project / ".reyn"
    assert resolve_state_dir(None, env, tmp_path) == tmp_path / ".reyn"  # created there
    assert resolve_state_dir("rel", env, project) == project / "rel"

    sock = state_socket(project / ".reyn", env)
    assert sock.parent == Path("/run/user/7/reynd") and sock.name.startswith("proj-")
    assert sock == state_socket(project / "x" / ".." / ".reyn", env)  # one dir, one socket
    assert sock != state_socket(tmp_path / "other" / ".reyn", env)
    long = tmp_path / ("p" * 200) / ".reyn"
    assert len(bytes(state_socket(long, env))) < 108  # sun_path

    assert find_socket(None, env, cwd=project / "x") == sock
    assert find_socket(None, env, cwd=tmp_path) == Path("/run/user/7/reynd/reynd.sock")

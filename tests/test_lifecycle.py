"""Start-up, shutdown, refusals, socket activation and peer credentials (real processes)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.harness import Daemon, daemon_command, run_daemon_to_exit, start_daemon

STATUS = b'{"jsonrpc":"2.0","method":"daemon.status","id":1}\n'


def test_ready_then_sigterm_exits_0_and_removes_socket(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    assert any("READY=1" in n for n in d.notifications)
    assert "STATUS=" in d.notifications[0]
    assert d.call("daemon.status")["pid"] == d.pid
    assert d.socket.exists()
    d.proc.send_signal(signal.SIGTERM)
    d.wait_notification("STOPPING=1")
    d.stop()
    assert not d.socket.exists()


def test_systemd_status_shows_the_head_and_follows_it(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        ready = d.wait_notification("READY=1")
        assert f"STATUS=serving on {d.socket}; head 0 on branch 0, 0 agents" in ready, ready
        d.call("wal.append", {"agent": "ada", "kind": "agent.created"})
        later = d.wait_notification("STATUS=serving on")
        while "head 1 " not in later:  # each new STATUS= comes as its own datagram
            d.notifications.remove(later)
            later = d.wait_notification("STATUS=serving on")
        assert "head 1 on branch 0, 1 agents" in later, later
    finally:
        d.stop()


def test_sigint_also_shuts_down_cleanly(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    d.stop(signal.SIGINT)
    assert not d.socket.exists()


def test_stop_signals_all_through_the_exit_never_kill_the_daemon(short_tmp: Path) -> None:
    """SIGTERM after SIGTERM until the process is gone: its exit code, never death by signal.

    The last of them land while the interpreter tears down, where Python puts
    the default action back in place of a Python handler.
    """
    d = start_daemon(short_tmp)
    sent = 0
    while d.proc.poll() is None:  # a zombie still takes a signal; poll reaps it
        os.kill(d.proc.pid, signal.SIGTERM)
        sent += 1
    assert sent > 1 and d.stop(expect=None) == 0, d.stderr()


def test_shutdown_method_replies_then_exits_0(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    with d.connect() as c:
        assert c.call("daemon.shutdown") == {"ok": True}
    assert d.wait() == 0, d.stderr()
    assert not d.socket.exists()
    d.stop()


def test_hung_client_does_not_delay_shutdown(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    with d.connect() as hung:
        hung.send(b'{"jsonrpc":"2.0","method":"daemon.sta')
        with d.connect() as sub:
            sub.call("subscribe")
            d.stop()  # asserts exit 0 within the harness timeout
        assert hung.at_eof()


def test_state_reopens_after_sigterm(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    with d.connect() as c:
        # agent.created only: a message would start a turn that keeps appending.
        c.call("wal.append", {"agent": "a", "kind": "agent.created"})
        c.call("wal.append", {"agent": "b", "kind": "agent.created"})
        head = c.call("daemon.status")["head"]
        before = c.call("state.get")
    d.stop()
    again = start_daemon(short_tmp, state_dir=d.state_dir, socket_path=d.socket)
    try:
        with again.connect() as c:
            assert c.call("daemon.status")["head"] == head
            assert c.call("state.get") == before
    finally:
        again.stop()


def test_socket_and_directory_modes(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, socket_path=short_tmp / "fresh" / "dir" / "reynd.sock")
    try:
        assert stat.S_IMODE(d.socket.stat().st_mode) == 0o600
        assert stat.S_ISSOCK(d.socket.stat().st_mode)
        assert stat.S_IMODE(d.socket.parent.stat().st_mode) == 0o700
    finally:
        d.stop()


def test_second_daemon_on_the_same_state_dir_is_refused(daemon: Daemon, short_tmp: Path) -> None:
    other = short_tmp / "other"
    other.mkdir()
    result = run_daemon_to_exit(other, state_dir=daemon.state_dir, socket_path=other / "s.sock")
    assert result.returncode == 1, result.stderr
    assert f"reynd: another daemon (pid {daemon.pid}) holds" in result.stderr
    assert str(daemon.state_dir) in result.stderr
    assert not (other / "s.sock").exists()
    assert daemon.call("daemon.status")["pid"] == daemon.pid


def test_second_daemon_on_the_same_socket_is_refused(daemon: Daemon, short_tmp: Path) -> None:
    other = short_tmp / "other"
    other.mkdir()
    result = run_daemon_to_exit(other, state_dir=other / "state", socket_path=daemon.socket)
    assert result.returncode == 1, result.stderr
    # Which project's daemon holds it, and how to run a second one.
    held = f"another daemon (pid {daemon.pid}, state dir {daemon.state_dir}) listens on"
    assert f"{held} {daemon.socket}" in result.stderr, result.stderr
    assert "--socket PATH" in result.stderr and "REYN_SOCKET" in result.stderr
    assert daemon.socket.exists()  # the live daemon's socket is left alone
    assert daemon.call("daemon.status")["pid"] == daemon.pid


def test_a_relative_state_dir_is_shown_absolute(short_tmp: Path) -> None:
    """`state dir .reyn` in status says nothing about which project's daemon answers."""
    d = start_daemon(short_tmp, state_dir=Path("project") / ".reyn")  # relative to its cwd
    try:
        assert d.call("daemon.status")["state_dir"] == str(short_tmp / "project" / ".reyn")
    finally:
        d.stop()


def test_stale_socket_is_removed(short_tmp: Path) -> None:
    path = short_tmp / "run" / "reynd.sock"
    path.parent.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: what a killed daemon leaves
    d = start_daemon(short_tmp, socket_path=path)
    try:
        assert d.call("daemon.status")["socket"] == str(path)
    finally:
        d.stop()


def test_non_socket_file_at_socket_path_is_left_alone(short_tmp: Path) -> None:
    path = short_tmp / "precious"
    path.write_text("data")
    result = run_daemon_to_exit(short_tmp, state_dir=short_tmp / "state", socket_path=path)
    assert result.returncode == 3, result.stderr
    assert "is not a socket" in result.stderr
    assert path.read_text() == "data"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("bogus = 1\n", "unknown key 'bogus'"),
        ("[storage]\nsegment_bytes = 1\n", "bad value for 'storage.segment_bytes'"),
        ("[storage]\nnope = 1\n", "unknown key 'storage.nope'"),
        ("max_connections = 'many'\n", "bad value for 'max_connections'"),
        ("busy_poll_us = -1\n", "bad value for 'busy_poll_us'"),
        ("max_connections = \n", "not valid TOML"),
        ("allowed_group = 'no-such-group-here'\n", "allowed_group"),
    ],
)
def test_bad_config_exits_2_naming_the_key(short_tmp: Path, text: str, says: str) -> None:
    config = short_tmp / "reynd.toml"
    config.write_text(text)
    result = run_daemon_to_exit(
        short_tmp, state_dir=short_tmp / "state", socket_path=short_tmp / "s", config_path=config
    )
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and str(config) in result.stderr


def test_a_config_that_cannot_be_read_is_a_storage_failure_not_a_bad_config(
    short_tmp: Path,
) -> None:
    """An OSError reading reynd.toml (EIO on a dead disk; here EISDIR, ELOOP) exits 3.

    Exit 2 says "fix the file, restarting will not help"; a file the OS cannot
    give back is no mistake in it (exit 3, with the OS's reason). Not found
    (named by --config) and not TOML stay 2.
    """
    state = short_tmp / "state"
    (state / "reynd.toml").mkdir(parents=True)  # found in the state dir: once taken as absent
    loop = short_tmp / "loop.toml"
    loop.symlink_to(loop)  # named with --config: open() fails with ELOOP
    cases = [(None, state / "reynd.toml", "Is a directory"), (loop, loop, "symbolic links")]
    for config, shown, why in cases:
        result = run_daemon_to_exit(
            short_tmp, state_dir=state, socket_path=short_tmp / "s", config_path=config
        )
        assert result.returncode == 3, result.stderr
        assert f"{shown}: cannot read" in result.stderr and why in result.stderr
        assert "Traceback" not in result.stderr
    missing = short_tmp / "missing.toml"
    result = run_daemon_to_exit(
        short_tmp, state_dir=short_tmp / "other", socket_path=short_tmp / "s", config_path=missing
    )
    assert result.returncode == 2, result.stderr
    assert f"{missing}: cannot read" in result.stderr and "No such file" in result.stderr
    bad = short_tmp / "latin1.toml"
    bad.write_bytes(b"# caf\xe9\n")  # not UTF-8: a configuration error too
    result = run_daemon_to_exit(
        short_tmp, state_dir=short_tmp / "other", socket_path=short_tmp / "s", config_path=bad
    )
    assert result.returncode == 2, result.stderr
    assert f"{bad}: not valid TOML" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(
    not shutil.which("systemd-socket-activate"), reason="needs systemd-socket-activate"
)
def test_socket_activation(short_tmp: Path) -> None:
    path = short_tmp / "activated.sock"
    state = short_tmp / "state"
    cmd = [
        "systemd-socket-activate",
        "-l",
        str(path),
        "-E",
        "NOTIFY_SOCKET",
        *daemon_command(state, short_tmp / "unused" / "reynd.sock"),
    ]
    d = start_daemon(
        short_tmp,
        state_dir=state,
        socket_path=path,
        command=cmd,
        wait_ready=False,
        stderr_marker="Listening on",
    )
    try:
        # systemd-socket-activate binds first and starts the daemon on the first connection.
        with d.connect() as c:
            d.wait_notification("READY=1")
            c.send(STATUS)
            status = c.recv_json()["result"]
        assert status["pid"] == d.pid  # exec'd in place: LISTEN_PID matched
        assert status["socket"] == str(path)
        assert not (short_tmp / "unused").exists()  # --socket ignored when one is inherited
    finally:
        d.stop()
    assert path.exists(), "an inherited socket must not be unlinked"


# -- peer credentials -------------------------------------------------------------

NOBODY_CLIENT = textwrap.dedent(
    """
    import os, socket, sys
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sys.argv[1])
    try:
        s.sendall(b'{"jsonrpc":"2.0","method":"daemon.status","id":1}\\n')
    except BrokenPipeError:
        pass  # refused peers are closed at once: the reply is already queued
    data = b""
    while not data.endswith(b"\\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print(os.getuid(), data.decode().strip())
    """
)


def run_as_nobody(socket_path: Path, extra_groups: Sequence[int] = ()) -> tuple[int, str]:
    """Run a stdlib-only client as nobody:nogroup (with no supplementary groups but these)."""
    result = subprocess.run(
        ["/usr/bin/python3", "-c", NOBODY_CLIENT, str(socket_path)],
        user="nobody",
        group="nogroup",
        extra_groups=list(extra_groups),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr
    uid, _, reply = result.stdout.partition(" ")
    return int(uid), reply


def open_to_everyone(d: Daemon, short_tmp: Path) -> None:
    # File modes are the first barrier; open them so the second (SO_PEERCRED) is what's tested.
    short_tmp.chmod(0o755)
    d.socket.parent.chmod(0o755)
    d.socket.chmod(0o666)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
    reason="needs root (to run a client as another uid) and /usr/bin/python3",
)


@needs_root
def test_peer_with_another_uid_is_refused(daemon: Daemon, short_tmp: Path) -> None:
    open_to_everyone(daemon, short_tmp)
    uid, reply = run_as_nobody(daemon.socket)
    assert uid != os.getuid()
    assert '"code":-32013' in reply and "uid 65534" in reply
    assert daemon.call("daemon.status")["connections"] == 1  # just us


@needs_root
@pytest.mark.parametrize("groups", [1, 300], ids=["one", "more than 256"])
def test_allowed_group_admits_supplementary_members(short_tmp: Path, groups: int) -> None:
    """Membership through a supplementary group counts, however many groups the peer has.

    CPython's getsockopt takes at most 1024 bytes (256 groups): the daemon used
    to ask for 4096, get an error, and read it as "no groups".
    """
    allowed = 42_000
    d = start_daemon(short_tmp, config=f"allowed_group = {allowed}\n")
    try:
        open_to_everyone(d, short_tmp)
        _, reply = run_as_nobody(d.socket, [*range(43_000, 43_000 + groups - 1), allowed])
        assert '"result"' in reply and f'"pid":{d.pid}' in reply, reply
        _, reply = run_as_nobody(d.socket, range(43_000, 43_000 + groups))  # not a member
        assert '"code":-32013' in reply
    finally:
        d.stop()


@needs_root
def test_allowed_group_admits_its_members(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config="allowed_group = 'nogroup'\n")
    try:
        open_to_everyone(d, short_tmp)
        _, reply = run_as_nobody(d.socket)
        assert '"result"' in reply and f'"pid":{d.pid}' in reply
    finally:
        d.stop()

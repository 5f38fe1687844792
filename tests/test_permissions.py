"""Who may read what reynd keeps, and who may serve its socket (real daemons, real uids).

- Every directory reynd creates under the state directory is 0700 and every
  file 0600, under umask 022 and 000 alike; an older, wider state root is
  narrowed at start. Files restored into the workspace keep their recorded
  modes, and the programs a command agent runs keep the daemon's umask.
- The per-user socket directories (`/tmp/reynd-$UID` and its `reynd/`, or
  `$XDG_RUNTIME_DIR/reynd`) are used only when they are ours and private.
  /tmp is shared by the whole machine (and by other test runs): the tests
  point $TMPDIR at their own directory instead.
- reynctl refuses a socket served by another uid unless told to trust it.

Some tests need root (another uid, chown): CI runs them as root.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reynctl.aio import open_client
from reynctl.client import Client
from reynctl.errors import UntrustedDaemon
from reynd.protocol.paths import default_socket, private_socket_dirs, state_socket
from tests.harness import Daemon, daemon_command, start_daemon
from tests.runtime_helpers import create_builtin, send

NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other uids, chown)")


def modes(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under `root` (not following links): relative path -> (kind, permission bits)."""
    out: dict[str, tuple[str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            st = p.lstat()
            kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "?"
            out[p.relative_to(root).as_posix()] = (kind, stat.S_IMODE(st.st_mode))
    return out


# -- files and directories under the state directory ----------------------------------------

CONFIG = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 0
snapshot_ratio = 0.05

[retention]
snapshot_keep = 0
gc_interval_s = 0

[workspace]
enabled = true
path = "{ws}"
"""

# A command agent's program: reports the umask it runs under and writes a user file.
UMASK_PROGRAM = """
import json, os, sys
json.load(sys.stdin)
mask = os.umask(0)
os.umask(mask)
with open("agent-wrote.txt", "w") as f:
    f.write("from the agent")
print(json.dumps({"done": True, "reply": f"umask {mask:03o}"}))
"""


def turn(d: Daemon, agent: str, text: str) -> dict[str, Any]:
    """One turn (its workspace changes are recorded before it is answered)."""
    result: dict[str, Any] = send(d, agent, text)
    assert result["outcome"] == "completed", result
    return result


def drive(d: Daemon, ws: Path, short_tmp: Path) -> dict[str, Any]:
    """Agents, turns, a command agent with an env, rewind, checkout, GC: every kind of file.

    Returns what the user's side looked like on the way: the command
    program's reply and the modes of restored workspace files.
    """
    seen: dict[str, Any] = {}
    (ws / "script.sh").write_text("#!/bin/sh\n")
    (ws / "script.sh").chmod(0o750)
    create_builtin(d, "ada")
    first = turn(d, "ada", "one")["boundary_seq"]
    # Before any restore swaps it for a copy: the database SQLite itself created.
    live = d.state_dir / "state" / "config" / "config.db"
    seen["config.db"] = stat.S_IMODE(live.stat().st_mode)
    (ws / "script.sh").unlink()
    prog = short_tmp / "umask_program.py"
    prog.write_text(UMASK_PROGRAM)
    d.call(
        "agents.create",
        {
            "name": "cmd",
            "executor": "command",
            "options": {
                "argv": [sys.executable, "-S", str(prog)],
                "env": {"API_TOKEN": "secret"},
                "cwd": str(ws),
            },
        },
    )
    seen["reply"] = turn(d, "cmd", "what is your umask")["reply"]
    seen["wrote"] = stat.S_IMODE((ws / "agent-wrote.txt").stat().st_mode)
    for k in range(3):
        turn(d, "ada", f"turn {k}")
    tip = int(d.call("daemon.status")["head"])
    d.call("rewind", {"seq": first})  # restores config.db and the workspace as of `first`
    seen["script"] = stat.S_IMODE((ws / "script.sh").stat().st_mode)
    d.call("checkout", {"seq": tip})
    seen["restored"] = stat.S_IMODE((ws / "agent-wrote.txt").stat().st_mode)
    d.call("rewind", {"seq": first})
    for k in range(12):
        turn(d, "ada", f"after the rewind {k}")
    gc = d.call("retention.gc")
    assert gc["segments_dropped"] > 0, gc
    return seen


NARROWED = "was mode 0755: now 0700 (owner only)"


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_everything_under_the_state_dir_is_private(short_tmp: Path, umask: int) -> None:
    ws = short_tmp / "ws"
    ws.mkdir()
    state_dir = short_tmp / "state"
    state_dir.mkdir()
    state_dir.chmod(0o755)  # as an older reynd left it under umask 022
    d = start_daemon(short_tmp, state_dir=state_dir, config=CONFIG.format(ws=ws), umask=umask)
    try:
        seen = drive(d, ws, short_tmp)
    finally:
        d.stop()
    # The daemon narrowed the root, and said so once.
    assert d.stderr().count(NARROWED) == 1, d.stderr()

    # A torn tail, so that the next start creates wal/torn/.
    segments = sorted((state_dir / "state" / "wal").glob("*.jsonl"))
    with segments[-1].open("ab") as f:
        f.write(b'{"crc":"00000000","len":40,"rec":{"kind":"tu')
    again = start_daemon(short_tmp, state_dir=state_dir, socket_path=d.socket, umask=umask)
    try:
        # Turns until the segment GC left is sealed and a new one opened (the count
        # below), however many bytes a turn's records take.
        for k in range(20):
            turn(again, "ada", f"after the restart {k}")
            if len(list((state_dir / "state" / "wal").glob("*.jsonl"))) >= 2:
                break
    finally:
        again.stop()
    assert "cut torn WAL tail" in again.stderr()
    assert "now 0700" not in again.stderr()  # already private: nothing to say

    found = modes(state_dir)
    found.pop("reynd.toml")  # the user's file, written by the test: not reynd's to change
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    wrong = {
        p: f"{kind} {mode:04o}"
        for p, (kind, mode) in found.items()
        if (kind, mode) not in {("d", 0o700), ("f", 0o600)}
    }
    assert wrong == {}, wrong
    # Everything that should be there is there (so the check above covered it).
    for expected in (
        "state/LOCK",
        "state/retained",
        "state/wal/torn",
        "state/snapshots",
        "state/config/config.db",
        "state/config/index.log",
        "state/config/generations",
        "state/blobs",
        "state/manifests",
        "state/trees",
        "events",
    ):
        assert expected in found, (expected, sorted(found))

    def count(prefix: str, suffix: str = "") -> int:
        return sum(1 for n in found if n.startswith(prefix) and n.endswith(suffix))

    assert count("state/wal/", ".jsonl") >= 2
    assert count("state/wal/torn/") >= 1
    assert count("state/snapshots/", ".snap") >= 1
    assert count("state/config/generations/", ".db") >= 1
    assert count("events/", ".jsonl.gz") >= 1
    assert count("state/blobs/") >= 2 and count("state/manifests/") >= 2

    # The user's side: the command agent's program ran under the daemon's own
    # umask; restored files keep the modes they were recorded with.
    assert seen["reply"] == f"umask {umask:03o}"
    assert seen["wrote"] == seen["restored"] == 0o666 & ~umask
    assert seen["script"] == 0o750
    assert seen["config.db"] == 0o600


# -- the socket directory ---------------------------------------------------------------------


def test_which_socket_directories_are_judged() -> None:
    uid = os.getuid()
    tmp_env = {"TMPDIR": "/var/tmp/me"}
    assert default_socket(tmp_env) == Path(f"/var/tmp/me/reynd-{uid}/reynd/reynd.sock")
    assert default_socket({"TMPDIR": "relative"}) == Path(f"/tmp/reynd-{uid}/reynd/reynd.sock")
    assert private_socket_dirs(default_socket(tmp_env), tmp_env) == (
        Path(f"/var/tmp/me/reynd-{uid}"),
        Path(f"/var/tmp/me/reynd-{uid}/reynd"),
    )
    # /tmp's layout is ours whatever $TMPDIR says (a --socket or config may name it).
    assert len(private_socket_dirs(Path(f"/tmp/reynd-{uid}/reynd/x.sock"), tmp_env)) == 2
    xdg = {"XDG_RUNTIME_DIR": "/run/user/7"}
    assert private_socket_dirs(default_socket(xdg), xdg) == (Path("/run/user/7/reynd"),)
    # Directories of the user's or the system's choosing are not judged.
    assert private_socket_dirs(Path("/run/reynd/reynd.sock"), xdg) == ()
    assert private_socket_dirs(Path("/srv/x/reynd.sock"), xdg) == ()
    assert private_socket_dirs(Path(f"/tmp/reynd-{uid + 1}/reynd/x.sock"), {}) == ()


def fallback_env(tmp: Path) -> dict[str, str]:
    """No XDG_RUNTIME_DIR: the socket goes to $TMPDIR/reynd-$UID/reynd/reynd.sock.

    $TMPDIR keeps the test away from the machine's own /tmp/reynd-$UID.
    """
    return {"XDG_RUNTIME_DIR": "", "TMPDIR": str(tmp)}


def serve_to_exit(short_tmp: Path, env: dict[str, str]) -> tuple[int, str]:
    """`reynd serve` on the default socket, expected to refuse to start: (exit code, stderr).

    A daemon that gets as far as READY=1 is stopped at once (exit 0).
    """
    d = start_daemon(
        short_tmp,
        command=daemon_command(short_tmp / "state", None),
        env=env,
        wait_ready=False,
    )
    with contextlib.suppress(RuntimeError):  # "exited before READY=1"
        d.wait_notification("READY=1")
    return d.stop(expect=None), d.stderr()


def make_unsafe(path: Path, problem: str, elsewhere: Path) -> None:
    """Put at `path` a directory that is wrong in one way only."""
    if problem == "symlink":  # to a directory that would pass
        elsewhere.mkdir(mode=0o700)
        path.symlink_to(elsewhere)
    elif problem == "other_owner":
        path.mkdir(mode=0o700)
        os.chown(path, NOBODY, NOBODY)
    else:  # group and other may enter
        path.mkdir()
        path.chmod(0o755)


SAYS = {
    "symlink": "it is a symbolic link (to {elsewhere}) (owner {me}, mode 0777)",
    "other_owner": "it belongs to another user, uid 65534 (nobody) (owner uid 65534 (nobody)",
    "mode": "group or other users have access to it (owner {me}, mode 0755); ",
}


@pytest.mark.parametrize("problem", ["symlink", "other_owner", "mode"])
@pytest.mark.parametrize("where", ["tmp", "tmp_inner", "xdg"])
def test_unsafe_socket_directory_is_refused(short_tmp: Path, where: str, problem: str) -> None:
    if problem == "other_owner" and os.geteuid() != 0:
        pytest.skip("needs root (chown)")
    me = f"uid {os.geteuid()} ({pwd.getpwuid(os.geteuid()).pw_name})"
    if where == "xdg":
        runtime = short_tmp / "xdg"
        runtime.mkdir(mode=0o700)
        bad = runtime / "reynd"
        env = {"XDG_RUNTIME_DIR": str(runtime)}
    else:
        env = fallback_env(short_tmp)
        base = short_tmp / f"reynd-{os.getuid()}"
        bad = base
        if where == "tmp_inner":
            base.mkdir(mode=0o700)
            bad = base / "reynd"
    elsewhere = short_tmp / "elsewhere"
    make_unsafe(bad, problem, elsewhere)
    code, stderr = serve_to_exit(short_tmp, env)
    assert code == 2, stderr
    assert f"reynd: refusing to use {bad} for the socket: " in stderr
    assert SAYS[problem].format(elsewhere=elsewhere, me=me) in stderr, stderr
    assert f"it must be a directory owned by {me} with mode 0700" in stderr
    assert "or choose another place with --socket or $XDG_RUNTIME_DIR" in stderr
    assert not list(short_tmp.rglob("reynd.sock"))


def test_fallback_socket_directory_is_created_private_then_reused(short_tmp: Path) -> None:
    env = fallback_env(short_tmp)
    base = short_tmp / f"reynd-{os.getuid()}"
    sock = state_socket(short_tmp / "state", env)
    assert sock.parent == base / "reynd"
    command = daemon_command(short_tmp / "state", None)  # no --socket: the default
    for existing in (False, True):  # made by the daemon (under umask 0), then found and used
        assert base.exists() == existing
        d = start_daemon(short_tmp, socket_path=sock, command=command, env=env, umask=0)
        try:
            assert d.call("daemon.status")["socket"] == str(sock)
            for directory in (base, base / "reynd"):
                st = directory.lstat()
                assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
                assert stat.S_IMODE(st.st_mode) == 0o700, directory
            # reynctl finds it the same way, from the state dir.
            client = reynctl("status", "--json", env={**env, "REYN_STATE_DIR": str(d.state_dir)})
            assert client.returncode == 0, client.stderr
        finally:
            d.stop()


def test_safe_existing_xdg_socket_directory_is_used(short_tmp: Path) -> None:
    runtime = short_tmp / "xdg"
    (runtime / "reynd").mkdir(parents=True, mode=0o700)
    sock = state_socket(short_tmp / "state", {"XDG_RUNTIME_DIR": str(runtime)})
    command = daemon_command(short_tmp / "state", None)
    d = start_daemon(
        short_tmp, socket_path=sock, command=command, env={"XDG_RUNTIME_DIR": str(runtime)}
    )
    try:
        assert d.call("daemon.status")["socket"] == str(sock)
    finally:
        d.stop()


# -- reynctl checks who serves the socket -----------------------------------------------------


def reynctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real reynctl, with none of the runner's reynd variables."""
    scrub = ("REYN_SOCKET", "REYN_CONFIG", "REYN_STATE_DIR", "REYN_DAEMON_UID", "NO_COLOR")
    base = {k: v for k, v in os.environ.items() if k not in scrub}
    return subprocess.run(
        [sys.executable, "-m", "reynctl", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**base, **(env or {})},
        timeout=60,
        check=False,
    )


# A stdlib-only JSON-RPC server run as nobody: it calls listen() on the socket
# it is handed, so SO_PEERCRED names nobody (the credentials are the listener's).
FOREIGN_SERVER = textwrap.dedent(
    """
    import json, os, socket, sys
    server = socket.socket(fileno=int(sys.argv[1]))
    server.listen()
    print(os.getuid(), flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            data = b""
            while not data.endswith(b"\\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            if data:
                rid = json.loads(data)["id"]
                answer = {"jsonrpc": "2.0", "id": rid, "result": {"served_by": os.getuid()}}
                conn.sendall(json.dumps(answer).encode() + b"\\n")
    """
)

needs_other_uid = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
    reason="needs root (to serve as another uid) and /usr/bin/python3",
)


@pytest.fixture
def foreign_socket(short_tmp: Path) -> Iterator[Path]:
    """A socket served by uid 65534 (nobody), not by us."""
    path = short_tmp / "foreign.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    with sock:
        proc = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-c", FOREIGN_SERVER, str(sock.fileno())],
            pass_fds=[sock.fileno()],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == str(NOBODY)  # listening
        yield path
    finally:
        proc.kill()
        proc.wait()


UNTRUSTED = (
    "refusing the daemon at {path}: it is served by uid 65534 (nobody), not by root (you); "
    "if you trust it, pass --daemon-uid nobody or set REYN_DAEMON_UID=nobody"
)


@needs_other_uid
def test_reynctl_refuses_a_daemon_of_another_uid(foreign_socket: Path) -> None:
    refused = reynctl("--socket", str(foreign_socket), "discover")
    assert refused.returncode == 4, refused.stderr
    assert refused.stdout == ""
    assert UNTRUSTED.format(path=foreign_socket) in refused.stderr
    assert "(untrusted_daemon)" in refused.stderr

    as_json = reynctl("--socket", str(foreign_socket), "--json", "discover")
    assert as_json.returncode == 4
    error = json.loads(as_json.stderr)["error"]
    assert error["name"] == "untrusted_daemon" and error["code"] == -33005

    for how, env in (
        (["--daemon-uid", "nobody"], None),
        (["--daemon-uid", str(NOBODY)], None),
        ([], {"REYN_DAEMON_UID": "nobody"}),
    ):
        ok = reynctl("--socket", str(foreign_socket), *how, "--json", "discover", env=env)
        assert ok.returncode == 0, (how, env, ok.stderr)
        assert json.loads(ok.stdout) == {"served_by": NOBODY}

    # Another uid trusted does not make nobody trusted; a name that is no user is a usage error.
    other = reynctl("--socket", str(foreign_socket), "--daemon-uid", "1", "discover")
    assert other.returncode == 4, other.stderr
    bad = reynctl("--socket", str(foreign_socket), "--daemon-uid", "no-such-user-x", "discover")
    assert bad.returncode == 2
    assert "'no-such-user-x' is neither a uid nor a known user name" in bad.stderr


@needs_other_uid
def test_both_clients_check_the_daemon_uid(foreign_socket: Path) -> None:
    with pytest.raises(UntrustedDaemon) as info:
        Client(foreign_socket)
    assert info.value.uid == NOBODY
    assert info.value.message == UNTRUSTED.format(path=foreign_socket)
    with Client(foreign_socket, daemon_uid=NOBODY) as c:
        assert c.discover() == {"served_by": NOBODY}

    async def attach(daemon_uid: int | None) -> Any:
        client = await open_client(foreign_socket, daemon_uid=daemon_uid)
        try:
            return await client.discover()
        finally:
            await client.close()

    with pytest.raises(UntrustedDaemon):
        asyncio.run(attach(None))
    assert asyncio.run(attach(NOBODY)) == {"served_by": NOBODY}


ROOT_CLIENT = textwrap.dedent(
    """
    import sys
    from reynctl.client import Client
    from reynctl.errors import UntrustedDaemon
    from reynd.protocol.errors import PermissionDenied
    try:
        Client(sys.argv[1]).status()
    except UntrustedDaemon:
        print("untrusted")
    except PermissionDenied:
        print("trusted, then refused by the daemon")
    """
)


@needs_root
def test_a_daemon_served_by_root_is_trusted(daemon: Daemon, short_tmp: Path) -> None:
    # A client running as nobody trusts root's daemon (and the daemon, whose
    # own check is by uid, then turns it away: that is its business).
    short_tmp.chmod(0o755)
    daemon.socket.parent.chmod(0o755)
    daemon.socket.chmod(0o666)
    repo = Path(__file__).resolve().parent.parent
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PYTHONPATH": os.pathsep.join([str(repo), *site])}

    def as_nobody(code: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/usr/bin/python3", "-c", code, *args],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",
        )

    if as_nobody("import reynctl.client").returncode != 0:
        pytest.skip("reynctl's dependencies are not importable by nobody with /usr/bin/python3")
    result = as_nobody(ROOT_CLIENT, str(daemon.socket))
    assert result.stdout.strip() == "trusted, then refused by the daemon", result.stderr

"""reynctl end to end: the real `reynctl` process against the real daemon.

Parsing-only behaviour (usage errors, the colour rule) uses click's CliRunner;
everything that talks to a daemon runs `python -m reynctl` as a subprocess
against `reynd serve` started by tests/harness.py.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from reynctl.cli import cli, use_color
from reynctl.client import Client
from reynd.protocol import methods as m
from tests.harness import Daemon, start_daemon

TIMEOUT = 60


def reynctl(
    *args: str,
    sock: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Run the real reynctl; stdin is not a terminal."""
    cmd = [sys.executable, "-m", "reynctl"]
    if sock is not None:
        cmd += ["--socket", str(sock)]
    return subprocess.run(
        [*cmd, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_env(env),
        timeout=timeout,
        check=False,
    )


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    scrub = ("REYN_SOCKET", "REYN_CONFIG", "REYN_STATE_DIR", "NO_COLOR", "NOTIFY_SOCKET")
    env = {k: v for k, v in os.environ.items() if k not in scrub}
    return {**env, **(extra or {})}


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    return proc.stdout


def seed(sock: Path, turns: int = 3) -> list[int]:
    """Agent ada and `turns` turns written through the client; the seqs of turn.ended."""
    ends: list[int] = []
    with Client(sock) as c:

        def add(kind: str, **data: Any) -> int:
            return c.append(agent="ada", kind=kind, data=data).seq

        add("agent.created")
        for n in range(1, turns + 1):
            add("message.received", message_id=f"m{n}", text=f"question {n}")
            add("turn.started", turn_id=f"t{n}", message_id=f"m{n}")
            add("step.started", turn_id=f"t{n}", step=1)
            add(
                "step.committed",
                turn_id=f"t{n}",
                step=1,
                messages=[{"role": "assistant", "content": f"answer {n}"}],
            )
            ends.append(add("turn.ended", turn_id=f"t{n}", reply=f"answer {n}"))
    return ends


# -- parsing only (CliRunner) -------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["frobnicate"],
        ["--color", "purple", "status"],
        ["rewind", "-1"],
        ["rewind", "five!"],
        ["generations", "--kind", "epoch"],
        ["generations", "--limit", "0"],
        ["diff", "3"],
        ["append", "ada", "message.received", "--data", "{not json"],
        ["append", "ada", "message.received", "--data", "[1, 2]"],
    ],
)
def test_usage_errors_exit_2(args: list[str], tmp_path: Path):
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "none.sock"), *args])
    assert result.exit_code == 2, result.output


def test_checkout_without_yes_off_a_terminal_exits_2_before_connecting(tmp_path: Path):
    # CliRunner's stdin is not a terminal; the socket does not even exist.
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "none.sock"), "checkout", "3"])
    assert result.exit_code == 2
    assert "--yes" in result.output


def test_every_command_is_listed_in_help():
    out = CliRunner().invoke(cli, ["--help"]).output
    for name in (
        "status",
        "generations",
        "rewind",
        "checkout",
        "branches",
        "show",
        "diff",
        "watch",
        "append",
        "discover",
        "shutdown",
        "demo",
        "agents",
        "send",
        "cancel",
        "resolve",
        "interventions",
        "answer",
        "act-turn-rewind",
    ):
        assert f"  {name}" in out


class _Tty:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_colour_rule():
    assert use_color("auto", _Tty(True), {}) is True
    assert use_color("auto", _Tty(False), {}) is False
    assert use_color("auto", _Tty(True), {"NO_COLOR": "1"}) is False
    assert use_color("auto", _Tty(True), {"TERM": "dumb"}) is False
    assert use_color("always", _Tty(False), {"NO_COLOR": "1"}) is True
    assert use_color("never", _Tty(True), {}) is False


# -- cannot reach the daemon: exit 3 -------------------------------------------------


def test_no_daemon_exits_3_and_says_how_to_start_it(tmp_path: Path):
    proc = reynctl("status", sock=tmp_path / "absent.sock")
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert "no daemon at" in proc.stderr and "reynd serve" in proc.stderr


def test_no_daemon_with_json_reports_a_json_error(tmp_path: Path):
    proc = reynctl("--json", "branches", sock=tmp_path / "absent.sock")
    assert proc.returncode == 3
    err = json.loads(proc.stderr)["error"]
    assert err["name"] == "no_daemon" and err["code"] == -33002


def test_default_socket_comes_from_the_environment(tmp_path: Path):
    proc = reynctl("status", env={"REYN_SOCKET": str(tmp_path / "env.sock")})
    assert proc.returncode == 3 and "env.sock" in proc.stderr


def test_stale_socket_exits_3(tmp_path: Path):
    path = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    proc = reynctl("status", sock=path)
    assert proc.returncode == 3 and "stale" in proc.stderr


def test_a_refused_peer_exits_3_with_the_daemons_reason(tmp_path: Path):
    # What the daemon does to a peer it does not admit: an error with a null id, then EOF.
    path = tmp_path / "refusing.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def refuse() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32013,'
                b'"message":"uid 65534 may not connect","data":{}}}\n'
            )

    t = threading.Thread(target=refuse, daemon=True)
    t.start()
    try:
        proc = reynctl("status", sock=path)
    finally:
        t.join(10)
        srv.close()
    assert proc.returncode == 3
    assert "uid 65534 may not connect (permission_denied, -32013)" in proc.stderr


# -- against the real daemon -------------------------------------------------------------


def test_status(daemon: Daemon):
    out = ok(reynctl("status", sock=daemon.socket))
    assert f"pid {daemon.pid}" in out and "head" in out
    raw = ok(reynctl("--json", "status", sock=daemon.socket))
    st = msgspec.json.decode(raw, type=m.StatusResult)
    assert st.pid == daemon.pid and st.protocol == m.PROTOCOL_VERSION
    # --json after the subcommand means the same.
    assert json.loads(ok(reynctl("status", "--json", sock=daemon.socket)))["pid"] == daemon.pid


def test_json_output_is_exactly_the_result(daemon: Daemon):
    seed(daemon.socket)
    for args, method, params in [
        (["branches"], "branches.list", None),
        (["generations", "--limit", "2"], "generations.list", {"limit": 2}),
        (["show", "6", "--agent", "ada"], "state.get", {"seq": 6, "agent": "ada"}),
        # reynctl diff asks for the files and the JSON Patch too (issue 27).
        (
            ["diff", "6", "11"],
            "state.diff",
            {"from_seq": 6, "to_seq": 11, "files": True, "patch": True},
        ),
    ]:
        printed = json.loads(ok(reynctl("--json", *args, sock=daemon.socket)))
        assert printed == daemon.call(method, params), args


def test_generations_table_and_paging(daemon: Daemon):
    ends = seed(daemon.socket)
    proc = reynctl("generations", "--limit", "2", sock=daemon.socket)
    lines = ok(proc).splitlines()
    assert lines[0].split()[:3] == ["SEQ", "KIND", "AGENT"]
    assert [int(line.split()[0]) for line in lines[1:]] == [ends[2], ends[1]]
    assert "--cursor" in proc.stderr  # the hint for the next page goes to stderr
    page = json.loads(ok(reynctl("--json", "generations", "--limit", "2", sock=daemon.socket)))
    rest = json.loads(
        ok(
            reynctl(
                "--json", "generations", "--cursor", str(page["next_cursor"]), sock=daemon.socket
            )
        )
    )
    assert [g["seq"] for g in rest["generations"]] == [ends[0]]


def test_rewind_checkout_branches_show(daemon: Daemon):
    ends = seed(daemon.socket)
    rewound = json.loads(ok(reynctl("--json", "rewind", str(ends[1]), "-y", sock=daemon.socket)))
    assert rewound["mode"] == "undo" and rewound["target"] == ends[1]

    # ends[2] now lies on an abandoned branch: rewind refuses and names checkout.
    proc = reynctl("rewind", str(ends[2]), "--yes", sock=daemon.socket)
    assert proc.returncode == 1, proc.stderr
    assert "not_active" in proc.stderr and "-32001" in proc.stderr and proc.stdout == ""

    proc = reynctl("checkout", str(ends[2]), sock=daemon.socket)
    assert proc.returncode == 2 and "--yes" in proc.stderr

    out = ok(reynctl("checkout", "--yes", str(ends[2]), sock=daemon.socket))
    assert out.startswith(f"switched to the abandoned branch at seq {ends[2]}")

    tree = ok(reynctl("branches", sock=daemon.socket)).splitlines()
    assert tree[0].split() == ["BRANCH", "FORKED", "AT", "SEQS"]
    current = [line for line in tree if "* current" in line]
    assert len(current) == 1 and current[0].startswith("└─ ")
    assert any(line.startswith("├─ ") for line in tree)

    shown = ok(reynctl("show", sock=daemon.socket))
    assert "agent ada" in shown and "answer 3" in shown
    past = ok(reynctl("show", str(ends[0]), sock=daemon.socket))
    assert "answer 1" in past and "answer 2" not in past


def test_daemon_errors_exit_1_with_name_and_code(daemon: Daemon):
    proc = reynctl("show", "999", sock=daemon.socket)
    assert proc.returncode == 1 and "(seq_out_of_range, -32002)" in proc.stderr
    proc = reynctl("--json", "show", "999", sock=daemon.socket)
    assert proc.returncode == 1 and proc.stdout == ""
    assert json.loads(proc.stderr)["error"]["code"] == -32002


def test_append_and_fencing(daemon: Daemon):
    ok(reynctl("append", "bo", "agent.created", sock=daemon.socket))
    res = json.loads(
        ok(
            reynctl(
                "--json",
                "append",
                "bo",
                "message.received",
                "--data",
                '{"message_id": "m1", "text": "hi"}',
                sock=daemon.socket,
            )
        )
    )
    assert res == {"seq": 2, "branch": 0}
    ok(reynctl("rewind", "1", "--yes", sock=daemon.socket))
    proc = reynctl(
        "append",
        "bo",
        "message.received",
        "--based-on",
        "2",
        "--data",
        '{"message_id": "m2", "text": "late"}',
        sock=daemon.socket,
    )
    assert proc.returncode == 1 and "stale_branch" in proc.stderr


def test_discover_prints_the_openrpc_document(daemon: Daemon):
    doc = json.loads(ok(reynctl("discover", sock=daemon.socket)))
    assert "openrpc" in doc
    names = {method["name"] for method in doc["methods"]}
    assert {"daemon.status", "rewind", "checkout", "state.get"} <= names


def test_shutdown_stops_the_daemon(daemon: Daemon):
    ok(reynctl("shutdown", sock=daemon.socket))
    assert daemon.wait() == 0
    proc = reynctl("status", sock=daemon.socket)
    assert proc.returncode == 3


# -- watch ----------------------------------------------------------------------------------


class Lines:
    """Read a child's stdout line by line, each wait bounded by a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = b""

    def next(self, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(remaining, 0))
            assert ready, f"no line within {timeout}s (have {self.buf!r})"
            chunk = os.read(self.fd, 65536)
            assert chunk, "watch exited"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        obj: dict[str, Any] = json.loads(line)
        return obj


def _watch(sock: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "reynctl", "--socket", str(sock), "--json", "watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=_env(),
    )


def _stop(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    return proc.returncode, err.decode()


def test_watch_streams_state_then_changes_tagged_with_seqs(daemon: Daemon):
    ends = seed(daemon.socket, turns=1)
    proc = _watch(daemon.socket)
    try:
        lines = Lines(proc)
        first = lines.next()
        assert first["type"] == "state" and first["reason"] == "initial"
        assert first["state"]["seq"] == ends[0] and "ada" in first["state"]["agents"]
        with Client(daemon.socket) as c:
            seq = c.append(
                agent="ada", kind="message.received", data={"message_id": "m9", "text": "hi"}
            ).seq
            reset = c.rewind(seq=ends[0]).reset_seq
        got = [lines.next() for _ in range(3)]
        assert [(n["topic"], n["seq"]) for n in got] == [
            ("records", seq),
            ("records", reset),
            ("rewinds", reset),
        ]
        assert got[0]["data"]["kind"] == "message.received"
        assert all(n["type"] == "notify" for n in got)
    finally:
        code, err = _stop(proc)
    assert code == 130, err


def test_watch_resyncs_after_being_dropped_as_lagged(short_tmp: Path):
    d = start_daemon(short_tmp, config="subscriber_queue = 2\n")
    proc = _watch(d.socket, "--topic", "records")
    try:
        lines = Lines(proc)
        assert lines.next()["reason"] == "initial"
        proc.send_signal(signal.SIGSTOP)  # a stuck frontend: reads nothing meanwhile
        with d.connect() as writer:
            writer.call("wal.append", {"agent": "a", "kind": "agent.created"})
            for batch in range(40):  # pipelined, so the daemon commits them in groups
                writer.send(
                    b"".join(
                        json.dumps(
                            {
                                "jsonrpc": "2.0",
                                "id": i,
                                "method": "wal.append",
                                "params": {
                                    "agent": "a",
                                    "kind": "message.received",
                                    "data": {"message_id": f"m{batch}-{i}", "text": "x" * 200},
                                },
                            }
                        ).encode()
                        + b"\n"
                        for i in range(50)
                    )
                )
                for _ in range(50):
                    writer.recv_json()
            head = writer.call("daemon.status")["head"]
        proc.send_signal(signal.SIGCONT)
        while (line := lines.next())["type"] != "state":
            assert line["type"] == "notify"
        assert line["reason"] == "lagged"
        assert line["state"]["seq"] == head  # a fresh subscription and a fresh state
    finally:
        proc.send_signal(signal.SIGCONT)
        _stop(proc)
        d.stop()


# -- demo ---------------------------------------------------------------------------------


def test_demo_exits_0_and_shows_the_mechanism(tmp_path: Path):
    started = time.monotonic()
    proc = reynctl("--color", "never", "demo", env={"TMPDIR": "/tmp"}, timeout=120)
    elapsed = time.monotonic() - started
    out = ok(proc)
    for needle in (
        "Creating agent ada with the builtin executor",
        "[builtin demo executor",  # real turns, run by the daemon's builtin executor
        "plan_step",
        "phase",
        "Rewind to seq 28, the end of the plan turn",
        "stale_branch",
        "accepted at seq",
        "Add a day trip to Nara instead.",
        "Act-turn rewind to seq 22, inside the plan turn",
        "ghost-replayed  3 steps",
        "re-run          2 steps",
        "executor calls went 16 → 18 (+2)",
        "[mode fork_switch]",
        "* current",
        "Two futures compared",
        "stopped (exit status 0)",
    ):
        assert needle in out, needle
    assert elapsed < 10, f"the demo took {elapsed:.1f}s"


def test_demo_json_prints_one_result_per_line(tmp_path: Path):
    proc = reynctl("--json", "demo", "--keep", env={"TMPDIR": "/tmp"}, timeout=120)
    lines = [json.loads(line) for line in ok(proc).splitlines()]
    methods = [line["method"] for line in lines]
    assert methods[0] == "daemon.status" and methods[-1] == "daemon.shutdown"
    for method in ("agents.create", "agents.send", "rewind", "act_turn.rewind", "checkout"):
        assert method in methods, method
    kept = proc.stderr.rsplit("state directory kept: ", 1)[1].strip()
    assert (Path(kept) / "state").is_dir()
    by_method = {line["method"]: line["result"] for line in lines}
    assert by_method["checkout"]["mode"] == "fork_switch"
    act = by_method["act_turn.rewind"]
    assert act["ghost_replayed"] == 3 and act["rerun"] == 2
    sends = [line["result"] for line in lines if line["method"] == "agents.send"]
    assert len(sends) == 4 and all(s["outcome"] == "completed" for s in sends)
    # The narration went to stderr.
    assert "Act-turn rewind" in proc.stderr


# -- shell completion (click's built-in mechanism) -----------------------------------------


def _completion(variables: dict[str, str]) -> str:
    """What click's completion machinery prints for `reynctl` with these variables set."""
    return subprocess.run(
        [sys.executable, "-m", "reynctl"],
        capture_output=True,
        text=True,
        env=_env(variables),
        timeout=TIMEOUT,
        check=True,
    ).stdout


def _complete(words: str) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    out = _completion(
        {"_REYNCTL_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    )
    return [line.split(",", 1)[1] for line in out.splitlines() if line]


def test_completion_script_and_commands():
    script = _completion({"_REYNCTL_COMPLETE": "bash_source"})
    assert "_reynctl_completion" in script
    assert _complete("reynctl gen") == ["generations"]


def test_seq_completion_offers_the_daemons_checkpoints(daemon: Daemon):
    ends = seed(daemon.socket)
    got = _complete(f"reynctl --socket {daemon.socket} rewind ")
    assert sorted(int(s) for s in got) == sorted(ends)
    assert _complete(f"reynctl --socket {daemon.socket.parent / 'none'} rewind ") == []


def _on_a_terminal(sock: Path, answer: bytes, *args: str) -> subprocess.CompletedProcess[str]:
    """Run reynctl with a pseudo-terminal as stdin, the answer already typed."""
    master, slave = os.openpty()
    try:
        os.write(master, answer)  # the tty buffers it until the prompt reads
        return subprocess.run(
            [sys.executable, "-m", "reynctl", "--socket", str(sock), *args],
            stdin=slave,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=TIMEOUT,
            check=False,
        )
    finally:
        os.close(slave)
        os.close(master)


def test_checkout_asks_on_a_terminal(daemon: Daemon):
    ends = seed(daemon.socket)
    head = daemon.call("daemon.status")["head"]
    declined = _on_a_terminal(daemon.socket, b"n\n", "checkout", str(ends[0]))
    assert declined.returncode == 1
    assert f"checkout seq {ends[0]}" in declined.stderr and "nothing changed" in declined.stderr
    assert f"reynctl checkout {head}" in declined.stderr  # names the way back
    assert daemon.call("daemon.status")["head"] == head
    accepted = _on_a_terminal(daemon.socket, b"y\n", "checkout", str(ends[0]))
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.startswith(f"rewound to seq {ends[0]}")
    assert daemon.call("daemon.status")["head"] == head + 1

"""`reynctl bisect` and the cross-substrate diff against the real daemon (issue 27).

An agent on the `command` executor (tests/runtime_program.py, which logs every call
it gets) runs 64 turns; before turn i the test writes `status.txt` ("broken" from turn
K on) and, at a few turns, a `flaky` file that makes the check exit 125 (skip). The
workspace records the files at each turn's checkpoint. Then:

- `bisect run` finds turn K's checkpoint in at most 7 steps (ceil(log2 64) plus the
  one skip it meets), the check sees the files and the state as of each seq tested
  (REYN_SEQ, REYN_STATE), and nothing moves: the head, the tip's branch and the
  executor's call count are what they were, and no checkout is left behind;
- after a checkout to an early turn, the same search runs on the abandoned branch;
- `branches diff` lists exactly the messages and files that differ between two
  branch tips, and its JSON Patch, applied by another RFC 6902 implementation,
  turns the one state into the other;
- the interactive form keeps its progress across reynctl runs and a daemon SIGKILL
  and restart, and ends where `run` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from reynctl.bisect.progress import path_for
from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import create_program, kill_daemon, send
from tests.test_reynctl_cli import ok, reynctl

TURNS = 64
BAD_FROM = 41  # status.txt says "broken" from this turn on
FLAKY = {12, 32, 36, 44}  # turns whose check cannot tell (exit 125)

# The check a user would write: 125 (skip) when `flaky` is there, 1 when broken. It
# stops the bisect (exit 200) if REYN_STATE is not the state as of REYN_SEQ.
CHECK = """
import json, os, sys
state = json.load(open(os.environ["REYN_STATE"]))
if state["seq"] != int(os.environ["REYN_SEQ"]) or "ada" not in state["agents"]:
    sys.exit(200)
if os.path.exists("flaky"):
    sys.exit(125)
status = open("status.txt").read() if os.path.exists("status.txt") else "ok"
sys.exit(0 if status == "ok" else 1)
"""


def turn(d: Daemon, ws: Path, i: int) -> None:
    (ws / "status.txt").write_text("ok" if i < BAD_FROM else "broken")
    if i in FLAKY:
        (ws / "flaky").write_text("")
    else:
        (ws / "flaky").unlink(missing_ok=True)
    (ws / "blob.bin").write_bytes(bytes([0, i, 255]))  # a binary file, changed every turn
    send(d, "ada", f"turn{i}")


def turn_seqs(d: Daemon, lineage: int | None = None) -> list[int]:
    params: dict[str, Any] = {"agent": "ada", "kind": "turn", "limit": 1000}
    if lineage is not None:
        params["lineage"] = lineage
    return sorted(g["seq"] for g in d.call("generations.list", params)["generations"])


def calls(prog: Path) -> int:
    return len((prog / "requests.jsonl").read_text().splitlines())


@pytest.fixture
def run64(short_tmp: Path) -> Iterator[tuple[Daemon, Path, Path, int, list[int]]]:
    """(daemon, workspace, program dir, the seq before turn 1, the 64 turns' seqs)."""
    ws = short_tmp / "ws"
    ws.mkdir()
    d = start_daemon(short_tmp, config=workspace_config(ws))
    prog = short_tmp / "prog"
    create_program(d, "ada", prog)
    before = d.call("daemon.status")["head"]
    for i in range(1, TURNS + 1):
        turn(d, ws, i)
    seqs = turn_seqs(d)
    assert len(seqs) == TURNS
    yield d, ws, prog, before, seqs
    if d.proc.poll() is None:  # the restart test stops its own daemon
        d.stop()


def bisect_env(short_tmp: Path) -> dict[str, str]:
    tmp = short_tmp / "tmp"
    tmp.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp), "XDG_STATE_HOME": str(short_tmp / "xdg")}


def test_bisect_run_finds_the_first_bad_turn_with_no_call_and_no_append(
    run64: tuple[Daemon, Path, Path, int, list[int]], short_tmp: Path
) -> None:
    d, _, prog, good, seqs = run64
    status = d.call("daemon.status")
    made = calls(prog)
    env = bisect_env(short_tmp)
    args = ["bisect", "run", "--good", str(good), "--bad", str(seqs[-1]), "--json", "--"]
    out = json.loads(ok(reynctl(*args, sys.executable, "-c", CHECK, sock=d.socket, env=env)))

    assert out["first_bad"] == seqs[BAD_FROM - 1]
    assert out["last_good"] == seqs[BAD_FROM - 2]
    assert out["candidates"] == TURNS
    skipped = sum(s["verdict"] == "skip" for s in out["steps"])
    assert skipped >= 1 and len(out["steps"]) <= 7
    assert out["checkpoint"]["agent"] == "ada" and out["checkpoint"]["kind"] == "turn"
    assert out["message"] == f"turn{BAD_FROM}" and out["turn"] == BAD_FROM
    files = {f["path"]: f for f in out["diff"]["files"]}
    patch = files["status.txt"]["patch"].splitlines()
    assert [ln for ln in patch if ln[:1] in "+-"] == [
        "--- a/status.txt",
        "+++ b/status.txt",
        "-ok",
        "+broken",
    ]
    assert patch[-1] == "\\ No newline at end of file"
    assert files["blob.bin"]["binary"] and files["blob.bin"]["patch"] is None
    # Nothing moved, nothing ran, nothing is left.
    assert d.call("daemon.status")["head"] == status["head"]
    assert d.call("daemon.status")["branch"] == status["branch"]
    assert calls(prog) == made == TURNS
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_bisect_on_an_abandoned_branch(
    run64: tuple[Daemon, Path, Path, int, list[int]], short_tmp: Path
) -> None:
    d, ws, _, good, seqs = run64
    ok(reynctl("checkout", str(seqs[9]), "--yes", sock=d.socket))
    turn(d, ws, 99)  # the new branch turns bad at once: a search there would differ
    assert turn_seqs(d)[-1] > seqs[-1]
    head = d.call("daemon.status")["head"]
    abandoned = turn_seqs(d, lineage=seqs[-1])
    assert abandoned == seqs
    env = bisect_env(short_tmp)
    args = ["bisect", "run", "--good", str(good), "--bad", str(seqs[-1]), "--agent", "ada"]
    args += ["--json", "--"]
    out = json.loads(ok(reynctl(*args, sys.executable, "-c", CHECK, sock=d.socket, env=env)))
    assert out["first_bad"] == seqs[BAD_FROM - 1]
    assert d.call("daemon.status")["head"] == head
    # A good seq that is not below the bad one on its lineage: refused, saying why.
    new_tip = turn_seqs(d)[-1]
    bad = reynctl(
        *args[:2],
        "--good",
        str(new_tip),
        "--bad",
        str(seqs[-1]),
        "--",
        "true",
        sock=d.socket,
        env=env,
    )
    assert bad.returncode == 2 and "not below seq" in bad.stderr
    # A command that cannot start, or one that says stop: exit 1 saying why, nothing left.
    good_bad = ["--good", str(good), "--bad", str(seqs[-1]), "--"]
    missing = reynctl(*args[:2], *good_bad, "/nonexistent/check", sock=d.socket, env=env)
    assert missing.returncode == 1 and "cannot run '/nonexistent/check'" in missing.stderr
    stop = reynctl(*args[:2], *good_bad, "sh", "-c", "exit 200", sock=d.socket, env=env)
    assert stop.returncode == 1 and "exited 200: 128 and above" in stop.stderr
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_branches_diff_lists_exactly_what_differs(
    run64: tuple[Daemon, Path, Path, int, list[int]],
) -> None:
    d, ws, _, _, seqs = run64
    old = d.call("daemon.status")["branch"]
    ok(reynctl("checkout", str(seqs[59]), "--yes", sock=d.socket))  # before turns 61..64
    (ws / "new.txt").write_text("only on the new branch\n")
    send(d, "ada", "other")
    new = d.call("daemon.status")["branch"]
    out = json.loads(ok(reynctl("branches", "diff", str(old), str(new), "--json", sock=d.socket)))
    assert out["fork"] == seqs[59]
    conv = out["conversations"]["ada"]
    user_removed = [m["content"] for m in conv["removed"] if m["role"] == "user"]
    assert user_removed == ["turn61", "turn62", "turn63", "turn64"]
    assert [m["content"] for m in conv["added"] if m["role"] == "user"] == ["other"]
    # turn 60 left status broken, flaky absent, blob [0,60,255]; turn 64 the same but blob.
    assert {(f["path"], f["op"]) for f in out["files"]} == {
        ("blob.bin", "change"),
        ("new.txt", "add"),
    }
    before = d.call("state.get", {"seq": out["from_seq"]})["agents"]
    after = d.call("state.get", {"seq": out["to_seq"]})["agents"]
    assert jsonpatch.apply_patch(before, out["patch"]) == after
    human = ok(reynctl("branches", "diff", str(old), str(new), sock=d.socket))
    assert "- user       turn61" in human and "+ user       other" in human
    assert "    +only on the new branch" in human.splitlines()
    assert "blob.bin (binary)" in human and "/history/" not in human
    stat = ok(reynctl("diff", str(out["from_seq"]), str(out["to_seq"]), "--stat", sock=d.socket))
    assert "new.txt  | 1 +" in stat and "blob.bin | Bin" in stat


def test_the_interactive_form_survives_a_daemon_restart(
    run64: tuple[Daemon, Path, Path, int, list[int]], short_tmp: Path
) -> None:
    d, ws, prog, good, seqs = run64
    env = bisect_env(short_tmp)
    start = ["bisect", "start", "--good", str(good), "--bad", str(seqs[-1]), "--json"]
    step = json.loads(ok(reynctl(*start, sock=d.socket, env=env)))
    again = reynctl(*start, sock=d.socket, env=env)
    assert again.returncode == 2 and "bisect reset" in again.stderr
    tested = 0
    while "seq" in step and "first_bad" not in step:
        tested += 1
        if tested == 3:  # a crash in the middle: the progress is the client's
            kill_daemon(d)
            d = start_daemon(
                short_tmp,
                state_dir=d.state_dir,
                socket_path=d.socket,
                config=workspace_config(ws),
            )
        checkout = Path(step["checkout"])
        code = subprocess.run(
            [sys.executable, "-c", CHECK],
            cwd=checkout,
            env={**os.environ, "REYN_SEQ": str(step["seq"]), "REYN_STATE": step["state"]},
            check=False,
        ).returncode
        verdict = {0: "good", 125: "skip"}.get(code, "bad")
        step = json.loads(ok(reynctl("bisect", verdict, "--json", sock=d.socket, env=env)))
        assert not checkout.exists()
    assert step["first_bad"] == seqs[BAD_FROM - 1] and tested <= 7
    log = ok(reynctl("bisect", "log", sock=d.socket, env=env))
    assert len([ln for ln in log.splitlines() if not ln.startswith("#")]) == tested
    ok(reynctl("bisect", "reset", sock=d.socket, env=env))
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    gone = reynctl("bisect", "log", sock=d.socket, env=env)
    assert gone.returncode == 2 and "bisect start" in gone.stderr
    # A progress file that cannot be read back: said, and `reset` still ends it.
    saved = path_for(d.socket, env)
    saved.write_text("{not json")
    damaged = reynctl("bisect", "good", sock=d.socket, env=env)
    assert damaged.returncode == 2 and "bisect reset` removes it" in damaged.stderr
    ok(reynctl("bisect", "reset", sock=d.socket, env=env))
    assert not saved.exists()
    assert calls(prog) == TURNS
    d.stop()


def test_workspace_reads_refuse_clearly(daemon: Daemon, short_tmp: Path) -> None:
    """Without workspace rewind: no files, and a blob asked for is refused saying why; with
    it, a seq past the head and an unknown blob get their own errors; generations.list's
    `lineage` past the head, or with all_branches, too."""
    head = daemon.call("daemon.status")["head"]
    tree = daemon.call("workspace.tree", {"seq": head})
    assert tree == {"seq": head, "enabled": False, "recorded": False, "files": {}}
    assert (
        daemon.call("state.diff", {"from_seq": 0, "to_seq": head, "files": True})["files"] is None
    )
    with daemon.connect() as c:
        off = c.request("workspace.blob", {"digest": "0" * 64})["error"]
        assert off["code"] == -32602 and "workspace rewind is off" in off["message"]
        short = c.request("workspace.blob", {"digest": "abc"})["error"]
        assert short["code"] == -32602
        both = c.request("workspace.tree", {"seq": 0, "tag": "x"})["error"]
        assert both["code"] == -32602 and "exactly one of seq / tag" in both["message"]
    with daemon.connect() as c:
        past = c.request("generations.list", {"lineage": head + 5})["error"]
        assert past["code"] == -32002  # seq_out_of_range
        params = {"lineage": head, "all_branches": True}
        mixed = c.request("generations.list", params)["error"]
        assert mixed["code"] == -32602 and "give one of them" in mixed["message"]
    ws = short_tmp / "ws2"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    d = start_daemon(short_tmp / "two", config=workspace_config(ws))
    try:
        files = d.call("workspace.tree", {"seq": 0})["files"]
        assert set(files) == {"a.txt"} and files["a.txt"]["size"] == 2
        blob = d.call("workspace.blob", {"digest": files["a.txt"]["ref"]})
        assert blob["data"] == "YQo="  # base64 of "a\n"
        with d.connect() as c:
            far = c.request("workspace.tree", {"seq": 10**6})["error"]
            assert far["code"] == -32002  # seq_out_of_range
            unknown = c.request("workspace.blob", {"digest": "f" * 64})["error"]
            assert unknown["code"] == -32602 and "workspace.tree lists" in unknown["message"]
    finally:
        d.stop()

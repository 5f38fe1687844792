"""A restore never escapes the workspace; one it cannot finish never bricks the daemon (issue 22).

- A checkout deleting thousands of files while another thread keeps swapping
  a workspace directory for a symlink to a directory outside: nothing out
  there is deleted or written, whatever the timing (the restore works
  relative to directory descriptors, each component opened O_NOFOLLOW).
- What a restore could not finish is refused before the reset record
  (`workspace_unrestorable`, nothing changes): a 250-byte name, a FIFO where
  the target has a file, an immutable file.
- A restore journal that cannot be finished at start: the daemon serves, and
  `daemon.status` (and `reynctl status`) report the pending restore.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import kill_daemon, log_lines, records, restart
from tests.test_reynctl_cli import ok, reynctl
from tests.test_workspace import Agent, write

UNRESTORABLE = -32023  # workspace_unrestorable


def snapshot(ws: Path) -> dict[str, Any]:
    """Every path under ws: kind, bytes or link target, mode (a fifo is never read)."""
    out: dict[str, Any] = {}
    for p in sorted(ws.rglob("*")):
        s = p.lstat()
        rel = p.relative_to(ws).as_posix()
        if stat.S_ISLNK(s.st_mode):
            out[rel] = ("l", os.readlink(p))
        elif stat.S_ISREG(s.st_mode):
            out[rel] = ("f", p.read_bytes(), s.st_mode & 0o777)
        else:
            out[rel] = (stat.S_IFMT(s.st_mode),)
    return out


def checkout(d: Daemon, seq: int, force: bool = False) -> dict[str, Any]:
    with d.connect() as c:
        return c.request("checkout", {"seq": seq, "force": force})


def outside_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


class Swapper(threading.Thread):
    """Once the restore has begun (`first` in ws/d is gone, or there with `appears`),
    swaps ws/d for a symlink to `outside` and back, as fast as it can, until stopped."""

    def __init__(self, ws: Path, outside: Path, first: str, appears: bool = False) -> None:
        super().__init__(daemon=True)
        self.d = ws / "d"
        self.first = self.d / first
        self.appears = appears
        self.aside = ws / "build" / "aside"  # ignored by the workspace config
        self.outside = outside
        self.stop = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        while os.path.lexists(self.first) != self.appears and not self.stop.is_set():
            os.sched_yield()  # the scan before the reset is done: the restore has begun
        while not self.stop.is_set():
            aside = self.aside.with_name(f"aside-{self.swaps}")
            try:
                os.rename(self.d, aside)
                os.symlink(self.outside, self.d)
            except OSError:  # the restore removed or made ws/d meanwhile
                os.sched_yield()
                continue
            self.swaps += 1
            os.sched_yield()
            try:
                os.unlink(self.d)
                os.rename(aside, self.d)
            except OSError:
                continue  # the restore replaced the link (it had recorded it): a new ws/d
            os.sched_yield()  # as long a real directory as a symlink

    def __enter__(self) -> Swapper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()


N_FILES = 3000


def _errors(d: Daemon) -> list[str]:
    return [line for line in d.stderr().splitlines() if '"error"' in line][-5:]


def test_a_directory_swapped_for_a_symlink_mid_restore_never_leads_outside(
    short_tmp: Path, ws: Path
) -> None:
    outside = short_tmp / "outside"
    outside.mkdir()
    for i in range(N_FILES):  # the names the restore deletes in ws/d, out there
        (outside / f"f{i:05d}").write_text("sentinel")
    (outside / "sub").mkdir()
    (outside / "sub" / "keep").write_text("sentinel")
    before = outside_tree(outside)
    (ws / "build").mkdir()
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        (ws / "d").mkdir()
        write(ws, "d/keep.txt", "kept")
        g0 = agent.turn()
        for i in range(N_FILES):
            (ws / "d" / f"f{i:05d}").write_text(f"file {i}")
        g1 = agent.turn()
        swaps = 0
        for _ in range(3):
            # Deleted in reverse order, written in order: the swaps begin with the restore.
            for target, first, appears in ((g0, N_FILES - 1, False), (g1, 0, True)):
                with Swapper(ws, outside, f"f{first:05d}", appears) as swapper:
                    reply = checkout(d, target, force=True)
                swaps += swapper.swaps
                now = outside_tree(outside)
                gone = len(before.keys() - now.keys())
                changed = len([k for k in before.keys() & now.keys() if before[k] != now[k]])
                added = len(now.keys() - before.keys())
                assert now == before, (
                    f"the checkout to {target} touched {outside}: "
                    f"{gone} deleted, {changed} changed, {added} added"
                )
                # Done, some paths skipped (logged); or, swapped during the preflight, refused.
                refused = reply.get("error", {}).get("data", {}).get("stage") == "preflight"
                assert "result" in reply or refused, (reply, _errors(d))
        # What the swaps made the restores skip, a quiet checkout restores.
        assert "result" in checkout(d, g0, force=True)
        assert "result" in checkout(d, g1, force=True)
        assert len(list((ws / "d").iterdir())) == N_FILES + 1
        assert swaps > 0
    finally:
        d.stop()


LONG = "n" * 246 + ".txt"  # 250 bytes: with a tmp prefix it passed NAME_MAX (255)


def test_a_250_byte_name_is_restored_and_every_start_serves(short_tmp: Path, ws: Path) -> None:
    d = start_daemon(short_tmp, config=workspace_config(ws))
    try:
        agent = Agent(d)
        write(ws, LONG, "long one")
        write(ws, "a.txt", "a1")
        g1 = agent.turn()
        s1 = snapshot(ws)
        write(ws, LONG, "long two")
        write(ws, "a.txt", "a2")
        agent.turn()
        reply = checkout(d, g1)
        assert "result" in reply, (reply, _errors(d))
        assert snapshot(ws) == s1
        assert not list(ws.glob(".reynd-tmp-*"))
    finally:
        d.stop()
    d = restart(d, short_tmp)  # no journal left to trip over
    try:
        assert d.call("daemon.status")["workspace"]["restore_pending"] is None
        assert snapshot(ws) == s1
    finally:
        d.stop()


def _refused(d: Daemon, ws: Path, seq: int, force: bool = False) -> dict[str, Any]:
    """A checkout to `seq` refused before its reset record: nothing moved."""
    status = d.call("daemon.status")
    before = snapshot(ws)
    reply = checkout(d, seq, force)
    assert "error" in reply, reply
    err: dict[str, Any] = reply["error"]
    assert err["code"] == UNRESTORABLE, err
    assert err["data"]["stage"] == "preflight"
    after = d.call("daemon.status")
    # No reset record: the runtime was not rewound.
    assert (after["head"], after["branch"]) == (status["head"], status["branch"])
    assert snapshot(ws) == before
    assert not (d.state_dir / "state" / "workspace-restore.json").exists()
    return err


def test_a_fifo_where_the_target_has_a_file_refuses_the_checkout(wd: Daemon, ws: Path) -> None:
    agent = Agent(wd)
    write(ws, "pipe", "a file once")
    write(ws, "a.txt", "a1")
    g1 = agent.turn()
    (ws / "pipe").unlink()
    write(ws, "a.txt", "a2")
    agent.turn()
    os.mkfifo(ws / "pipe")  # not workspace content: no change to record
    err = _refused(wd, ws, g1)
    assert err["data"]["paths"] == ["pipe"]
    assert "special file" in err["data"]["reasons"]["pipe"]
    assert "pipe" in err["message"] and "nothing was changed" in err["message"]
    assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)
    assert (ws / "a.txt").read_text() == "a2"
    # With the fifo moved away, the same checkout goes through.
    (ws / "pipe").unlink()
    assert "result" in checkout(wd, g1)
    assert (ws / "pipe").read_text() == "a file once"


def chattr(flag: str, *paths: Path) -> bool:
    """`chattr flag paths`; False when the file system or the privileges do not allow it."""
    done = subprocess.run(["chattr", flag, *map(str, paths)], check=False, capture_output=True)
    return done.returncode == 0


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    if not chattr("+i", *paths):
        pytest.skip("chattr +i is not available here")
    try:
        yield
    finally:
        chattr("-i", *paths)


def test_an_immutable_file_or_directory_refuses_the_checkout(wd: Daemon, ws: Path) -> None:
    agent = Agent(wd)
    write(ws, "a.txt", "a1")
    write(ws, "sub/b.txt", "b1")
    g1 = agent.turn()
    write(ws, "a.txt", "a2")
    write(ws, "sub/b.txt", "b2")
    write(ws, "sub/c.txt", "c2")
    agent.turn()
    with immutable(ws / "a.txt"):
        err = _refused(wd, ws, g1)
        assert err["data"]["paths"] == ["a.txt"]
        assert "immutable" in err["data"]["reasons"]["a.txt"]
        # Root is not stopped by permission bits, but is by the inode flag of a directory.
    with immutable(ws / "sub"):
        err = _refused(wd, ws, g1, force=False)
        assert err["data"]["paths"] == ["sub"]
        assert "immutable" in err["data"]["reasons"]["sub"]
    assert "result" in checkout(wd, g1)
    assert (ws / "a.txt").read_text() == "a1" and not (ws / "sub" / "c.txt").exists()


def test_a_start_serves_with_a_restore_it_cannot_finish(short_tmp: Path, ws: Path) -> None:
    d = start_daemon(
        short_tmp, config=workspace_config(ws), env={"REYN_CRASH_AT": "workspace.before_restore"}
    )
    try:
        agent = Agent(d)
        write(ws, "a.txt", "a1")
        write(ws, "b.txt", "b1")
        write(ws, "c.txt", "c1")
        g1 = agent.turn()
        s1 = snapshot(ws)
        for name in ("a", "b", "c"):
            write(ws, f"{name}.txt", f"{name}2")
        agent.turn()
        with d.connect() as c, pytest.raises((EOFError, ConnectionError)):
            c.request("checkout", {"seq": g1})  # killed after the reset record
    finally:
        kill_daemon(d)
    assert (d.state_dir / "state" / "workspace-restore.json").is_file()
    with immutable(ws / "b.txt"):  # the restore the start finishes cannot replace it
        d = restart(d, short_tmp)
        try:
            status = d.call("daemon.status")
            pending = status["workspace"]["restore_pending"]
            assert pending is not None, status
            assert pending["paths"] == ["b.txt"] and pending["count"] == 1
            assert pending["target"] == g1 and pending["reset_seq"] == status["head"]
            assert "EPERM" in pending["reasons"]["b.txt"]
            # Every other path was restored; the journal stays for the next start.
            assert (ws / "a.txt").read_text() == "a1" and (ws / "c.txt").read_text() == "c1"
            assert (ws / "b.txt").read_text() == "b2"
            assert (d.state_dir / "state" / "workspace-restore.json").is_file()
            assert log_lines(d, "workspace.restore_unfinished")
            text = ok(reynctl("status", sock=d.socket))
            assert "restore pending" in text and "b.txt" in text, text
        finally:
            d.stop()
    d = restart(d, short_tmp)  # b.txt unlocked: this start finishes the restore
    try:
        assert d.call("daemon.status")["workspace"]["restore_pending"] is None
        assert snapshot(ws) == s1
        assert not (d.state_dir / "state" / "workspace-restore.json").exists()
        assert "restore pending" not in ok(reynctl("status", sock=d.socket))
    finally:
        d.stop()


def test_a_scan_never_reads_through_a_directory_swapped_for_a_symlink(
    short_tmp: Path, ws: Path
) -> None:
    outside = short_tmp / "outside"
    outside.mkdir()
    for i in range(50):
        (outside / f"secret{i}").write_text("not the workspace's")
    (ws / "build").mkdir()
    for i in range(50):
        write(ws, f"d/f{i}", "mine")
    for i in range(50):
        write(ws, f"e{i}/g", "mine")  # more to scan after ws/d, widening the window
    # watch = false: every boundary scans the whole workspace.
    d = start_daemon(short_tmp, config=workspace_config(ws, "watch = false\n"))
    try:
        agent = Agent(d)
        with Swapper(ws, outside, "f0", appears=True):
            for _ in range(100):
                agent.turn()
        paths = [op[0] for r in records(d, kind="workspace.files") for op in r["ops"]]
        assert not [p for p in paths if "secret" in p], "read outside the workspace"
    finally:
        d.stop()


def test_a_path_failing_after_the_reset_record_leaves_the_others_restored_and_pending(
    short_tmp: Path, ws: Path
) -> None:
    d = start_daemon(
        short_tmp,
        config=workspace_config(ws),
        env={"REYN_CRASH_AT": "workspace.restore.file:2:eio"},  # the 2nd file: b.txt
    )
    try:
        agent = Agent(d)
        for name in ("a", "b", "c"):
            write(ws, f"{name}.txt", f"{name}1")
        g1 = agent.turn()
        s1 = snapshot(ws)
        for name in ("a", "b", "c"):
            write(ws, f"{name}.txt", f"{name}2")
        agent.turn()
        err = checkout(d, g1)["error"]
        assert err["code"] == UNRESTORABLE and err["data"]["stage"] == "restore", err
        assert err["data"]["paths"] == ["b.txt"] and "EIO" in err["data"]["reasons"]["b.txt"]
        status = d.call("daemon.status")
        assert err["data"]["reset_seq"] == status["head"]  # the reset stands
        assert "stands" in err["message"] and "restart" in err["message"]
        pending = status["workspace"]["restore_pending"]
        assert pending["paths"] == ["b.txt"] and pending["reset_seq"] == status["head"]
        assert (ws / "a.txt").read_text() == "a1" and (ws / "c.txt").read_text() == "c1"
        assert (ws / "b.txt").read_text() == "b2"
        # The daemon serves on: a turn after the reset, with a file of its own.
        write(ws, "d.txt", "d1")
        agent.turn()
        s1["d.txt"] = snapshot(ws)["d.txt"]
    finally:
        d.stop()
    d = restart(d, short_tmp)  # the start finishes it: the files become the tree of the tip
    try:
        assert d.call("daemon.status")["workspace"]["restore_pending"] is None
        assert snapshot(ws) == s1
        assert not (d.state_dir / "state" / "workspace-restore.json").exists()
    finally:
        d.stop()

"""Reset records say why and who; the reflog reads them back; undo (issue 24, items 1, 3, 4).

Real daemons over their real socket, real files, real SIGKILL: the reason and
the peer a rewind was called with are in its WAL record, in the result, the
`rewinds` notification, the audit line, `reynctl` output and `reflog.list`;
a state directory written before (tests/data/resets-v1.tar.gz) opens, shows
its old resets with no reason, and rewinds; `undo` is one more reset record.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import tarfile
from pathlib import Path
from typing import Any

from reynd.storage.segindex import INDEX_VERSION, decode_index
from tests.harness import NO_HORIZON, Daemon, start_daemon
from tests.runtime_helpers import error_of, head, wait_until
from tests.test_reynctl_cli import reynctl

DATA = Path(__file__).with_name("data")


def _append(d: Daemon, n: int) -> list[int]:
    """n acknowledged records for agent a (created first when the log is empty)."""
    seqs = []
    with d.connect() as c:
        if head(d) == 0:
            seqs.append(c.call("wal.append", {"agent": "a", "kind": "agent.created"})["seq"])
        while len(seqs) < n:
            data = {"message_id": f"m{head(d)}-{len(seqs)}", "text": "x"}
            reply = c.call("wal.append", {"agent": "a", "kind": "message.received", "data": data})
            seqs.append(reply["seq"])
    return seqs


def _wal_record(d: Daemon, seq: int) -> dict[str, Any]:
    """The record `seq` as the segment file holds it (`jq .rec`)."""
    for path in sorted((d.state_dir / "state" / "wal").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec: dict[str, Any] = json.loads(line)["rec"]
            if rec["seq"] == seq:
                return rec
    raise AssertionError(f"no record {seq}")


def _reflog(d: Daemon, **params: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = d.call("reflog.list", params)["entries"]
    return entries


def test_a_rewind_keeps_its_reason_and_who_called_it(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        seqs = _append(d, 6)
        with d.connect() as c, d.connect() as listener:
            sub = listener.call("subscribe", {"topics": ["rewinds"]})["subscription"]
            assert c.call("session.hello", {"client": "tester"}) == {
                "client": "tester",
                "uid": os.getuid(),
                "pid": os.getpid(),
            }
            res = c.call("rewind", {"seq": seqs[2], "reason": "bad tool output"})
            note = listener.recv_json()
        by = {"uid": os.getuid(), "pid": os.getpid(), "client": "tester"}
        assert res["reason"] == "bad tool output" and res["by"] == by
        assert note["params"]["subscription"] == sub
        assert note["params"]["data"]["reason"] == "bad tool output"
        rec = _wal_record(d, res["reset_seq"])
        assert rec["reason"] == "bad tool output"
        assert (rec["uid"], rec["pid"], rec["client"]) == (os.getuid(), os.getpid(), "tester")
        # A connection that gave no name: uid and pid only, no reason.
        res = d.call("checkout", {"seq": seqs[-1]})
        rec = _wal_record(d, res["reset_seq"])
        assert "reason" not in rec and "client" not in rec and rec["uid"] == os.getuid()
        assert res["by"]["client"] == "" and res["reason"] == ""
        (entry, first) = _reflog(d)
        assert entry["seq"] == res["reset_seq"] and entry["op"] == "checkout"
        assert entry["mode"] == "fork_switch" and entry["reason"] == ""
        assert first["reason"] == "bad tool output" and first["by"] == by
        assert first["supersedes"] == seqs[-1] and first["target"] == seqs[2]
        assert first["mode"] == "undo" and first["ts"] > 0
        wait_until(
            lambda: any(
                "reason: bad tool output" in e["summary"]
                for e in d.call("events.list", {"kind": ["rewind"]})["events"]
            ),
            "the audit line of the rewind, with its reason",
        )
    finally:
        d.stop()


def test_a_reason_that_is_too_long_or_holds_controls_is_refused(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        seqs = _append(d, 3)
        before = head(d)
        for bad in ("x" * 257, "two\nlines", "\x1b[31mred"):
            err = error_of(d, "rewind", {"seq": seqs[0], "reason": bad})
            assert err["code"] == -32602 and "reason" in err["message"], err
        err = error_of(d, "session.hello", {"client": ""})
        assert err["code"] == -32602 and "client" in err["message"], err
        assert head(d) == before  # nothing written
        assert d.call("rewind", {"seq": seqs[0], "reason": "y" * 256})["reason"] == "y" * 256
    finally:
        d.stop()


def test_reynctl_gives_its_name_and_shows_the_reason(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        seqs = _append(d, 4)
        sock = d.socket
        out = reynctl("rewind", str(seqs[1]), "--yes", "--reason", "try again", sock=sock)
        assert out.returncode == 0, out.stderr
        assert "reason: try again" in out.stdout
        (entry,) = _reflog(d)
        assert entry["by"]["client"] == "reynctl" and entry["reason"] == "try again"
        out = reynctl("reflog", sock=sock)
        assert out.returncode == 0, out.stderr
        assert "try again" in out.stdout and "reynctl (uid" in out.stdout
        assert "rewind" in out.stdout
        listing = json.loads(reynctl("reflog", "--json", sock=sock).stdout)
        assert listing["entries"] == _reflog(d)
    finally:
        d.stop()


def test_undo_returns_and_a_second_undo_comes_back(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        err = error_of(d, "undo", {})
        assert err["code"] == -32004 and "reflog" in err["message"], err
        seqs = _append(d, 5)
        tip = head(d)
        r1 = d.call("rewind", {"seq": seqs[1], "reason": "oops"})
        u1 = d.call("undo", {})
        # Back where the tip was before the rewind: a checkout of what it superseded.
        assert u1["target"] == tip and u1["mode"] == "fork_switch"
        assert u1["reason"] == f"undo of reset {r1['reset_seq']}"
        assert d.call("state.get", {})["agents"] == d.call("state.get", {"seq": tip})["agents"]
        u2 = d.call("undo", {"reason": "no, the rewind was right"})
        assert u2["target"] == u1["reset_seq"] - 1 == r1["reset_seq"]
        assert u2["reason"] == "no, the rewind was right"
        modes = [(e["op"], e["seq"]) for e in _reflog(d)]
        assert modes == [
            ("checkout", u2["reset_seq"]),
            ("checkout", u1["reset_seq"]),
            ("rewind", r1["reset_seq"]),
        ]
        # --steps 3: before the third-newest move, the rewind: the first tip.
        u3 = d.call("undo", {"steps": 3})
        assert u3["target"] == r1["reset_seq"] - 1 == tip
        err = error_of(d, "undo", {"steps": 5})
        assert err["code"] == -32004 and "moved 4 times" in err["message"]
        out = reynctl("undo", "--yes", sock=d.socket)
        assert out.returncode == 0, out.stderr
        assert f"reset record {u3['reset_seq'] + 1}" in out.stdout
    finally:
        d.stop()


def test_reflog_pages_newest_first(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        seqs = _append(d, 3)
        resets = []
        for i in range(7):
            target = seqs[0] if i % 2 == 0 else seqs[-1]
            resets.append(d.call("checkout", {"seq": target, "reason": f"r{i}"})["reset_seq"])
        pages, cursor = [], None
        while True:
            params: dict[str, Any] = {"limit": 3} | ({"cursor": cursor} if cursor else {})
            page = d.call("reflog.list", params)
            pages.append([e["seq"] for e in page["entries"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == [resets[::-1][0:3], resets[::-1][3:6], resets[::-1][6:]]
        assert [e["reason"] for e in _reflog(d)] == [f"r{i}" for i in reversed(range(7))]
    finally:
        d.stop()


def test_reflog_is_the_same_after_a_sigkill_mid_move(short_tmp: Path) -> None:
    """The WAL keeps every move it acknowledged: the audit log is not what the reflog reads.

    The fourth reset is killed once its record is durable, before the tip's
    state is swapped in: after the restart the reflog is what it was, plus
    that move (durable, so it happened), reason and all.
    """
    env = {"REYN_CRASH_AT": "reset.durable:4"}
    d = start_daemon(short_tmp, env=env)
    seqs = _append(d, 4)
    for i, target in enumerate((seqs[0], seqs[-1], seqs[1])):
        d.call("checkout", {"seq": target, "reason": f"move {i}"})
    before = _reflog(d)
    with d.connect() as c:
        c.send_json({"jsonrpc": "2.0", "id": 1, "method": "rewind", "params": {"seq": 0}})
        assert d.wait() == -signal.SIGKILL
    d = start_daemon(short_tmp, state_dir=d.state_dir)
    try:
        after = _reflog(d)
        assert after[1:] == before
        assert after[0]["target"] == 0 and after[0]["supersedes"] == before[0]["seq"]
        assert after[0]["by"]["uid"] == os.getuid()
        d.stop()
        d = start_daemon(short_tmp, state_dir=d.state_dir)
        assert _reflog(d) == after  # and a clean restart changes nothing
    finally:
        d.stop()


def test_a_state_dir_written_before_shows_its_resets_with_no_reason(short_tmp: Path) -> None:
    """tests/data/resets-v1.tar.gz (made by tests/data/make_resets_v1.py before issue 24):
    reset records without reason or peer, segment indexes of version 2."""
    facts = json.loads((DATA / "resets-v1.json").read_text())
    with tarfile.open(DATA / "resets-v1.tar.gz") as tar:
        tar.extractall(short_tmp, filter="tar")
    state_dir = short_tmp / "project" / ".reyn"
    # A small snapshot distance: the records appended after the upgrade get indexed.
    config = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 1\n"
    d = start_daemon(short_tmp, state_dir=state_dir, config=config)
    try:
        assert head(d) == facts["head"]
        old = _reflog(d)
        assert [[e["seq"], e["target"]] for e in old] == facts["resets"][::-1]
        for e in old:
            assert e["reason"] == "" and e["by"] is None and e["cancelled"] == []
            assert e["supersedes"] == e["seq"] - 1 and not e["collected"]
        assert [e["mode"] for e in old] == ["fork_switch", "undo"]
        res = d.call("rewind", {"seq": facts["resets"][0][1], "reason": "after the upgrade"})
        assert _reflog(d)[1:] == old and _reflog(d)[0]["reason"] == "after the upgrade"
        undone = d.call("undo", {})
        assert undone["target"] == res["reset_seq"] - 1 == facts["head"]
        d.stop()
        d = start_daemon(short_tmp, state_dir=state_dir)
        assert _reflog(d)[2:] == old
        # The chunks written since are of this version (3 or later): a reynd reading
        # only version 2 does not use them, scans, and refuses the new records cleanly.
        newest = sorted((state_dir / "state" / "index").glob("*.idx"))[-1]
        chunks = decode_index(newest.read_bytes(), int(newest.stem))
        assert chunks and chunks[-1].last >= res["reset_seq"]  # the rewind with a reason
        assert newest.read_bytes().rfind(b"REYNSIDX" + struct.pack("<I", INDEX_VERSION)) >= 0
    finally:
        d.stop()


def test_a_move_whose_record_retention_collected_stays_in_the_reflog(short_tmp: Path) -> None:
    """Below the floor only the seqs remain (state/retained keeps them): shown `collected`."""
    config = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 4096\n"
    d = start_daemon(short_tmp, config=config + "[retention]\ngc_interval_s = 0\n")
    try:
        seqs = _append(d, 20)
        old = d.call("rewind", {"seq": seqs[5], "reason": "long ago"})
        _append(d, 300)
        d.call("retention.set", {"snapshot_keep": 1, "wal_keep_records": 100, **NO_HORIZON})
        floor = d.call("retention.gc")["floor"]
        assert floor > old["reset_seq"]
        (entry,) = _reflog(d)
        assert entry == {
            "seq": old["reset_seq"],
            "supersedes": old["reset_seq"] - 1,
            "target": seqs[5],
            "op": "rewind",
            "mode": "undo",
            "ts": 0.0,
            "agent": None,
            "reason": "",
            "by": None,
            "cancelled": [],
            "collected": True,
        }
        out = reynctl("reflog", sock=d.socket)
        assert "(collected)" in out.stdout, out
    finally:
        d.stop()

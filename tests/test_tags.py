"""Tags: durable names for seqs (issue 24, item 2). Real daemons, real files, real restarts.

A tag is an appended record; it survives a restart (scanned, or from a
segment index), a rewind (tags are operator metadata: a tag made on a branch
later abandoned still names its seq, so `checkout good` works) and GC (a tag
whose history is collected is kept, dangling, and using it says so).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from reynd.storage.segindex import decode_index
from tests.harness import NO_HORIZON, Daemon, start_daemon
from tests.runtime_helpers import error_of, head
from tests.test_reset_records import _append
from tests.test_reynctl_cli import reynctl
from tests.test_time_addressing import History

SMALL = """
[storage]
segment_bytes = 4096
snapshot_min_bytes = 4096

[retention]
gc_interval_s = 0
"""


def _tags(d: Daemon) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in d.call("tags.list")["tags"]}


def _inbox(d: Daemon, **at: Any) -> list[str]:
    agents = d.call("state.get", {"agent": "a", **at})["agents"]
    return [m["message_id"] for m in agents["a"]["inbox"]]


def test_set_move_delete_and_what_is_refused(short_tmp: Path) -> None:
    d = start_daemon(short_tmp)
    try:
        seqs = _append(d, 5)
        tip = head(d)
        made = d.call("tags.set", {"name": "good"})
        assert made["target"] == tip and made["seq"] == tip + 1 and not made["dangling"]
        assert d.call("tags.set", {"name": "good", "seq": tip}) == made  # already so: no record
        assert head(d) == tip + 1
        err = error_of(d, "tags.set", {"name": "good", "seq": seqs[1]})
        assert err["code"] == -32024 and "pass force" in err["message"], err
        moved = d.call("tags.set", {"name": "good", "seq": seqs[1], "force": True})
        assert moved["target"] == seqs[1]
        d.call("tags.set", {"name": "v1.0", "seq": 0})
        assert {n: t["target"] for n, t in _tags(d).items()} == {"good": seqs[1], "v1.0": 0}
        for bad in ("42", "-x", "a b", "x" * 65, ""):
            err = error_of(d, "tags.set", {"name": bad})
            assert err["code"] == -32602 and "name" in err["message"], (bad, err)
        err = error_of(d, "tags.set", {"name": "far", "seq": head(d) + 5})
        assert err["code"] == -32002, err
        deleted = d.call("tags.delete", {"name": "v1.0"})
        assert deleted["target"] == 0 and "v1.0" not in _tags(d)
        err = error_of(d, "tags.delete", {"name": "v1.0"})
        assert err["code"] == -32025 and "reynctl tags" in err["message"], err
        err = error_of(d, "rewind", {"tag": "nope"})
        assert err["code"] == -32025, err
        err = error_of(d, "rewind", {"tag": "good", "seq": 1})
        assert err["code"] == -32602 and "(got seq, tag)" in err["message"], err
        assert err["data"]["field"] == "tag", err
        err = error_of(d, "rewind", {})
        assert err["code"] == -32602, err
        # Tag records change no runtime state.
        assert d.call("state.get", {"seq": tip})["agents"] == d.call("state.get")["agents"]
    finally:
        d.stop()


def test_a_tag_survives_rewind_and_restart_and_resolves_everywhere(short_tmp: Path) -> None:
    # A snapshot, and an index chunk, after every few records: the restart reads the tags
    # from the segment indexes.
    d = start_daemon(short_tmp, config=SMALL.replace("4096\n\n", "1\n\n"))
    try:
        seqs = _append(d, 40)
        d.call("tags.set", {"name": "before-refactor", "seq": seqs[5]})
        good = head(d)  # the tip: the tag record just appended, on branch 0
        assert d.call("tags.set", {"name": "good"})["target"] == good
        # A rewind abandons the branch that holds `good`; the tag is not rewound.
        d.call("rewind", {"tag": "before-refactor", "reason": "by name"})
        assert _tags(d)["good"]["target"] == good
        _append(d, 3)
        assert _inbox(d, tag="good") == _inbox(d, seq=good)
        diff = d.call("state.diff", {"from_tag": "before-refactor", "to_tag": "good"})
        assert (diff["from_seq"], diff["to_seq"]) == (seqs[5], good)
        branches = d.call("branches.list")["branches"]
        assert {b["id"]: b["tags"] for b in branches} == {
            0: ["before-refactor", "good"],
            branches[1]["id"]: [],
        }
        gens_tags = {g["seq"]: g["tags"] for g in d.call("generations.list")["generations"]}
        assert all(t == [] for t in gens_tags.values())  # no boundary is tagged here
        d.stop()
        # The restart takes them from the segment indexes (version 3 lists tag records).
        indexed = [
            tag
            for path in (d.state_dir / "state" / "index").glob("*.idx")
            for chunk in decode_index(path.read_bytes(), int(path.stem))
            for tag in chunk.tags
        ]
        assert [name for _, name, _ in indexed] == ["before-refactor", "good"]
        d = start_daemon(short_tmp, state_dir=d.state_dir)
        assert {n: t["target"] for n, t in _tags(d).items()} == {
            "before-refactor": seqs[5],
            "good": good,
        }
        res = d.call("checkout", {"tag": "good"})  # the abandoned branch comes back by name
        assert res["target"] == good and res["mode"] == "fork_switch"
    finally:
        d.stop()


def test_a_tag_whose_history_is_collected_dangles_and_says_so(short_tmp: Path) -> None:
    d = start_daemon(short_tmp, config=SMALL)
    try:
        seqs = _append(d, 300)
        d.call("tags.set", {"name": "old", "seq": seqs[10]})
        d.call("tags.set", {"name": "gone", "seq": seqs[20]})
        d.call("tags.delete", {"name": "gone"})
        d.call("tags.set", {"name": "new", "seq": seqs[-1]})
        _append(d, 200)  # the tag records themselves fall below the floor too
        d.call("retention.set", {"snapshot_keep": 1, "wal_keep_records": 100, **NO_HORIZON})
        floor = d.call("retention.gc")["floor"]
        assert floor > seqs[-1] + 5
        tags = _tags(d)
        assert set(tags) == {"old", "new"}
        assert tags["old"]["dangling"] and tags["old"]["target"] == seqs[10]
        err = error_of(d, "rewind", {"tag": "old"})
        assert err["code"] == -32003 and "tag 'old'" in err["message"], err
        assert err["data"]["tag"] == "old" and err["data"]["floor"] == floor
        retained = json.loads((d.state_dir / "state" / "retained").read_bytes())["rec"]
        assert retained["version"] == 2 and len(retained["tags"]) == 2
        d.stop()
        d = start_daemon(short_tmp, state_dir=d.state_dir)
        assert _tags(d) == tags
        out = reynctl("tags", sock=d.socket)
        assert out.returncode == 0 and "dangling" in out.stdout, out
    finally:
        d.stop()


@pytest.mark.parametrize("arg", ["good", "7"])
def test_reynctl_takes_a_tag_wherever_a_seq_goes(short_tmp: Path, arg: str) -> None:
    d = start_daemon(short_tmp)
    try:
        _append(d, 8)
        sock = d.socket
        out = reynctl("tag", "good", "7", sock=sock)
        assert out.returncode == 0 and "tag good names seq 7" in out.stdout, out
        listing = reynctl("tags", sock=sock)
        assert listing.returncode == 0 and "good" in listing.stdout
        show = reynctl("show", arg, "--json", sock=sock)
        assert show.returncode == 0 and json.loads(show.stdout)["seq"] == 7, show
        diff = reynctl("diff", arg, "3", "--json", sock=sock)
        assert json.loads(diff.stdout)["from_seq"] == 7, diff
        out = reynctl("rewind", arg, "--yes", sock=sock)
        assert out.returncode == 0 and "rewound to seq 7" in out.stdout, out
        out = reynctl("branches", sock=sock)
        assert "tags: good" in out.stdout, out.stdout
        out = reynctl("tag", "--delete", "good", sock=sock)
        assert out.returncode == 0 and "deleted tag good" in out.stdout
        out = reynctl("rewind", "nope", "--yes", sock=sock)
        assert out.returncode == 1 and "tag_not_found" in out.stderr, out
        out = reynctl("rewind", "-5", "--yes", sock=sock)
        assert out.returncode == 2 and "relative" in out.stderr, out
    finally:
        d.stop()


def _set_at_once(d: Daemon, name: str, seqs: list[int]) -> list[dict[str, Any]]:
    """`tags.set` of `name` by one connection per seq, released together."""
    conns = [d.connect() for _ in seqs]
    barrier = threading.Barrier(len(seqs))
    replies: list[dict[str, Any]] = [{} for _ in seqs]

    def go(i: int) -> None:
        barrier.wait()
        replies[i] = conns[i].request("tags.set", {"name": name, "seq": seqs[i]})

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(seqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in conns:
        c.close()
    return replies


def test_one_name_set_by_many_clients_at_once_is_set_once(short_tmp: Path) -> None:
    """The check against the table and the durable record are one step (a review found
    8 of 8 concurrent `tags.set` without force accepted, each told the last one's seq)."""
    d = start_daemon(short_tmp)
    try:
        seqs = _append(d, 10)[:8]
        for trial in range(5):
            replies = _set_at_once(d, f"race{trial}", seqs)
            won = [r["result"] for r in replies if "result" in r]
            lost = [r["error"]["code"] for r in replies if "error" in r]
            assert len(won) == 1 and lost == [-32024] * 7, (trial, won, lost)
            assert won[0]["target"] in seqs, won
            assert d.call("tags.list")["tags"][trial]["target"] == won[0]["target"]
    finally:
        d.stop()


def test_a_tag_record_moves_no_address(short_tmp: Path) -> None:
    """A tag record changes no state: `at` now is still nothing to do, and `back 1` is
    still the checkpoint before the tip's (the review saw a no-op reset record written,
    and `back 1` land on the tip's own checkpoint)."""
    d = start_daemon(short_tmp)
    try:
        h = History(d)
        for n in (1, 2, 3):
            h.turn(n)
        d.call("tags.set", {"name": "good"})  # names h.ends[3], the tip's checkpoint
        assert error_of(d, "rewind", {"at": max(h.ts().values()) + 1})["code"] == -32004
        moved = d.call("rewind", {"back": 1})
        assert moved["target"] == h.ends[2], moved
    finally:
        d.stop()

"""A state machine of workspace rewind against the real daemon (issue 11).

An external runtime's agent (wal.append) runs turns whose steps write,
delete, re-mode and link files in the workspace; rewinds, checkouts (to any
seq, abandoned branches included), act-turn rewinds, a user's edits that a
checkout must refuse (then force, and bring back), restores of one scope
(`only` runtime: the files stay and are the reset's tree; `only` workspace:
a reset record to the tip, then the files as of the target), edits of a
message with and without reapply (issue 25), and SIGKILL with a restart
(mostly through the segment indexes) are interleaved. The model holds the
tree expected as of every seq; after every operation the directory must
equal the tree expected at the tip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.conftest import workspace_config
from tests.harness import Daemon, start_daemon
from tests.runtime_helpers import kill_daemon, restart

# Snapshots, and with them segment indexes, every KiB of WAL: a restart takes most records
# (their workspace.files seqs too) from the indexes, the rest from a scan.
STORAGE = "[storage]\nsegment_bytes = 4096\nsnapshot_min_bytes = 1024\n"

Entry = tuple[Any, ...]  # ("f", text, mode) | ("l", target)
Tree = dict[str, Entry]

PATHS = ("a.txt", "b.txt", "d/x.txt", "d/e/y.txt", "f/z.txt")
change = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PATHS), st.text("xyz", max_size=3)),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.just("")),
    st.tuples(st.just("chmod"), st.sampled_from(PATHS), st.just("")),
    st.tuples(st.just("link"), st.just("lnk"), st.sampled_from(PATHS)),
)


def read_tree(root: Path) -> Tree:
    out: Tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ("l", os.readlink(p))
            else:
                out[rel] = ("f", p.read_text(), p.stat().st_mode & 0o777)
    return out


class WorkspaceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="reynd-m-", dir="/tmp"))
        self.ws = self.tmp / "ws"
        self.ws.mkdir()
        self.d: Daemon = start_daemon(self.tmp, config=workspace_config(self.ws) + STORAGE)
        self.tree: Tree = {}  # expected in the workspace now
        self.trees: dict[int, Tree] = {0: {}}  # expected as of each seq
        self.turn_at: dict[int, str | None] = {0: None}  # the turn in flight as of each seq
        self.parent: dict[int, int] = {}  # seq 1 creates the agent: resets land at or above it
        self.head = 0
        self.messages: set[int] = set()  # seqs of message.received records
        self.n = 0
        self.step_no = 0
        self._add("agent.created", executor="external")

    def teardown(self) -> None:
        try:
            self.d.stop()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------

    def _add(self, kind: str, **data: Any) -> int:
        """One wal.append; the seqs it used (file records included) get the tree now."""
        seq = int(self.d.call("wal.append", {"agent": "x", "kind": kind, "data": data})["seq"])
        turn = self.turn_at[self.head]
        if kind == "turn.started":
            turn = data["turn_id"]
        elif kind == "turn.ended":
            turn = None
        self._advance(seq, turn)
        return seq

    def _advance(self, seq: int, turn: str | None) -> None:
        for s in range(self.head + 1, seq + 1):
            self.trees[s] = dict(self.tree)
            self.turn_at[s] = turn
            self.parent[s] = s - 1
        self.head = seq

    def _change(self, changes: list[tuple[str, str, str]]) -> None:
        for op, path, arg in changes:
            p = self.ws / path
            if op == "write":
                if p.is_symlink():
                    p.unlink()
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(arg)
                self.tree[path] = ("f", arg, p.stat().st_mode & 0o777)
            elif op == "delete" and path in self.tree:
                p.unlink()
                del self.tree[path]
            elif op == "chmod" and self.tree.get(path, ("",))[0] == "f":
                mode = 0o755 if self.tree[path][2] != 0o755 else 0o644
                p.chmod(mode)
                self.tree[path] = ("f", self.tree[path][1], mode)
            elif op == "link":
                if p.exists() or p.is_symlink():
                    p.unlink()
                os.symlink(arg, p)
                self.tree[path] = ("l", arg)

    def _active(self) -> set[int]:
        out, s = set(), self.head
        while s > 0:
            out.add(s)
            s = self.parent[s]
        return out | {0}

    def _reset(self, method: str, target: int, **extra: Any) -> dict[str, Any]:
        with self.d.connect() as c:
            reply = c.request(method, {"seq": target, **extra})
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        reset = int(result["reset_seq"])
        self._advance(reset - 1, self.turn_at[self.head])  # file records before it, if any
        self.trees[reset] = dict(self.trees[target])
        self.turn_at[reset] = self.turn_at[target]
        self.parent[reset] = target
        self.head = reset
        self.tree = dict(self.trees[target])
        return result

    # -- rules ---------------------------------------------------------------------------

    @precondition(lambda self: self.turn_at[self.head] is None)
    @rule()
    def start_turn(self) -> None:
        self.n += 1
        self.messages.add(self._add("message.received", message_id=f"m{self.n}", text="go"))
        self._add("turn.started", turn_id=f"t{self.n}", message_id=f"m{self.n}")
        self.step_no = 0

    @precondition(lambda self: self.turn_at[self.head] is not None)
    @rule(changes=st.lists(change, max_size=4))
    def step(self, changes: list[tuple[str, str, str]]) -> None:
        turn = self.turn_at[self.head]
        self.step_no += 1
        self._add("step.started", turn_id=turn, step=self.step_no)
        self._change(changes)
        self._add("step.committed", turn_id=turn, step=self.step_no)

    @precondition(lambda self: self.turn_at[self.head] is not None)
    @rule(changes=st.lists(change, max_size=2))
    def end_turn(self, changes: list[tuple[str, str, str]]) -> None:
        self._change(changes)  # recorded with the boundary itself
        self._add("turn.ended", turn_id=self.turn_at[self.head])

    @precondition(lambda self: self.head > 1)
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self._active() - {0, self.head})))
        self._reset("rewind", target)

    @precondition(lambda self: self.head > 1)
    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        self._reset("checkout", data.draw(st.sampled_from(range(1, self.head))))

    @precondition(
        lambda self: any(self.turn_at[s] is not None for s in self._active() if 0 < s < self.head)
    )
    @rule(data=st.data())
    def act_turn_rewind(self, data: st.DataObject) -> None:
        targets = sorted(
            s for s in self._active() if 0 < s < self.head and self.turn_at[s] is not None
        )
        target = data.draw(st.sampled_from(targets))
        with self.d.connect() as c:
            reply = c.request("act_turn.rewind", {"agent": "x", "seq": target})
        assert "result" in reply, reply
        reset = int(reply["result"]["reset_seq"])
        assert reset == self.head + 1  # nothing unrecorded: no file record before it
        self.trees[reset] = dict(self.trees[target])
        self.turn_at[reset] = self.turn_at[target]
        self.parent[reset] = target
        self.head = reset
        self.tree = dict(self.trees[target])

    @precondition(lambda self: self.head > 1)
    @rule(data=st.data(), text=st.text("uvw", min_size=4, max_size=4))
    def user_edit_then_forced_checkout(self, data: st.DataObject, text: str) -> None:
        path = data.draw(st.sampled_from(PATHS))
        old_head = self.head
        self._change([("write", path, text)])  # not recorded: the user's own edit
        edited = dict(self.tree)
        target = data.draw(st.sampled_from(range(1, self.head)))
        with self.d.connect() as c:
            refused = c.request("checkout", {"seq": target})
        assert refused["error"]["code"] == -32015, refused
        assert refused["error"]["data"]["paths"] == [path]
        assert read_tree(self.ws) == edited  # nothing was written
        result = self._reset("checkout", target, force=True)
        kept = int(result["reset_seq"]) - 1
        assert kept == old_head + 1
        assert self.trees[kept] == edited  # the record before the reset holds the edit

    @precondition(lambda self: self.head > 1)
    @rule(data=st.data())
    def rewind_only_runtime(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self._active() - {0, self.head})))
        files = dict(self.tree)
        result = self._reset("rewind", target, only="runtime")
        self.trees[int(result["reset_seq"])] = files  # the files stay: the reset's tree
        self.tree = dict(files)

    @precondition(lambda self: self.head > 1)
    @rule(data=st.data())
    def checkout_only_workspace(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(range(1, self.head)))
        tip, turn = self.head, self.turn_at[self.head]
        with self.d.connect() as c:
            reply = c.request("checkout", {"seq": target, "only": "workspace"})
        assert "result" in reply, reply
        reset = int(reply["result"]["reset_seq"])
        assert reset == tip + 1 and reply["result"]["target"] == tip
        # The reset record to the tip keeps its tree; the files record after it (none
        # when the trees are equal) makes the tree as of the target.
        self.trees[reset], self.turn_at[reset], self.parent[reset] = dict(self.tree), turn, tip
        self.head = reset
        self.tree = dict(self.trees[target])
        self._advance(int(self.d.call("daemon.status")["head"]), turn)

    @precondition(lambda self: bool(self.messages & self._active()))
    @rule(data=st.data(), reapply=st.booleans())
    def edit_message(self, data: st.DataObject, reapply: bool) -> None:
        seq = data.draw(st.sampled_from(sorted(self.messages & self._active())))
        extra: dict[str, Any] = {"then": {"agent": "x", "text": "edited"}, "replaces": seq}
        if reapply:
            extra["reapply"] = "messages"
        result = self._reset("checkout", seq - 1, **extra)
        assert seq not in [r["from_seq"] for r in result["reapplied"]]
        first = int(result["reset_seq"]) + 1
        self._advance(first + len(result["reapplied"]), self.turn_at[self.head])
        self.messages.update(range(first, self.head + 1))

    @rule()
    def crash_and_restart(self) -> None:
        kill_daemon(self.d)
        self.d = restart(self.d, self.tmp)
        assert int(self.d.call("daemon.status")["head"]) == self.head

    @invariant()
    def workspace_is_the_tree_as_of_the_tip(self) -> None:
        assert read_tree(self.ws) == self.tree, self.head


WorkspaceMachine.TestCase.settings = settings(
    max_examples=10, stateful_step_count=25, deadline=None
)
test_workspace_machine = WorkspaceMachine.TestCase

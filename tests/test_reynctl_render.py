"""Pure tests of reynctl's human output: tables, the branch tree, state, diffs."""

from __future__ import annotations

from datetime import UTC

import msgspec

from reynctl import render
from reynctl.render import Cell, Style
from reynd.protocol import agent_methods as a
from reynd.protocol import methods as m
from reynd.protocol.events import Message
from reynd.protocol.state import AgentState, Chain, InboxItem
from reynd.protocol.workspace_methods import FileEntry

PLAIN = Style(False)
COLOR = Style(True)


def test_table_aligns_columns_and_has_no_trailing_spaces():
    out = render.table(
        ["SEQ", "NAME", "NOTE"], [["5", "alice", ""], ["123", "bo", "x"]], PLAIN, align="rl"
    )
    assert out.splitlines() == [
        "SEQ  NAME   NOTE",
        "  5  alice",
        "123  bo     x",
    ]


def test_colour_is_applied_after_alignment():
    plain = render.table(["A", "B"], [[Cell("1", ("green",)), "x"]], PLAIN)
    colored = render.table(["A", "B"], [[Cell("1", ("green",)), "x"]], COLOR)
    assert "\x1b[" not in plain
    assert "\x1b[32m1\x1b[0m" in colored
    strip = colored.replace("\x1b[32m", "").replace("\x1b[1m", "").replace("\x1b[0m", "")
    assert strip == plain


def test_style_without_colour_is_identity():
    assert PLAIN("x", "red", "bold") == "x"
    assert COLOR("x", "red", "bold") == "\x1b[31;1mx\x1b[0m"
    assert COLOR("", "red") == ""


def _branches() -> m.BranchesResult:
    # docs/design.md's example: 1..10, rewind(5) -> R=11, 12..15, checkout(8) -> R=16.
    return m.BranchesResult(
        head=16,
        branches=[
            m.BranchInfo(id=16, origin_seq=8, parent=0, tip=16, active=True),
            m.BranchInfo(id=0, origin_seq=0, parent=None, tip=10, active=False),
            m.BranchInfo(id=11, origin_seq=5, parent=0, tip=15, active=False),
        ],
    )


def test_branch_tree_design_example():
    assert render.branch_tree(_branches(), PLAIN).splitlines() == [
        "BRANCH  FORKED AT  SEQS",
        "0                  1..10",
        "├─ 11           5  11..15",
        "└─ 16           8  16      * current (head 16)",
    ]


def test_branch_tree_nests_grandchildren_and_orders_by_fork_point():
    res = m.BranchesResult(
        head=30,
        branches=[
            m.BranchInfo(id=0, origin_seq=0, parent=None, tip=10, active=False),
            m.BranchInfo(id=20, origin_seq=9, parent=0, tip=25, active=False),
            m.BranchInfo(id=11, origin_seq=5, parent=0, tip=19, active=False),
            m.BranchInfo(id=26, origin_seq=14, parent=11, tip=30, active=True),
        ],
    )
    assert render.branch_tree(res, PLAIN).splitlines() == [
        "BRANCH    FORKED AT  SEQS",
        "0                    1..10",
        "├─ 11             5  11..19",
        "│  └─ 26         14  26..30  * current (head 30)",
        "└─ 20             9  20..25",
    ]


def test_branch_tree_of_an_empty_log_and_orphans():
    empty = m.BranchesResult(
        head=0, branches=[m.BranchInfo(id=0, origin_seq=0, parent=None, tip=0, active=True)]
    )
    assert render.branch_tree(empty, PLAIN).splitlines()[1].startswith("0")
    assert "empty" in render.branch_tree(empty, PLAIN)
    # A branch whose parent was collected by retention is still drawn.
    orphan = m.BranchesResult(
        head=7, branches=[m.BranchInfo(id=7, origin_seq=3, parent=2, tip=7, active=True)]
    )
    assert "7" in render.branch_tree(orphan, PLAIN).splitlines()[1]
    assert render.branch_tree(m.BranchesResult(head=0, branches=[]), PLAIN) == "no branches"


def test_generations_table():
    res = m.GenerationsResult(
        generations=[
            m.Generation(
                seq=16,
                kind="turn",
                agent="ada",
                active=False,
                branch=0,
                created_at=86400.0,
                label="turn 3",
            ),
            m.Generation(seq=6, kind="turn", agent="ada", active=True, branch=0, created_at=0.0),
        ]
    )
    lines = render.generations_table(res, PLAIN, tz=UTC).splitlines()
    assert lines[0].split() == ["SEQ", "KIND", "AGENT", "BRANCH", "STATUS", "CREATED", "LABEL"]
    assert lines[1].split() == [
        "16",
        "turn",
        "ada",
        "0",
        "abandoned",
        "1970-01-02",
        "00:00:00",
        "turn",
        "3",
    ]
    assert lines[2].split() == ["6", "turn", "ada", "0", "active", "-"]
    assert "no generations" in render.generations_table(m.GenerationsResult(generations=[]), PLAIN)


def test_rewind_text_names_mode_and_cancelled_turns():
    res = m.RewindResult(
        mode="undo",
        reset_seq=11,
        target=5,
        branch=11,
        cancelled=[m.CancelledChain(agent="ada", turn_id="t3")],
    )
    assert render.rewind_text(res, PLAIN).splitlines() == [
        "rewound to seq 5: reset record 11, now on branch 11",
        "  cancelled turn t3 of ada",
    ]
    fork = m.RewindResult(mode="fork_switch", reset_seq=16, target=8, branch=16)
    assert render.rewind_text(fork, PLAIN).startswith("switched to the abandoned branch at seq 8")


def test_runs_again_lists_pending_work_of_the_agents_the_daemon_runs():
    ran = AgentState(
        name="ada",
        session="default",
        executor="builtin",
        options={},
        created_seq=1,
        applied_seq=16,
        inbox=[InboxItem(message_id="m20", text="next\x1b[2J", sender="user", seq=20)],
        pending_chains=[Chain(turn_id="t11", message_id="m11", started_seq=12)],
    )
    external = msgspec.structs.replace(ran, name="scribe", executor="external")
    state = m.StateResult(seq=21, active=True, branch=0, agents={"ada": ran, "scribe": external})
    assert render.runs_again(state, 100) == [
        "  ada runs again now: turn t11 was in flight at seq 21 "
        "(its committed steps replay from their memos)",
        "  ada runs again now: its message at seq 20 was not taken yet: next\\x1b[2J",
    ]
    # The agent of an act-turn rewind: its resumed turn is told already.
    assert len(render.runs_again(state, 100, skip="ada")) == 1
    idle = msgspec.structs.replace(ran, inbox=[], pending_chains=[])
    assert render.runs_again(msgspec.structs.replace(state, agents={"ada": idle}), 100) == []


def _agent() -> AgentState:
    return AgentState(
        name="ada",
        session="demo",
        executor="external",
        options={},
        created_seq=1,
        applied_seq=11,
        turns_completed=2,
        history=[
            Message(role="user", content="hi\nthere"),
            Message(role="assistant", content="hello"),
        ],
        pending_chains=[Chain(turn_id="t3", message_id="m3", started_seq=12, open_step=1)],
    )


def test_state_text():
    res = m.StateResult(seq=11, active=True, branch=0, agents={"ada": _agent()})
    out = render.state_text(res, PLAIN)
    assert out.splitlines()[0] == "state as of seq 11 (branch 0, active)"
    assert "agent ada  executor external, session demo" in out
    assert "turn t3 (from seq 12): 0 steps committed, step 1 open" in out
    assert "user       hi ⏎ there" in out
    assert "assistant  hello" in out
    empty = m.StateResult(seq=0, active=True, branch=0, agents={})
    assert render.state_text(empty, PLAIN).endswith("no agents")


def test_diff_text():
    res = m.DiffResult(
        from_seq=5,
        to_seq=9,
        agents={
            "ada": [
                m.Change(path="/history/10", op="add", after={"role": "tool", "content": "z"}),
                m.Change(path="/history/2", op="add", after={"role": "user", "content": "x"}),
                m.Change(path="/turns_completed", op="change", before=1, after=2),
                m.Change(path="/inbox/0", op="remove", before={"text": "y"}),
                m.Change(path="/pending_chains/0/steps/1/output/tokens_in", op="change", after=2),
            ],
            "bob": [],
        },
    )
    # Document order whatever order the changes came in; paths as words, lists from 1.
    assert render.diff_text(res, PLAIN).splitlines() == [
        "seq 5 → seq 9",
        "agent ada",
        "  state: 5 changes",
        '    + message 3                                       {"role":"user","content":"x"}',
        '    + message 11                                      {"role":"tool","content":"z"}',
        '    - inbox item 1                                    {"text":"y"}',
        "    ~ turn in flight 1 > step 2 > output > tokens in  null → 2",
        "    ~ turns completed                                 1 → 2",
    ]
    none = m.DiffResult(from_seq=1, to_seq=1, agents={"ada": []})
    assert render.diff_text(none, PLAIN) == "seq 1 → seq 1: no differences"


def test_diff_text_across_substrates():
    """The conversation as messages (its /history changes not repeated as state), the
    files as git shows them, and with `stat` one line per file."""
    user, bot = Message(role="user", content="hi"), Message(role="assistant", content="yo")
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    entry = FileEntry(kind="f", mode=0o644, ref="0" * 64, size=3)
    res = m.DiffResult(
        from_seq=3,
        to_seq=8,
        fork=2,
        agents={
            "ada": [
                m.Change(path="/history/4", op="add", after={"role": "user"}),
                m.Change(path="/turns_completed", op="change", before=1, after=2),
            ]
        },
        conversations={"ada": m.Conversation(common=4, removed=[bot], added=[user])},
        files=[
            m.FileChange(path="a.txt", op="change", before=entry, after=entry, patch=patch),
            m.FileChange(path="b.bin", op="add", after=entry, binary=True),
        ],
    )
    assert render.diff_text(res, PLAIN).splitlines() == [
        "seq 3 → seq 8 (branches fork at seq 2)",
        "agent ada",
        "  conversation (after message 4): 1 removed, 1 added",
        "    - assistant  yo",
        "    + user       hi",
        "  state: 1 change",
        "    ~ turns completed  1 → 2",
        "files: 2 paths differ",
        "  ~ a.txt",
        "    --- a/a.txt",
        "    +++ b/a.txt",
        "    @@ -1 +1 @@",
        "    -old",
        "    +new",
        "  + b.bin (binary)",
    ]
    assert render.diff_text(res, PLAIN, stat=True).splitlines()[-2:] == [
        "  ~ a.txt | 2 +-",
        "  + b.bin | Bin",
    ]


def _n(topic: m.Topic, data: dict[str, object], seq: int = 42) -> m.Notification:
    return m.Notification(subscription="s1", topic=topic, seq=seq, data=data)


def test_notification_lines_per_topic():
    line = render.notification_line
    rec = _n("records", {"kind": "turn.ended", "agent": "ada", "branch": 0})
    assert line(rec, PLAIN) == "    42  records      turn.ended ada  (branch 0)"
    reset = _n("records", {"kind": "rewind", "agent": None, "branch": 43}, 43)
    assert line(reset, PLAIN).endswith("records      rewind  (branch 43)")
    gen = _n(
        "generations",
        {"kind": "turn", "agent": "ada", "branch": 0, "label": "turn 1", "created_at": 1.0},
    )
    assert line(gen, PLAIN).endswith("generations  turn generation of ada: turn 1")
    rw = _n(
        "rewinds",
        {
            "mode": "fork_switch",
            "reset_seq": 43,
            "target": 5,
            "branch": 43,
            "cancelled": [{"agent": "ada", "turn_id": "t3"}],
        },
        43,
    )
    assert line(rw, PLAIN).endswith(
        "rewinds      switched to seq 5, now on branch 43, cancelled 1 turn"
    )
    assert line(_n("agents", {"agent": "bo", "status": "created"}), PLAIN).endswith(
        "agents       agent bo created"
    )
    # A shape this version does not know is still shown, as key=value.
    odd = _n("rewinds", {"mode": "undo", "target": 5})
    assert line(odd, PLAIN).endswith("rewinds      mode=undo target=5")


def test_truncate_and_durations():
    assert render.truncate("abcdef", 4) == "abc…"
    assert render.truncate("ab", 4) == "ab"
    assert render.format_duration(42) == "42s"
    assert render.format_duration(192) == "3m12s"
    assert render.format_duration(7500) == "2h05m"
    assert render.format_duration(2 * 86400 + 3 * 3600) == "2d03h"


def test_status_text():
    st = m.StatusResult(head=12, branch=11, version="0.1.0", pid=99, uptime_s=65, socket="/s.sock")
    lines = render.status_text(st, PLAIN).splitlines()
    assert lines[0] == "daemon       reynd 0.1.0, pid 99, protocol 1"
    assert lines[1] == "head         seq 12 on branch 11"
    assert "uptime       1m05s" in lines
    assert lines[-1] == "socket       /s.sock"


# -- the agent runtime ---------------------------------------------------------------------


def _info(**kw: object) -> a.AgentInfo:
    base: dict[str, object] = {
        "name": "ada",
        "session": "default",
        "executor": "builtin",
        "options": {},
        "status": "idle",
        "created_seq": 1,
        "applied_seq": 9,
        "inbox": 0,
    }
    return a.AgentInfo(**{**base, **kw})  # type: ignore[arg-type]


AMBIGUOUS = a.AmbiguousStep(agent="ada", turn_id="t2", step=0, input={}, started_seq=4)


def test_a_right_aligned_last_column_is_padded():
    out = render.table(["A", "N"], [["x", "5"], ["y", "123"]], PLAIN, align="lr")
    assert out.splitlines() == ["A    N", "x    5", "y  123"]


def test_agents_table_aligns_counters_and_lists_what_agents_need():
    res = a.AgentsListResult(
        agents=[
            _info(executor_calls=13, turns_completed=3),
            _info(
                name="bob",
                status="ambiguous",
                turn_id="t2",
                step=0,
                ambiguous=AMBIGUOUS,
                executor_calls=1,
            ),
            _info(name="cy", status="waiting", turn_id="t7", step=0, waiting_for="t7.s0"),
        ]
    )
    lines = render.agents_table(res, PLAIN).splitlines()
    assert lines[0] == "AGENT  SESSION  EXECUTOR  STATUS     TURN  STEP  INBOX  TURNS  CALLS"
    assert lines[1] == "ada    default  builtin   idle       -        -      0      3     13"
    assert lines[2] == "bob    default  builtin   ambiguous  t2       0      0      0      1"
    assert lines[4] == ""
    assert "reynctl resolve bob retry|skip|abort" in lines[5]
    assert lines[6].endswith("reynctl answer cy t7.s0 TEXT")
    assert "no agents" in render.agents_table(a.AgentsListResult(agents=[]), PLAIN)


def test_status_puts_ambiguous_steps_with_their_command():
    st = m.StatusResult(head=4, branch=0, version="0.1.0", pid=1, ambiguous=[AMBIGUOUS])
    out = render.status_text(st, PLAIN)
    assert "! 1 ambiguous step: started before a crash" in out
    assert "ada    turn t2  step 0  started at seq 4  reynctl resolve ada retry|skip|abort" in out
    assert "ambiguous" not in render.status_text(
        m.StatusResult(head=4, branch=0, version="0.1.0", pid=1), PLAIN
    )
    assert "\x1b[31;1m! 1 ambiguous" in render.status_text(st, COLOR)


def test_send_text_by_outcome():
    done = a.AgentsSendResult(
        message_id="m1", seq=3, turn_id="t3", boundary_seq=11, outcome="completed", reply="hi"
    )
    assert render.send_text(done, PLAIN, waited=300).splitlines() == [
        "turn      t3 (message m1 at seq 3)",
        "outcome   completed",
        "boundary  seq 11 (turn.ended)",
        "reply     hi",
    ]
    pending = a.AgentsSendResult(message_id="m1", seq=3, turn_id="t3")
    assert "queued" in render.send_text(pending, PLAIN, waited=None)
    assert "still in flight after 2.5s" in render.send_text(pending, PLAIN, waited=2.5)


def test_act_turn_text_counts():
    res = a.ActTurnRewindResult(
        reset_seq=58, target=22, branch=58, turn_id="t12", ghost_replayed=3, rerun=1
    )
    out = render.act_turn_text(res, "ada", PLAIN)
    assert out.startswith("rewound ada to seq 22, inside turn t12: reset record 58")
    assert "ghost-replayed  3 steps" in out and "re-run          1 step " in out


# -- strings from the daemon cannot spoof output ------------------------------------------

SPOOF = "evil\nmallory  default  builtin  idle"


def test_a_newline_in_a_cell_cannot_add_a_row():
    res = a.AgentsListResult(agents=[_info(name=SPOOF), _info(name="bo", session="x\ry")])
    out = render.agents_table(res, PLAIN)
    lines = out.splitlines()
    assert len(lines) == 3, out  # the header and one line per agent
    assert lines[1].split()[0] == "evil\\nmallory"
    assert lines[2].split()[1] == "x\\ry"
    # Columns are measured on the escaped text: still aligned.
    assert lines[0].index("SESSION") == lines[2].index("x\\ry")


def test_control_characters_are_escaped_in_every_renderer():
    nasty = "a\x1b[2J\x00\t\x9b\u202eb"
    shown = "a\\x1b[2J\\x00\\t\\x9b\\u202eb"
    assert render.printable(nasty) == shown
    assert render.printable("plain é ✓") == "plain é ✓"
    table = render.table(["X"], [[nasty]], PLAIN)
    assert table.splitlines() == ["X", shown]
    # key/value lines: the value is escaped, its colour still applied.
    colored = render.agent_text(_info(name=SPOOF, waiting_for="q\n1"), COLOR)
    assert "\x1b[2J" not in colored and "evil\\nmallory" in colored
    assert "\x1b[33mq\\n1\x1b[0m" in colored
    plain = render.agent_text(_info(name=SPOOF), PLAIN)
    assert [line.split("  ")[0] for line in plain.splitlines()].count("agent") == 1
    gens = m.GenerationsResult(
        generations=[
            m.Generation(
                seq=3, kind="turn", agent="ada", active=True, branch=0, created_at=0.0, label=SPOOF
            )
        ]
    )
    assert len(render.generations_table(gens, PLAIN).splitlines()) == 2
    # One-line renderers: truncated text and watch lines.
    assert render.truncate("x\ry\x1bz", 20) == "x\\ry\\x1bz"
    note = _n("agents", {"agent": SPOOF, "status": "created"})
    assert len(render.notification_line(note, PLAIN).splitlines()) == 1

"""`reynctl tui` driven headless by textual's Pilot against a real `reynd serve`.

pytest runs in trio mode, and textual needs asyncio: each test is a plain
synchronous function that runs its scenario with `asyncio.run`. Blocking
calls to the daemon (tests/harness.py) go through `asyncio.to_thread` so the
app keeps running meanwhile. Waiting is polling with a deadline (Pilot's
`pause` between looks), never a bare sleep.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Log, OptionList, Static

from reynctl.tui.app import ReyndTui
from reynctl.tui.confirm import ConfirmScreen
from reynctl.tui.main_screen import MainScreen
from reynctl.tui.picker import PickerScreen
from tests.harness import Daemon, start_daemon

DOCS = Path(__file__).resolve().parent.parent / "docs"
# The picker's screenshot in docs/ is refreshed only when asked (its SVG ids
# are random: writing it on every run dirtied the checkout).
SCREENSHOT_ENV = "REYN_UPDATE_SCREENSHOTS"
SIZE = (150, 40)
DEADLINE = 15.0


# -- helpers -------------------------------------------------------------------------


def screen_text(screen: Screen[Any]) -> str:
    """What a screen shows: its static texts, option lists and logs, as plain text."""
    parts: list[str] = []
    for static in screen.query(Static):
        parts.append(str(static.content))
    for ol in screen.query(OptionList):
        parts += [str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)]
    for log in screen.query(Log):
        parts += list(log.lines)
    return "\n".join(parts)


def main_screen(app: ReyndTui) -> MainScreen:
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))


async def until(pilot: Pilot[None], cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not cond():
        if time.monotonic() > deadline:
            app = pilot.app
            raise AssertionError(
                f"timed out waiting for {what}; screen:\n{screen_text(app.screen)}"
            )
        await pilot.pause(0.02)


def shows(app: ReyndTui, *needles: str, main: bool = False) -> bool:
    assert isinstance(app, ReyndTui)
    text = screen_text(main_screen(app) if main else app.screen)
    return all(n in text for n in needles)


def option_ids(app: ReyndTui, selector: str) -> list[str]:
    ol = app.screen.query_one(selector, OptionList)
    return [str(ol.get_option_at_index(i).id) for i in range(ol.option_count)]


def main_ids(app: ReyndTui) -> list[str]:
    ol = main_screen(app).query_one("#timeline", OptionList)
    return [str(ol.get_option_at_index(i).id) for i in range(ol.option_count)]


def highlighted(app: ReyndTui) -> str | None:
    opt = app.screen.query_one("#picker-list", OptionList).highlighted_option
    return None if opt is None else opt.id


async def move_to(pilot: Pilot[None], option_id: str) -> None:
    """Arrow keys until `option_id` is highlighted (the picker starts at the tip)."""
    app = pilot.app
    assert isinstance(app, ReyndTui)
    await until(pilot, lambda: option_id in option_ids(app, "#picker-list"), option_id)
    ids = option_ids(app, "#picker-list")
    for _ in range(len(ids) * 2):
        current = highlighted(app)
        if current == option_id:
            return
        here = ids.index(current) if current in ids else 0
        await pilot.press("down" if ids.index(option_id) > here else "up")
    raise AssertionError(f"could not reach {option_id}; at {highlighted(app)}")


async def open_picker(pilot: Pilot[None]) -> None:
    await pilot.press("escape", "escape")
    await until(pilot, lambda: isinstance(pilot.app.screen, PickerScreen), "the picker")


async def call(daemon: Daemon, method: str, params: Any = None) -> Any:
    return await asyncio.to_thread(daemon.call, method, params)


def two_turns(daemon: Daemon, agent: str = "a") -> tuple[int, int]:
    """An agent with two finished turns; their boundary (generation) seqs."""
    daemon.call("agents.create", {"name": agent})
    g1 = daemon.call("agents.send", {"agent": agent, "text": "hello", "wait": True})
    g2 = daemon.call("agents.send", {"agent": agent, "text": "again", "wait": True})
    return int(g1["boundary_seq"]), int(g2["boundary_seq"])


def history(daemon: Daemon, seq: int | None = None, agent: str = "a") -> list[Any]:
    state = daemon.call("state.get", {"seq": seq, "agent": agent})
    return list(state["agents"][agent]["history"])


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


async def connected(pilot: Pilot[None], *seqs: int) -> None:
    app = pilot.app
    assert isinstance(app, ReyndTui)
    await until(
        pilot,
        lambda: app.conn_state == "connected" and all(f"n{s}" in main_ids(app) for s in seqs),
        f"the timeline with {seqs}",
    )


# -- tests ---------------------------------------------------------------------------


def test_picker_undo_then_fork_switch(daemon: Daemon, tmp_path: Path) -> None:
    shots = DOCS if os.environ.get(SCREENSHOT_ENV) else tmp_path
    g1, g2 = two_turns(daemon)
    at_g1, at_g2 = history(daemon, g1), history(daemon, g2)

    async def scenario() -> None:
        app = ReyndTui(daemon.socket)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            # Esc cancels without change.
            await open_picker(pilot)
            await move_to(pilot, f"n{g1}")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
            assert (await call(daemon, "daemon.status"))["head"] == app.head

            # Undo: back to the first turn.
            await open_picker(pilot)
            await move_to(pilot, f"n{g1}")
            await until(pilot, lambda: shows(app, f"as of seq {g1}", "diff to the tip"), "preview")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            assert shows(app, f"undo: seq {g1}", f"reynctl checkout {g1}")
            await pilot.press("enter")
            await until(
                pilot,
                lambda: isinstance(app.screen, MainScreen) and shows(app, "undo: rewound to seq"),
                "the undo banner",
            )
            status = await call(daemon, "daemon.status")
            reset = status["head"]
            assert status["branch"] == reset > g2
            assert await asyncio.to_thread(history, daemon) == at_g1
            await until(pilot, lambda: app.node_at(reset) is not None, "the reset on screen")
            node = app.node_at(reset)
            assert node is not None and node.here
            abandoned = app.node_at(g2)
            assert abandoned is not None and not abandoned.active
            assert shows(app, "◀ you are here", "abandoned")

            # Fork switch: back to the abandoned second turn (the first one's steps shown).
            await open_picker(pilot)
            await move_to(pilot, f"n{g1}")
            await pilot.press("right")
            await until(pilot, lambda: "step 2" in screen_text(app.screen), "the steps")
            await move_to(pilot, f"n{g2}")
            await until(pilot, lambda: shows(app, f"as of seq {g2}", "abandoned"), "preview")
            app.save_screenshot("tui-picker.svg", str(shots))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            assert shows(app, f"fork switch: seq {g2}", "abandoned branch")
            await pilot.press("y")
            await until(
                pilot,
                lambda: (
                    isinstance(app.screen, MainScreen)
                    and shows(app, "fork switch: switched to the abandoned branch")
                ),
                "the fork-switch banner",
            )
            status = await call(daemon, "daemon.status")
            assert status["branch"] == status["head"] > reset
            assert await asyncio.to_thread(history, daemon) == at_g2

    run(scenario)
    assert (shots / "tui-picker.svg").read_text().lstrip().startswith("<svg")


def test_rewind_by_another_client_appears_live(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)

    async def scenario() -> None:
        app = ReyndTui(daemon.socket)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            resyncs = app.resyncs
            # A second connection, not the TUI's, rewinds.
            result = await call(daemon, "rewind", {"seq": g1})
            reset = result["reset_seq"]
            await until(
                pilot,
                lambda: (
                    f"n{reset}" in main_ids(app)
                    and getattr(app.node_at(reset), "kind", None) == "reset"
                    and shows(app, f"another client rewound to seq {g1}")
                ),
                "the other client's rewind",
            )
            node = app.node_at(reset)
            assert node is not None and node.here and node.kind == "reset"
            assert shows(app, f"head {reset} on branch {reset}")
            # ... and its new turn: a generation on the new branch, no refresh needed.
            sent = await call(daemon, "agents.send", {"agent": "a", "text": "more", "wait": True})
            g3 = sent["boundary_seq"]
            await until(pilot, lambda: f"n{g3}" in main_ids(app), "the new generation")
            new = app.node_at(g3)
            assert new is not None and new.here and new.parent == reset
            assert app.resyncs == resyncs, "followed by notifications, not by re-reading"

    run(scenario)


def test_act_turn_steps_and_a_refused_rewind(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)
    steps = daemon.call("state.get", {"seq": g1 - 1, "agent": "a"})["agents"]["a"]
    memos = steps["pending_chains"][0]["steps"]
    first = memos[0]["seq"]

    async def scenario() -> None:
        app = ReyndTui(daemon.socket)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            head = app.head
            # The tip itself: the daemon refuses (nothing to do), the picker says why.
            await open_picker(pilot)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            await pilot.press("enter")
            await until(
                pilot,
                lambda: shows(app, "refused by the daemon", "nothing_to_do", "nothing changed"),
                "the refusal",
            )
            assert isinstance(app.screen, PickerScreen)
            assert (await call(daemon, "daemon.status"))["head"] == head

            # Expand the first turn's act-steps and rewind to just after step 0.
            await move_to(pilot, f"n{g1}")
            await pilot.press("right")
            await until(pilot, lambda: f"s{first}" in option_ids(app, "#picker-list"), "steps")
            assert all(f"s{m['seq']}" in option_ids(app, "#picker-list") for m in memos)
            await move_to(pilot, f"s{first}")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            assert shows(app, f"act-turn rewind: seq {first}", f"act-turn-rewind a {first}")
            await pilot.press("enter")
            await until(
                pilot,
                lambda: (
                    isinstance(app.screen, MainScreen)
                    and shows(app, "act-turn rewind: a's turn", "1 step(s) replayed from memos")
                ),
                "the act-turn banner",
            )
            status = await call(daemon, "daemon.status")
            assert status["head"] > head and status["branch"] > g2
            # The turn re-runs its later steps in the daemon and ends again: seen live.
            await until(
                pilot,
                lambda: any(n.kind == "turn" and n.seq > status["branch"] for n in app.nodes),
                "the replayed turn's new generation",
            )
            info = await call(daemon, "agents.get", {"agent": "a"})
            assert info["ghost_replayed"] >= 1

    run(scenario)


def test_chat_sends_watches_and_cancels(daemon: Daemon) -> None:
    daemon.call("agents.create", {"name": "a"})
    daemon.call("agents.create", {"name": "slow", "options": {"delay": 30}})

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: shows(app, "agent a", "idle"), "the chat pane")
            await pilot.click("#chat-input")
            await pilot.press(*"hi there", "enter")
            await until(
                pilot,
                lambda: (
                    shows(app, "you → a: hi there", "step 0: → notes.lookup", "turn ended")
                    and shows(app, "a: [builtin demo executor, no model] You said: 'hi there'")
                ),
                "the turn, step by step",
            )
            # A slow turn, cancelled from the keyboard.
            await pilot.press("ctrl+n")
            await until(pilot, lambda: app.agent == "slow", "the slow agent")
            await pilot.press(*"wait", "enter")
            await until(
                pilot,
                lambda: app.agents["slow"].status == "running" and shows(app, "running"),
                "a turn in flight",
            )
            await pilot.press("ctrl+x")
            await until(pilot, lambda: shows(app, "cancelled turn"), "the cancel")
            info = await call(daemon, "agents.get", {"agent": "slow"})
            assert info["status"] != "running"
            state = await call(daemon, "state.get", {"agent": "slow"})
            assert state["agents"]["slow"]["pending_chains"] == []

    run(scenario)


def test_daemon_not_running_then_started_then_lost(short_tmp: Path) -> None:
    sock = short_tmp / "run" / "reynd.sock"

    async def scenario() -> None:
        app = ReyndTui(sock)
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: shows(
                    app, "reynd is not running", "reynd serve", "systemctl --user start reynd"
                ),
                "the not-running state",
            )
            assert app.conn_state in ("no_daemon",)
            d = await asyncio.to_thread(start_daemon, short_tmp)
            try:
                await until(pilot, lambda: shows(app, "connected to reynd"), "the connection")
            finally:
                await asyncio.to_thread(d.stop)
            await until(
                pilot, lambda: shows(app, "connection to reynd lost", "reconnecting"), "lost"
            )
            assert app.conn_state in ("lost",)

    run(scenario)


def test_tui_imports_no_trio_and_only_the_protocol() -> None:
    probe = (
        "import json, sys; import reynctl.tui, reynctl.aio; print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    modules = json.loads(out)
    assert "textual" in modules
    assert not [n for n in modules if n.split(".")[0] == "trio"]
    reynd = [n for n in modules if n == "reynd" or n.startswith("reynd.")]
    assert all(n in ("reynd", "reynd.protocol") or n.startswith("reynd.protocol.") for n in reynd)


def test_graph_of_the_worked_example() -> None:
    """docs/concepts.md: 1..10, rewind(5) -> 11, 12..15, checkout(8) -> 16."""
    from reynctl.tui.graph import build_nodes, layout
    from reynd.protocol import methods as m

    branches = [
        m.BranchInfo(id=0, origin_seq=0, parent=None, tip=10, active=False),
        m.BranchInfo(id=11, origin_seq=5, parent=0, tip=15, active=False),
        m.BranchInfo(id=16, origin_seq=8, parent=0, tip=16, active=True),
    ]
    gens = [
        m.Generation(
            seq=s, kind="turn", agent="a", active=s <= 8, branch=0 if s <= 10 else 11, created_at=0
        )
        for s in (3, 5, 7, 9, 10, 12, 14)
    ]
    rows = layout(build_nodes(gens, branches, 16))
    drawn = [(r.graph, r.node.seq if r.node else None) for r in rows]
    assert drawn == [
        ("◉", 16),
        ("│ ○", 14),
        ("│ ○", 12),
        ("│ ○", 11),
        ("│ │ ○", 10),
        ("│ │ ○", 9),
        ("├─┼─┘", None),
        ("● │", 7),
        ("├─┘", None),
        ("●", 5),
        ("●", 3),
        ("●", 0),
    ]
    parents = {r.node.seq: r.node.parent for r in rows if r.node}
    assert parents[16] == 7 and parents[11] == 5 and parents[9] == 7 and parents[12] == 11

"""`reynctl tui` driven headless by textual's Pilot against a real `reynd serve`.

pytest runs in trio mode, and textual needs asyncio: each test is a plain
synchronous function that runs its scenario with `asyncio.run`. Blocking
calls to the daemon (tests/harness.py) go through `asyncio.to_thread` so the
app keeps running meanwhile. Waiting is polling with a deadline (Pilot's
`pause` between looks), never a bare sleep.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.app import App
from textual.command import CommandList, CommandPalette
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
    deadline = time.monotonic() + DEADLINE
    while not isinstance(pilot.app.screen, PickerScreen):
        if time.monotonic() > deadline:
            shown = screen_text(pilot.app.screen)
            raise AssertionError(f"the picker never opened; screen:\n{shown}")
        # Under load the two presses can fall further apart than the double press's
        # window: the first only showed the hint, so press once more, as a user would.
        if "press Esc again" in screen_text(pilot.app.screen):
            await pilot.press("escape")
        await pilot.pause(0.02)


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


def test_a_tag_shows_on_the_checkpoint_it_names(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)
    daemon.call("tags.set", {"name": "good", "seq": g1})

    async def scenario() -> None:
        app = ReyndTui(daemon.socket)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            node = app.node_at(g1)
            assert node is not None and node.tags == ("good",)
            assert shows(app, "[good] ", main=True)

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
            # The tip itself: a no-op, said so at once, with nothing to confirm.
            await open_picker(pilot)
            assert highlighted(app) == f"n{head}"
            await pilot.press("enter")
            await until(
                pilot,
                lambda: shows(app, f"seq {head} is already the tip", "nothing to do"),
                "the no-op",
            )
            assert isinstance(app.screen, PickerScreen)
            assert not shows(app, f"moves back from seq {head} to seq {head}")
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


# -- issue 13: header, chat history, 80x24, palette, diff order, the tip ------------------


def screen_lines(app: ReyndTui) -> list[str]:
    """The terminal as drawn, line by line (what a user sees, wrapping included)."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text().splitlines()


def chat_lines(app: ReyndTui) -> list[str]:
    return list(main_screen(app).query_one("#chat-log", Log).lines)


def said(app: ReyndTui, start: str) -> bool:
    """Whether a chat line starts with `start`."""
    return any(line.startswith(start) for line in chat_lines(app))


def agent_header(app: ReyndTui) -> str:
    return str(main_screen(app).query_one("#agent-status", Static).content)


def test_agent_header_shows_the_turn_count_as_of_the_new_head(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            await until(pilot, lambda: "· 2 turns" in agent_header(app), "two turns")
            # Another client rewinds: the header counts as of the reset, not as before.
            await call(daemon, "rewind", {"seq": g1})
            await until(pilot, lambda: "· 1 turn " in agent_header(app) + " ", "one turn")
            # The TUI's own fork switch back to the second turn.
            await open_picker(pilot)
            await move_to(pilot, f"n{g2}")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            await pilot.press("enter")
            await until(pilot, lambda: "· 2 turns" in agent_header(app), "two turns again")
            info = await call(daemon, "agents.get", {"agent": "a"})
            assert info["turns_completed"] == 2

    run(scenario)


def test_chat_shows_history_and_separates_what_a_rewind_abandoned(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)
    daemon.call("agents.create", {"name": "b"})
    daemon.call("agents.send", {"agent": "b", "text": "bonjour", "wait": True})
    memos = daemon.call("state.get", {"seq": g2 - 1, "agent": "a"})["agents"]["a"][
        "pending_chains"
    ][0]["steps"]
    first = memos[0]["seq"]
    reply = "a: [builtin demo executor, no model] You said: 'again'"

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            await until(
                pilot,
                lambda: all(said(app, s) for s in ("you: hello", "you: again", reply)),
                "a's history at start",
            )
            # Switching agents shows the other one's history, and back.
            await pilot.press("ctrl+n")
            await until(
                pilot,
                lambda: "you: bonjour" in chat_lines(app) and "you: hello" not in chat_lines(app),
                "b's history",
            )
            await pilot.press("ctrl+n")
            await until(pilot, lambda: said(app, reply), "a's history again")
            before = chat_lines(app)
            # Another client rewinds a's second turn to just after its first act-step: the
            # turn continues (step 0 replayed from its memo, steps 1.. run again).
            await call(daemon, "act_turn.rewind", {"agent": "a", "seq": first})

            def separated() -> bool:
                lines = chat_lines(app)
                sep = [i for i, line in enumerate(lines) if f"rewound to seq {first}" in line]
                return bool(sep) and any("turn ended" in x for x in lines[sep[0] :])

            await until(pilot, separated, "a separator, then the continued turn")
            lines = chat_lines(app)
            sep = next(i for i, line in enumerate(lines) if f"rewound to seq {first}" in line)
            assert lines[: len(before)] == before  # what was shown stays, above the line
            assert sep >= len(before)
            assert "abandoned" in " ".join(lines[sep : sep + 2])
            after = lines[sep:]
            assert any("step 0" in x and "replayed" in x for x in after), after
            assert any("step 1:" in x for x in after), after
            assert after.index(next(x for x in after if "turn ended" in x)) > 0

    run(scenario)


def test_nothing_wraps_at_80_by_24(daemon: Daemon) -> None:
    daemon.call("agents.create", {"name": "a"})
    long = "a first message far too long for its label to fit in a timeline row at 80 columns"
    g1 = daemon.call("agents.send", {"agent": "a", "text": long, "wait": True})["boundary_seq"]
    g2 = daemon.call("agents.send", {"agent": "a", "text": "again", "wait": True})["boundary_seq"]
    reset = daemon.call("rewind", {"seq": g1})["reset_seq"]

    def one_row_each(app: ReyndTui, selector: str) -> None:
        ol = app.screen.query_one(selector, OptionList)
        assert ol.virtual_size.height == ol.option_count, "an option took more than one row"

    def row_of(lines: list[str], seq: int, width: int) -> str:
        """The row of `seq` in the list, `width` cells wide (the chat / preview beside it)."""
        found = [line[:width] for line in lines[1:] if f" {seq:>5} " in line[:width]]
        assert len(found) == 1, (seq, lines)
        return found[0]

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=(80, 24)) as pilot:
            await connected(pilot, g1, g2, reset)
            await until(pilot, lambda: said(app, "you: a first"), "the chat")
            one_row_each(app, "#timeline")
            for name in ("#conn", "#agent-status", "#banner"):
                assert app.screen.query_one(name).size.height == 1, name
            lines = screen_lines(app)
            assert f"head {reset}" in lines[0]
            width = app.screen.query_one("#timeline").size.width
            tip, old, gone = (row_of(lines, seq, width) for seq in (reset, g1, g2))
            assert "◉" in tip and "◀" in tip
            assert "●" in old and "…" in old and long[:8] in old
            assert "○" in gone and "again" in gone

            await open_picker(pilot)
            await move_to(pilot, f"n{g1}")
            await until(pilot, lambda: shows(app, f"as of seq {g1}"), "the preview")
            one_row_each(app, "#picker-list")
            preview = app.screen.query_one("#preview", Static)
            text_lines = str(preview.content).splitlines()
            # The preview wraps rather than cuts (issue 25; tests/test_tui_keys.py).
            assert preview.size.height >= len(text_lines)
            assert app.screen.query_one("#picker-title").size.height == 1
            assert "…" in "\n".join(screen_lines(app))

    run(scenario)


def test_command_palette_offers_the_tui_commands(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)
    daemon.call("agents.create", {"name": "b"})

    async def command(pilot: Pilot[None], query: str, expect: str) -> None:
        app: App[Any] = pilot.app  # CommandPalette.is_open takes an App[object]
        await pilot.press("ctrl+p")
        await until(pilot, lambda: CommandPalette.is_open(app), "the palette")
        await pilot.press(*query)

        def listed() -> list[str]:
            ol = app.screen.query_one(CommandList)
            return [str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)]

        await until(pilot, lambda: any(expect in p for p in listed()), f"{expect!r} listed")
        hits = listed()
        await pilot.press(*["down"] * [expect in p for p in hits].index(True), "enter")
        await until(pilot, lambda: not CommandPalette.is_open(app), "the palette closed")

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            await command(pilot, "switch agent b", "switch agent: b")
            await until(pilot, lambda: app.agent == "b", "agent b")
            resyncs = app.resyncs
            await command(pilot, "refresh", "refresh")
            await until(pilot, lambda: app.resyncs > resyncs, "a refresh")
            await command(pilot, "rewind picker", "rewind picker")
            await until(pilot, lambda: isinstance(app.screen, PickerScreen), "the picker")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
            await command(pilot, f"rewind to seq {g1}", f"rewind to seq {g1}")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            assert shows(app, f"undo: seq {g1}", f"reynctl checkout {g1}")
            await pilot.press("enter")
            await until(pilot, lambda: shows(app, "undo: rewound to seq", main=True), "undone")
            assert await asyncio.to_thread(history, daemon) == await asyncio.to_thread(
                history, daemon, g1
            )
            await until(pilot, lambda: app.node_at(g2) is not None, "g2 on screen")
            await command(pilot, f"checkout seq {g2}", f"checkout seq {g2}")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            assert shows(app, f"fork switch: seq {g2}")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "cancelled")

    run(scenario)


def test_preview_diff_spans_the_conversation_the_state_and_the_files(wd: Daemon, ws: Path) -> None:
    """The picker's diff to the tip is `reynctl diff`'s (issue 27): the messages added
    since the selected checkpoint, in their order, the state in words, the files."""
    wd.call("agents.create", {"name": "a"})
    seqs = []
    for i in range(3):
        (ws / "notes.txt").write_text(f"turn {i}\n")
        reply = wd.call("agents.send", {"agent": "a", "text": f"turn {i}", "wait": True})
        seqs.append(reply["boundary_seq"])

    async def scenario() -> None:
        app = ReyndTui(wd.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, *seqs)
            await open_picker(pilot)
            await move_to(pilot, f"n{seqs[0]}")
            await until(pilot, lambda: shows(app, "diff to the tip", "notes.txt"), "the diff")
            text = str(app.screen.query_one("#preview", Static).content)
            diff = text[text.index("diff to the tip") :]
            assert diff.index("+ user       turn 1") < diff.index("+ user       turn 2")
            assert "turns completed" in diff and "/history/" not in diff
            assert "-turn 0" in diff and "+turn 2" in diff  # notes.txt, as a unified diff

    run(scenario)


def test_timeline_rows_fit_their_width() -> None:
    """Each row is sized to the cells it gets: the label shrinks, then the clock goes."""
    from reynctl.tui.graph import Node
    from reynctl.tui.timeline import node_prompt

    label = "a label much longer than any timeline row could show " * 3
    nodes = [
        Node(seq=157, kind="turn", active=True, branch=0, agent="ada", label=label, here=True),
        Node(seq=12, kind="turn", active=False, branch=11, agent="ada", label=label, created_at=1),
        Node(seq=9, kind="plan_step", active=True, branch=0, agent="bo", label=label),
    ]
    for node in nodes:
        fixed = node_prompt(node, "│ ○", 3, 0).cell_len - 1  # the row with a 1-cell label
        for width in range(fixed + 1, 160):
            prompt = node_prompt(node, "│ ○", 3, width)
            assert prompt.cell_len <= width, (node.seq, width, prompt.plain)
            assert "…" in prompt.plain
        wide = node_prompt(node, "│ ○", 3, 150).plain
        assert ("◀ you are here" in wide) == node.here
        assert ("abandoned" in wide) == (not node.active)

"""The TUI's keys and commands (issue 25): `/rewind`, `?`, `q`, and what the picker offers.

Driven as tests/test_tui.py drives it: the real app under textual's Pilot
against a real `reynd serve`.
"""

from __future__ import annotations

from textual.widgets import Input, OptionList, Static

from reynctl.tui.app import ReyndTui
from reynctl.tui.help import HelpScreen
from reynctl.tui.main_screen import MainScreen
from reynctl.tui.picker import PickerScreen
from tests.harness import Daemon
from tests.test_tui import (
    SIZE,
    call,
    chat_lines,
    connected,
    highlighted,
    move_to,
    open_picker,
    option_ids,
    run,
    screen_lines,
    shows,
    two_turns,
    until,
)

PICKER = "#picker-list"


def test_slash_rewind_in_the_chat_opens_the_picker(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            head = (await call(daemon, "daemon.status"))["head"]
            await pilot.click("#chat-input")
            await pilot.press(*"/rewind", "enter")
            await until(pilot, lambda: isinstance(app.screen, PickerScreen), "the picker")
            # Not a message: the agent got nothing, the log says nothing was sent.
            assert (await call(daemon, "daemon.status"))["head"] == head
            assert not any("/rewind" in line and "you →" in line for line in chat_lines(app))

    run(scenario)


def test_question_mark_helps_and_q_quits_outside_the_chat_input(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            chat = app.screen.query_one("#chat-input", Input)
            # In the chat input, both are text.
            await pilot.click("#chat-input")
            await pilot.press("question_mark", "q")
            assert chat.value == "?q" and isinstance(app.screen, MainScreen)
            chat.clear()
            # Elsewhere (the timeline focused), ? is help and q quits.
            app.screen.query_one("#timeline").focus()
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
            assert shows(app, "Esc Esc", "/rewind", "ctrl+q")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "back")
            await pilot.press("q")
            await until(pilot, lambda: app.return_code is not None, "the app to quit")

    run(scenario)


def test_picker_never_offers_an_act_turn_rewind_on_an_abandoned_step(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)
    reset = daemon.call("rewind", {"seq": g1})["reset_seq"]  # g2's turn is now abandoned

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2, reset)
            await open_picker(pilot)
            await move_to(pilot, f"n{g2}")
            await pilot.press("right")
            await until(
                pilot, lambda: any(i.startswith("s") for i in option_ids(app, PICKER)), "steps"
            )
            ol = app.screen.query_one(PICKER, OptionList)
            steps = [ol.get_option(i) for i in option_ids(app, PICKER) if i.startswith("s")]
            assert steps and all(opt.disabled for opt in steps)
            assert shows(app, "abandoned turn", f"checkout {g2}")
            # The keys never reach them: down from the turn goes past its steps.
            await pilot.press("down")
            assert not str(highlighted(app)).startswith("s")

    run(scenario)


def test_more_turns_counts_turns_not_checkpoints(daemon: Daemon) -> None:
    g1, _ = two_turns(daemon)
    # A plan turn cuts a generation per plan step as well as its turn's.
    plan = daemon.call("agents.send", {"agent": "a", "text": "/plan x; y; z", "wait": True})
    gens = daemon.call("generations.list", {"all_branches": True})["generations"]
    after = [g for g in gens if g["seq"] > g1]
    assert len(after) > 2, after  # more checkpoints than turns: the count can tell them apart
    daemon.call("rewind", {"seq": g1})  # the second turn and the plan turn are abandoned

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, int(plan["boundary_seq"]))
            await until(pilot, lambda: any("more turn" in x for x in chat_lines(app)), "the count")
            line = next(x for x in chat_lines(app) if "more turn" in x)
            assert line.startswith("(2 more turns of a on abandoned branches"), line

    run(scenario)


def test_preview_and_messages_are_readable_at_80_by_24(daemon: Daemon) -> None:
    daemon.call("agents.create", {"name": "a"})
    long = "a message far longer than the preview pane is wide, " * 3 + "TAIL-END"
    g1 = daemon.call("agents.send", {"agent": "a", "text": long, "wait": True})["boundary_seq"]
    g2 = daemon.call("agents.send", {"agent": "a", "text": "again", "wait": True})["boundary_seq"]
    refusal = (
        "nothing changed, refused by the daemon: seq 3 is below the retention floor 40, "
        "the oldest seq still rewindable; raise the retention or pick a later seq "
        "(below_floor, -32003) END-OF-ERROR"
    )

    async def scenario() -> None:
        app = ReyndTui(daemon.socket, agent="a")
        async with app.run_test(size=(80, 24)) as pilot:
            await connected(pilot, g1, g2)
            app.set_banner(refusal)
            await until(pilot, lambda: "END-OF-ERROR" in "".join(screen_lines(app)), "banner")
            await open_picker(pilot)
            await move_to(pilot, f"n{g1}")
            await until(pilot, lambda: shows(app, f"as of seq {g1}"), "the preview")

            def wrapped() -> bool:
                """The whole message, wrapped within the pane (once laid out: the size
                follows the content by a refresh, later under load)."""
                preview = app.screen.query_one("#preview", Static)
                text = str(preview.content)
                pane = app.screen.query_one("#preview-pane")
                return (
                    "TAIL-END" in text  # the whole message, not cut
                    and preview.size.width <= pane.size.width  # no line beyond the pane
                    and preview.size.height > len(text.splitlines())  # so some lines wrapped
                )

            await until(pilot, wrapped, "the whole message wrapped in the preview pane")
            picker = app.screen
            assert isinstance(picker, PickerScreen)
            picker.message(refusal)
            await until(pilot, lambda: "END-OF-ERROR" in "".join(screen_lines(app)), "message")

    run(scenario)

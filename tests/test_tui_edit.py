"""The picker's "edit this message" (issue 25), driven by textual's Pilot against a real daemon;
and a workspace-only restore by another client, told as such (the conversation goes on).

`e` on a turn opens the message that started it, its old text in an input;
Enter does what `reynctl edit` does (checkout SEQ-1 with the new message in
the reset record's atomic batch); Esc and an empty text change nothing.
"""

from __future__ import annotations

import asyncio

from textual.widgets import Input

from reynctl.tui.app import ReyndTui
from reynctl.tui.edit import EditScreen
from reynctl.tui.main_screen import MainScreen
from reynctl.tui.picker import PickerScreen
from tests.harness import Daemon
from tests.runtime_helpers import records
from tests.test_tui import SIZE, call, connected, move_to, open_picker, run, shows, two_turns, until


def test_edit_this_message_replaces_it_in_one_atomic_batch(daemon: Daemon) -> None:
    g1, g2 = two_turns(daemon)
    (second,) = records(daemon, kind="message.received", text="again")

    async def scenario() -> None:
        app = ReyndTui(daemon.socket)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            await open_picker(pilot)
            await move_to(pilot, f"n{g2}")
            # Esc in the editor: nothing changes.
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, EditScreen), "the editor")
            assert app.screen.query_one("#edit-input", Input).value == "again"
            assert shows(app, f"the message to a at seq {second['seq']}")
            # What the edit abandons and cannot undo, as the confirm of any move says it.
            await until(
                pilot,
                lambda: shows(app, "not undone:") and not shows(app, "asking the daemon"),
                "the dry run's line",
            )
            await pilot.press("escape")
            await until(pilot, lambda: shows(app, "cancelled: nothing changed"), "cancelled")
            # An empty text: nothing changes either.
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, EditScreen), "the editor")
            app.screen.query_one("#edit-input", Input).value = "  "
            await pilot.press("enter")
            await until(pilot, lambda: shows(app, "the message is empty"), "refused")
            head = (await call(daemon, "daemon.status"))["head"]
            assert head == app.head

            # The old text prefilled: edit it and send.
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, EditScreen), "the editor")
            box = app.screen.query_one("#edit-input", Input)
            box.value = "again, but shorter"
            await pilot.press("enter")
            await until(
                pilot,
                lambda: isinstance(app.screen, MainScreen) and shows(app, "edit: rewound to seq"),
                "the edit banner",
            )
            reset = next(r for r in await asyncio.to_thread(records, daemon, kind="rewind"))
            assert reset["target_n"] == second["seq"] - 1
            sent = await asyncio.to_thread(records, daemon, kind="message.received", after=head)
            assert [(m["seq"], m["text"]) for m in sent] == [
                (reset["seq"] + 1, "again, but shorter")
            ]

            # Not a turn (the genesis row): said, nothing opened.
            await open_picker(pilot)
            await move_to(pilot, "n0")
            await pilot.press("e")
            await until(pilot, lambda: shows(app, "only a turn's message can be edited"), "why")
            assert isinstance(app.screen, PickerScreen)

    run(scenario)


def test_a_workspace_only_restore_elsewhere_is_told_as_such(wd: Daemon) -> None:
    g1, g2 = two_turns(wd)

    async def scenario() -> None:
        app = ReyndTui(wd.socket, agent="a")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot, g1, g2)
            await call(wd, "checkout", {"seq": g1, "only": "workspace"})
            told = f"another client restored the workspace's files as of seq {g1}"
            chat = f"the workspace's files restored as of seq {g1}"
            await until(
                pilot,
                lambda: shows(app, told, chat, "the conversation goes on", main=True),
                "the banner and the chat line",
            )
            assert not shows(app, "now abandoned", main=True)

    run(scenario)

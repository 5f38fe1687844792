"""reynctl's command-line contract, end to end: usage errors, confirmations, examples.

- usage errors under `--json` are one JSON line on stderr, as the other errors;
- a negative SEQ says what a seq is (click would say "No such option");
- `rewind`, `checkout` and `act-turn-rewind` follow one confirmation rule:
  ask on a terminal, `--yes` for scripts, refuse off a terminal without it;
- a rewind says which agents run again at once (work pending at the target);
- `retention set` names the key and the type in its own words;
- `append --data -` reads stdin, and `append` lists the kinds;
- `reynctl completion SHELL`, and an example in `--help` of the main commands.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reynctl.cli import Options, cli
from reynd.protocol.appendable import KINDS
from tests.harness import Daemon
from tests.test_reynctl_cli import _completion, _env, _on_a_terminal, ok, reynctl, seed

# -- usage errors under --json -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "frobnicate"],
        ["--json", "--color", "purple", "status"],
        ["--json", "rewind", "five!"],
        ["rewind", "five!", "--json"],
        ["status", "--json", "--bogus"],
        ["--json", "generations", "--limit", "0"],
        ["--json", "append", "ada", "message.received", "--data", "{not json"],
        ["--json", "agents", "create", "ada", "--executor", "gpt"],
        ["--json", "checkout", "3"],  # no --yes, and stdin is not a terminal
        ["--json", "rewind", "3"],
    ],
)
def test_usage_errors_under_json_are_one_json_line(args: list[str], tmp_path: Path):
    proc = reynctl(*args, sock=tmp_path / "none.sock")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    err = json.loads(lines[0])["error"]
    assert err["code"] is None and err["name"] == "usage_error"
    assert err["message"] and "Usage:" not in err["message"]
    assert err["data"]["usage"].startswith("reynctl ")


def test_usage_errors_without_json_stay_text(tmp_path: Path):
    proc = reynctl("rewind", "five!", sock=tmp_path / "none.sock")  # no seq, no tag name
    assert proc.returncode == 2
    assert proc.stderr.startswith("Usage: reynctl rewind [OPTIONS] [SEQ]")
    assert "Error: Invalid value for '[SEQ]'" in proc.stderr  # optional: or --at, --back


# -- a negative SEQ ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "param"),
    [
        (["rewind", "-5", "--yes"], "'[SEQ]'"),
        (["checkout", "-5", "--yes"], "'[SEQ]'"),
        (["show", "-1"], "'[SEQ]'"),
        (["diff", "3", "-1"], "'TO'"),
        (["act-turn-rewind", "ada", "-2", "--yes"], "'SEQ'"),
        (["generations", "--cursor", "-5"], "'--cursor'"),
        (["append", "ada", "turn.ended", "--based-on", "-3"], "'--based-on'"),
    ],
)
def test_a_negative_seq_says_what_a_seq_is(args: list[str], param: str, tmp_path: Path):
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "none.sock"), *args])
    assert result.exit_code == 2, result.output
    assert "No such option" not in result.output
    assert f"Invalid value for {param}" in result.output, result.output
    assert "is not a seq" in result.output and "0 or above" in result.output
    assert "reynctl generations" in result.output  # where the seqs are


def test_an_unknown_option_is_still_named(tmp_path: Path):
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "x"), "rewind", "5", "--bogus"])
    assert result.exit_code == 2
    assert "No such option '--bogus'" in result.output


# -- one confirmation rule for rewind, checkout and act-turn-rewind -------------------------


@pytest.mark.parametrize(
    "args", [["rewind", "3"], ["checkout", "3"], ["act-turn-rewind", "ada", "3"]]
)
def test_moves_off_a_terminal_need_yes_before_connecting(args: list[str], tmp_path: Path):
    # CliRunner's stdin is not a terminal; the socket does not even exist.
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "none.sock"), *args])
    assert result.exit_code == 2, result.output
    assert "pass --yes" in result.output and "not a terminal" in result.output


def test_rewind_asks_on_a_terminal(daemon: Daemon):
    ends = seed(daemon.socket)
    head = daemon.call("daemon.status")["head"]
    declined = _on_a_terminal(daemon.socket, b"n\n", "rewind", str(ends[0]))
    assert declined.returncode == 1
    assert f"rewind to seq {ends[0]}" in declined.stderr
    assert "nothing changed" in declined.stderr
    assert f"reynctl checkout {head}" in declined.stderr  # names the way back
    assert daemon.call("daemon.status")["head"] == head

    # Declined under --json: the same exit, one JSON line.
    declined = _on_a_terminal(daemon.socket, b"n\n", "--json", "rewind", str(ends[0]))
    assert declined.returncode == 1 and declined.stdout == ""
    # (the answer typed is echoed by the terminal, not on the stderr pipe)
    assert json.loads(declined.stderr.rsplit("[y/N]: ", 1)[1])["error"]["name"] == "declined"

    accepted = _on_a_terminal(daemon.socket, b"y\n", "rewind", str(ends[0]))
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.startswith(f"rewound to seq {ends[0]}")
    assert daemon.call("daemon.status")["head"] == head + 1


def test_act_turn_rewind_asks_on_a_terminal(daemon: Daemon):
    ok(reynctl("agents", "create", "ada", sock=daemon.socket))
    ok(reynctl("send", "ada", "/plan a; b", sock=daemon.socket))
    gens = daemon.call("generations.list", {"kind": "plan_step"})["generations"]
    first = min(g["seq"] for g in gens)
    head = daemon.call("daemon.status")["head"]
    declined = _on_a_terminal(daemon.socket, b"n\n", "act-turn-rewind", "ada", str(first))
    assert declined.returncode == 1, declined.stderr
    assert f"act-turn rewind of ada to seq {first}" in declined.stderr
    assert f"reynctl checkout {head}" in declined.stderr
    assert daemon.call("daemon.status")["head"] == head


def test_a_rewind_says_which_agents_run_again_and_how_to_undo(daemon: Daemon):
    sock = daemon.socket
    ok(reynctl("agents", "create", "ada", sock=sock))
    ok(reynctl("send", "ada", "hello", sock=sock))
    second = json.loads(ok(reynctl("--json", "send", "ada", "/plan a; b", sock=sock)))
    message_seq = second["seq"]  # the message's record
    head = daemon.call("daemon.status")["head"]
    proc = reynctl("--color", "never", "rewind", str(message_seq), "--yes", sock=sock)
    lines = ok(proc).splitlines()
    assert lines[0].startswith(f"rewound to seq {message_seq}: reset record {head + 1}")
    assert lines[1] == (
        f"  ada runs again now: its message at seq {message_seq} was not taken yet: /plan a; b"
    )
    assert f"undo: reynctl checkout {head}" in proc.stderr

    # A seq inside the plan turn: the turn in flight there resumes.
    plan_steps = daemon.call("generations.list", {"kind": "plan_step", "all_branches": True})
    inside = min(g["seq"] for g in plan_steps["generations"])
    proc = reynctl("--color", "never", "checkout", str(inside), "--yes", sock=sock)
    assert ok(proc).splitlines()[1] == (
        f"  ada runs again now: turn {second['turn_id']} was in flight at seq {inside} "
        "(its committed steps replay from their memos)"
    )
    # Nothing pending at the first turn's end: nothing said.
    first_end = daemon.call("generations.list", {"kind": "turn", "all_branches": True})
    end = min(g["seq"] for g in first_end["generations"])
    assert len(ok(reynctl("rewind", str(end), "--yes", sock=sock)).splitlines()) == 1


# -- retention set, append ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        ("wal_keep_records=abc", "wal_keep_records must be a whole number of records"),
        ("wal_keep_records=1.5", "wal_keep_records must be a whole number of records"),
        ("snapshot_keep=-1", "snapshot_keep must be a whole number of snapshots"),
        ("gc_interval_s=soon", "gc_interval_s must be a number of seconds"),
        ("wal_keep_age_s=true", "wal_keep_age_s must be a number of seconds"),
    ],
)
def test_retention_set_names_the_key_and_the_type(pair: str, expected: str, tmp_path: Path):
    result = CliRunner().invoke(
        cli, ["--socket", str(tmp_path / "none.sock"), "retention", "set", pair]
    )
    assert result.exit_code == 2, result.output
    assert expected in result.output, result.output
    assert "0 or above" in result.output and "got " in result.output
    for msgspec_words in ("Expected", "`", "$."):
        assert msgspec_words not in result.output


def test_append_reads_data_from_stdin(daemon: Daemon):
    ok(reynctl("append", "ext", "agent.created", sock=daemon.socket))
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "reynctl", "--socket", str(daemon.socket), "--json"),
            *("append", "ext", "message.received", "--data", "-"),
        ],
        input='{"message_id": "m1", "text": "from stdin"}',
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    seq = json.loads(ok(proc))["seq"]
    inbox = daemon.call("state.get", {"seq": seq, "agent": "ext"})["agents"]["ext"]["inbox"]
    assert [i["text"] for i in inbox] == ["from stdin"]


def test_append_lists_the_kinds(daemon: Daemon):
    proc = reynctl("append", "ext", "bogus.kind", sock=daemon.socket)
    assert proc.returncode == 1
    assert all(kind in proc.stderr for kind in KINDS), proc.stderr
    help_text = CliRunner().invoke(cli, ["append", "--help"]).output
    assert all(kind in help_text for kind in KINDS), help_text


# -- completion ----------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_command_prints_the_script(shell: str):
    script = ok(reynctl("completion", shell))
    assert script == _completion({"_REYNCTL_COMPLETE": f"{shell}_source"})
    assert "_REYNCTL_COMPLETE" in script


def test_completion_of_another_shell_lists_the_ones_there_are():
    proc = reynctl("completion", "tcsh")
    assert proc.returncode == 2
    assert "'bash', 'zsh', 'fish'" in proc.stderr or "bash, zsh, fish" in proc.stderr


# -- examples in --help -------------------------------------------------------------------

# Every command of reynctl, and the everyday subcommands.
MAIN_COMMANDS = [*sorted(cli.commands), "agents create", "retention set"]


def _parse(argv: list[str]) -> None:
    """Parse a command line as reynctl would, down to its command, without running it."""
    group: click.Command = cli
    ctx = cli.make_context("reynctl", argv)
    ctx.obj = Options(socket=None, json=False, color="never", timeout=None)  # as cli() sets it
    while isinstance(group, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            return
        _name, cmd, rest = group.resolve_command(ctx, rest)
        assert cmd is not None
        ctx = cmd.make_context(cmd.name, rest, parent=ctx)
        group = cmd


@pytest.mark.parametrize("command", MAIN_COMMANDS)
def test_main_commands_show_examples_that_parse(command: str):
    out = CliRunner().invoke(cli, [*command.split(), "--help"], terminal_width=100).output
    assert "Examples:" in out, out
    examples = [
        line.strip()
        for line in out.split("Examples:", 1)[1].splitlines()
        if line.strip().startswith("reynctl ")
    ]
    assert any(f" {command}" in e for e in examples), examples
    for example in examples:
        words = shlex.shlex(example, posix=True, punctuation_chars=True)
        words.whitespace_split = True
        tokens = list(words)  # up to a pipe or a redirection
        end = next((i for i, t in enumerate(tokens) if t in {"|", ">", ";", "&&"}), len(tokens))
        _parse(tokens[1:end])


# -- agents wait ---------------------------------------------------------------------------


def test_agents_wait_returns_once_the_work_a_rewind_restarted_is_done(daemon: Daemon):
    sock = daemon.socket
    # Slow steps (0.5 s each, 5 in this turn): the re-run is long enough to be waited for.
    ok(reynctl("agents", "create", "ada", "-o", "delay=0.5", sock=sock))
    ok(reynctl("append", "scribe", "agent.created", sock=sock))  # external: never waited for
    sent = json.loads(ok(reynctl("--json", "send", "ada", "/plan a; b; c", "--no-wait", sock=sock)))
    # Back to the message's seq: the turn in flight is cancelled, and runs again from the start.
    proc = reynctl("rewind", str(sent["seq"]), "--yes", sock=sock)
    assert "reynctl agents wait" in ok(proc) + proc.stderr
    reset = daemon.call("daemon.status")["head"]
    assert (
        daemon.call("agents.get", {"agent": "ada"})["status"] != "idle"
        or (daemon.call("state.get", {"agent": "ada"})["agents"]["ada"]["inbox"])
    )

    # Not done within 0.1 s: exit 1, naming who is busy.
    proc = reynctl("--json", "agents", "wait", "--timeout", "0.1", sock=sock)
    assert proc.returncode == 1 and proc.stdout == ""
    assert json.loads(proc.stderr)["error"]["name"] == "wait_timeout"
    assert "ada" in json.loads(proc.stderr)["error"]["message"]

    out = ok(reynctl("--color", "never", "agents", "wait", sock=sock))
    assert "ada" in out and "idle" in out
    ends = daemon.call("generations.list", {"kind": "turn", "limit": 1})["generations"]
    assert ends[0]["seq"] > reset  # the re-run turn has ended
    info = daemon.call("agents.get", {"agent": "ada"})
    assert info["status"] == "idle" and info["turn_id"] is None and info["inbox"] == 0

    proc = reynctl("agents", "wait", "nobody", sock=sock)
    assert proc.returncode == 1 and "unknown_agent" in proc.stderr

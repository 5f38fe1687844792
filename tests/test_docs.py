"""The docs cannot drift: every block a user types runs, literally, against a real daemon.

Each fenced block of docs/*.md and README.md says what it is in its info
string (the words after the opening fence; GitHub shows none of them and
highlights by the first):

- ```` ```console ````: a session. Each `$ ` line (with `\\` continuations)
  runs in bash; the lines after it are its output, stdout and stderr as a
  terminal shows them, checked. In the expected output `...` stands for any
  text within a line, and a line of `...` alone for any number of lines;
  runs of spaces compare as one (columns may shift). A command must exit 0,
  unless the output shown has an `error:` line.
- ```` ```sh ````: commands, run as one bash script (`set -euo pipefail`);
  their output is not checked, they must succeed.
- ```` ```sh server ````: `reynd serve ...` lines, each started in the
  background; the block is done when the daemon says READY=1.
- ```` ```python ````: a program, run with this checkout's Python in the
  session (it finds the daemon as reynctl does); it must exit 0, so what it
  claims is written as `assert`s. Its output is not checked.
- ```` ```sh no-run: REASON ```` or ```` ```console no-run: REASON ````:
  shown, not run; the reason is required (needs systemd, runs for minutes...).
- ```` ```text ````, ```` ```json ````, ```` ```toml ````, ```` ```ini ````: not commands (output,
  file layouts, formats, synopses). A `text` block holds no `$ ` line.

A fence with no info string fails the test: every block is one of these.

Each document runs as one session, its blocks in order, in an empty
directory of its own with `$XDG_RUNTIME_DIR` and `$HOME` inside it, `reynd` and
`reynctl` of this checkout first on `$PATH`, stdin not a terminal, 100
columns. A document without a `sh server` block gets `reynd serve` started in
that directory before its first block runs, as its readers are assumed to
have one.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness import Daemon, daemon_env, short_tempdir, start_daemon

ROOT = Path(__file__).resolve().parent.parent
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
NOT_COMMANDS = frozenset(("text", "json", "toml", "ini"))
RUNNABLE = ("console", "sh", "python")
TIMEOUT = 120


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    mode: str  # "", "server" or "no-run"
    reason: str
    body: list[str]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with their info strings parsed."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^( *)(`{3,})(.*)$", lines[i])  # indented in a list item too
        if fence is None:
            i += 1
            continue
        start, indent, ticks, info = i, fence.group(1), fence.group(2), fence.group(3).strip()
        i += 1
        body = []
        while i < len(lines) and not lines[i].lstrip(" ").startswith(ticks):
            body.append(lines[i].removeprefix(indent))
            i += 1
        assert i < len(lines), f"{path}:{start + 1}: the fence is never closed"
        i += 1
        lang, _, rest = info.partition(" ")
        mode, _, reason = rest.strip().partition(":")
        found.append(Block(path, start + 1, lang, mode.strip(), reason.strip(), body))
    return found


def _check_convention(block: Block) -> None:
    where = block.where
    assert block.lang, (
        f"{where}: tag the block (console, sh, text, json, toml: see tests/test_docs.py)"
    )
    if block.lang in NOT_COMMANDS:
        assert not block.mode, f"{where}: {block.lang} blocks never run"
        if block.lang == "text":
            prompts = [line for line in block.body if line.startswith("$ ")]
            assert not prompts, f"{where}: a `$ ` line is a command: make the block console"
        return
    assert block.lang in RUNNABLE, f"{where}: unknown block language {block.lang!r}"
    assert block.mode in ("", "server", "no-run"), f"{where}: unknown mode {block.mode!r}"
    if block.mode == "no-run":
        assert block.reason, f"{where}: say why the block does not run (no-run: REASON)"
    if block.mode == "server":
        assert block.lang == "sh", f"{where}: a server block is sh"
        for line in _commands(block.body):
            assert line.startswith("reynd serve"), (
                f"{where}: only `reynd serve` runs in the background"
            )
    if block.lang == "console":
        assert block.body and block.body[0].startswith("$ "), f"{where}: start with a `$ ` line"


def _commands(lines: list[str]) -> list[str]:
    """Non-empty lines, `\\` continuations joined, comments left to the shell."""
    out: list[str] = []
    pending = ""
    for line in lines:
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        if full.strip() and not full.lstrip().startswith("#"):
            out.append(full)
    return out


# -- expected output ----------------------------------------------------------------------


def _squeeze(line: str) -> str:
    return re.sub(r" +", " ", line.rstrip())


def _pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        squeezed = _squeeze(line)
        if squeezed.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in squeezed.split("...")) + r"\n")
    return re.compile("".join(parts))


def output_matches(expected: list[str], actual: str) -> bool:
    text = "".join(_squeeze(line) + "\n" for line in actual.splitlines())
    return _pattern(expected).fullmatch(text) is not None


def test_the_matcher():
    assert output_matches(["a  b", "..."], "a b\nc\nd\n")
    assert output_matches(["x ... ms)"], "x (0.8 ms)\n")
    assert output_matches(["head", "...", "tail"], "head\ntail\n")
    assert not output_matches(["head"], "head\nmore\n")
    assert not output_matches(["seq 27"], "seq 28\n")


# -- the session ----------------------------------------------------------------------------


@dataclass
class Session:
    """One document's directory, environment and daemons."""

    cwd: Path
    env: dict[str, str]
    daemons: list[Daemon] = field(default_factory=list)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )

    def serve(self, line: str) -> None:
        # Literally the line, in the background; READY=1 through the harness's NOTIFY_SOCKET.
        self.daemons.append(
            start_daemon(self.cwd, command=["bash", "-c", f"exec {line}"], env=self.env)
        )


@pytest.fixture
def session() -> Iterator[Session]:
    with short_tempdir("reynd-docs-") as cwd:
        run, home = cwd / "run", cwd / "home"
        run.mkdir(mode=0o700)
        home.mkdir()
        bin_dir = str(Path(sys.executable).parent)
        env = daemon_env()
        for name in [k for k in env if k.startswith("REYN") or k in ("NO_COLOR", "LINES")]:
            del env[name]
        env.update(
            PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            XDG_RUNTIME_DIR=str(run),
            HOME=str(home),  # what the docs write to ~ stays in the session
            COLUMNS="100",
        )
        s = Session(cwd, env)
        try:
            yield s
        finally:
            for d in s.daemons:
                d.stop()


def _run_sh(s: Session, block: Block) -> None:
    script = "set -euo pipefail\ntrap 'echo \"failed: $BASH_COMMAND\" >&2' ERR\n"
    proc = s.run(script + "\n".join(block.body))
    assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}\n{proc.stdout}"


def _run_python(s: Session, block: Block) -> None:
    proc = s.run("exec python - <<'REYND_DOC_EOF'\n" + "\n".join(block.body) + "\nREYND_DOC_EOF")
    assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}\n{proc.stdout}"


def _run_console(s: Session, block: Block) -> None:
    steps: list[tuple[str, list[str]]] = []
    lines = iter(block.body)
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + " " + next(lines)
            steps.append((command, []))
        else:
            steps[-1][1].append(line)
    for command, expected in steps:
        proc = s.run(command)
        shown_error = any(_squeeze(e).lstrip().lower().startswith("error:") for e in expected)
        assert proc.returncode == 0 or shown_error, (
            f"{block.where}: `{command}` exited {proc.returncode}\n{proc.stdout}"
        )
        if not output_matches(expected, proc.stdout):
            diff = "\n".join(
                difflib.unified_diff(
                    expected, proc.stdout.splitlines(), "in the doc", "printed", lineterm=""
                )
            )
            pytest.fail(f"{block.where}: `{command}` printed something else\n{diff}")


def _tools(doc_blocks: list[Block]) -> None:
    """The programs the runnable blocks use besides reynd and reynctl are installed."""
    text = "\n".join("\n".join(b.body) for b in doc_blocks if b.lang in ("sh", "console"))
    for tool in ("jq", "sqlite3"):
        if re.search(rf"\b{tool}\b", text) and not shutil.which(tool):
            # .ci/run installs them; a machine without them skips this document, saying why.
            pytest.skip(f"{tool} is not installed: this document's examples use it")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_doc(doc: Path, session: Session):
    doc_blocks = blocks(doc)
    for block in doc_blocks:
        _check_convention(block)
    runnable = [b for b in doc_blocks if b.lang in RUNNABLE and b.mode != "no-run"]
    if not runnable:
        return
    _tools(runnable)
    if not any(b.mode == "server" for b in runnable):
        session.serve("reynd serve")
    for block in runnable:
        if block.mode == "server":
            for line in _commands(block.body):
                session.serve(line)
        elif block.lang == "sh":
            _run_sh(session, block)
        elif block.lang == "python":
            _run_python(session, block)
        else:
            _run_console(session, block)

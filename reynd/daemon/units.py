"""`reynd install-units`: the unit files of systemd/, pointed at this installation.

The units in the repository start `/usr/bin/env reynd` (found on the
manager's PATH; the user unit sets one with `~/.local/bin` first), so they
verify as shipped; an installation in a virtual environment or under pipx
has its `reynd` elsewhere. Installing writes each unit with ExecStart
naming the `reynd` that runs this command (and drops the user unit's PATH,
which only served that lookup), and Documentation= naming these docs when
they are on disk (a source checkout), so that `systemd-analyze verify`
passes on the units exactly as installed. A path the unit itself hides from
the service (PrivateTmp=, ProtectHome=) is warned about: the service could
not start.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import reynd

__all__ = [
    "UnitsExist",
    "hidden_paths",
    "install_units",
    "needed_paths",
    "reynd_command",
    "unit_dir",
]

Scope = Literal["user", "system"]
_NAMES = ("reynd.service", "reynd.socket")
_TEMPLATE_COMMAND = "/usr/bin/env reynd"
_TEMPLATE_PATH = "Environment=PATH="

# What a directive hides from the service (systemd.exec(5)), by the values that hide.
# ProtectHome=read-only leaves the files readable, so reynd still runs from there.
_HIDING: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("PrivateTmp", frozenset({"yes", "true", "on", "1"}), ("/tmp", "/var/tmp")),
    (
        "ProtectHome",
        frozenset({"yes", "true", "on", "1", "tmpfs"}),
        ("/home", "/root", "/run/user"),
    ),
)


class UnitsExist(Exception):
    """A unit file is already there (pass force to replace it)."""


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    replaced: bool
    warnings: tuple[str, ...] = ()


def _sources(scope: Scope) -> Path:
    package = Path(reynd.__file__).resolve().parent
    # A wheel carries them inside the package; a source checkout has systemd/ beside it.
    for base in (package / "systemd", package.parent / "systemd"):
        if (base / "reynd.service").is_file():
            return base / "user" if scope == "user" else base
    raise FileNotFoundError(f"the unit files are not installed with reynd ({package})")


def reynd_command() -> str:
    """How systemd should start this installation's reynd (an absolute ExecStart)."""
    script = Path(sys.executable).parent / "reynd"
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m reynd.daemon.cli"


def unit_dir(scope: Scope) -> Path:
    """Where systemd looks for units an administrator or a user installs."""
    if scope == "system":
        return Path("/etc/systemd/system")
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


def _render(text: str, command: str, docs: Path | None) -> str:
    text = text.replace(f"ExecStart={_TEMPLATE_COMMAND} ", f"ExecStart={command} ")
    lines = []
    for line in text.splitlines():
        if line.startswith(_TEMPLATE_PATH):
            continue  # it only served the template's PATH lookup
        if not line.startswith("Documentation="):
            lines.append(line)
        elif docs is not None:  # else dropped: the file it named is not installed
            lines.append(f"Documentation=file://{docs}")
    return "\n".join(lines) + "\n"


def _directives(text: str) -> dict[str, list[str]]:
    """The unit's `Key=value` lines, every value of each key in order (an empty one resets)."""
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and line[0] not in "#;[" and "=" in line:
            key, _, value = line.partition("=")
            values = out.setdefault(key.strip(), [])
            if value.strip():
                values.append(value.strip())
            else:
                values.clear()
    return out


def _listed(values: list[str]) -> list[tuple[str, str]]:
    """(path, the word naming it) of path-list directives: `-`/`+` prefixes and `:options` off."""
    out = []
    for value in values:
        for word in value.split():
            path = word.lstrip("-+").partition(":")[0]
            if path.startswith("/"):
                out.append((path, word))
    return out


def hidden_paths(unit_text: str, paths: Sequence[Path]) -> list[str]:
    """Why each of `paths` is invisible to a service run from `unit_text` (empty: all visible).

    Pure: reads the unit's own PrivateTmp= and ProtectHome= (the last value
    wins), InaccessiblePaths= and TemporaryFileSystem= (every path listed).
    """
    directives = _directives(unit_text)
    hidden: list[tuple[str, str]] = []  # (directory, the directive that hides it)
    for key, hiding, dirs in _HIDING:
        value = (directives.get(key) or ["no"])[-1]
        if value.lower() in hiding:
            hidden += [(d, f"{key}={value}") for d in dirs]
    for key in ("InaccessiblePaths", "TemporaryFileSystem"):
        hidden += [(d, f"{key}={word}") for d, word in _listed(directives.get(key, []))]
    found = []
    for path in paths:
        for directory, why in hidden:
            if path.is_relative_to(directory):
                found.append(f"{path} is under {directory}, which {why} hides from the service")
                break
    return found


def needed_paths() -> list[Path]:
    """What the service must see to start: the interpreter or script, and the package."""
    script = Path(sys.executable).parent / "reynd"
    ran = script if script.is_file() and os.access(script, os.X_OK) else Path(sys.executable)
    package = Path(reynd.__file__).resolve().parent
    return list(dict.fromkeys([Path(os.path.abspath(ran)), ran.resolve(), package]))


def install_units(scope: Scope, target: Path, *, force: bool = False) -> list[Written]:
    """Write reynd.service and reynd.socket for `scope` into `target`; UnitsExist unless force."""
    source = _sources(scope)
    docs = Path(reynd.__file__).resolve().parent.parent / "docs" / "operations.md"
    existing = [target / n for n in _NAMES if (target / n).exists()]
    if existing and not force:
        raise UnitsExist(
            f"{', '.join(map(str, existing))} already exist: pass --force to replace them"
        )
    target.mkdir(parents=True, exist_ok=True)
    command = reynd_command()
    out = []
    for name in _NAMES:
        path = target / name
        replaced = path.exists()
        text = _render((source / name).read_text(), command, docs if docs.is_file() else None)
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        os.replace(tmp, path)
        warnings = tuple(hidden_paths(text, needed_paths())) if name.endswith(".service") else ()
        out.append(Written(path, replaced, warnings))
    return out

"""The interactive bisect's progress, kept between reynctl runs in a file of the user's.

It lives on the client's side, like git's BISECT_LOG in the work tree: a bisect only
reads, so the daemon's log has no record of it (a bisect never appends), and a daemon
restart does not touch it. One bisect per daemon socket, in
`$XDG_STATE_HOME/reynctl/bisect/` (~/.local/state by default), written atomically.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from reynctl.bisect.results import Step
from reynctl.bisect.search import Verdict
from reynd.protocol import methods as m

__all__ = ["Damaged", "Progress", "load", "path_for", "remove", "save"]


class Damaged(ValueError):
    """The progress file cannot be read back (written by hand, or by another version)."""


class Progress(msgspec.Struct, kw_only=True):
    """`current`: the seq checked out for testing (None once the search ended), in
    `checkout` with its state file `state_file`; `root`: the directory of the checkouts."""

    socket: str
    good: int
    bad: int
    agent: str | None
    candidates: list[int]
    generations: dict[int, m.Generation]
    root: str
    steps: list[Step] = []
    current: int | None = None
    checkout: str | None = None
    state_file: str | None = None

    def verdicts(self) -> Mapping[int, Verdict]:
        return {s.seq: s.verdict for s in self.steps}


def path_for(socket: Path, env: Mapping[str, str] = os.environ) -> Path:
    """The progress file of the bisect against the daemon at `socket`."""
    base = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    key = hashlib.sha256(os.fsencode(socket.absolute())).hexdigest()[:16]
    return base / "reynctl" / "bisect" / f"{key}.json"


def load(path: Path) -> Progress | None:
    """The bisect under way, or None; Damaged when its file cannot be read back."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=Progress)
    except FileNotFoundError:
        return None
    except msgspec.DecodeError as exc:
        raise Damaged(
            f"the bisect's progress in {path} cannot be read ({exc}): "
            "`reynctl bisect reset` removes it"
        ) from None


def save(path: Path, progress: Progress) -> None:
    """Write it whole or not at all: a new file renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(progress))
    os.replace(tmp, path)


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)

"""The `[workspace]` table of reynd.toml: opt-in workspace rewind."""

from __future__ import annotations

import msgspec

__all__ = ["ALWAYS_IGNORED", "WorkspaceConfig"]

# Version-control directories: never captured, never restored, never deleted.
ALWAYS_IGNORED = (".git", ".hg", ".svn", ".jj")


class WorkspaceConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Workspace rewind. Off by default: then reynd never reads or writes the workspace.

    - `path`: the workspace directory; relative paths are taken from the
      state directory's parent (the default, "", is that parent itself: the
      project that holds `.reyn/`).
    - `ignore`: glob patterns of paths left alone. A pattern without `/`
      matches a name at any depth (`*.log`, `node_modules`); one with `/` is
      matched against the whole path relative to the workspace (`build/*`);
      a trailing `/` matches directories only. A matching directory is
      skipped with everything under it. `.git/`, `.hg/`, `.svn/`, `.jj/` and
      the state directory are always ignored, whatever this says.
    - `watch`: find what changed with inotify (the default): a step costs
      what it changed. False: scan the whole workspace (stat cache) at every
      step and boundary, for a file system whose changes inotify does not
      see (one shared over the network and written from elsewhere).
    """

    enabled: bool = False
    path: str = ""
    ignore: list[str] = msgspec.field(default_factory=list)
    watch: bool = True

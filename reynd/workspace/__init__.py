"""Opt-in workspace rewind: a content-addressed blob store tied to the WAL's generations."""

from reynd.workspace.config import WorkspaceConfig
from reynd.workspace.substrate import Workspace

__all__ = ["Workspace", "WorkspaceConfig"]

"""`reynctl web`: the branch tree, the timeline and every rewind in a browser, live.

Needs the `web` extra (`pip install 'reynd[web]'`). See docs/web.md.
"""

from __future__ import annotations

from reynctl.web.app import build, serve

__all__ = ["build", "serve"]

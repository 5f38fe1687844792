"""reynctl's import surface: the client must stay thin (docs/design.md)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import reynctl.cli, reynctl.client, reynctl.render, reynctl.watch, reynctl.demo
import reynctl.embedded, reynctl.jsonrpc, reynctl.aio, reynctl.errors
print(json.dumps(sorted(sys.modules)))
"""


def test_reynctl_imports_only_the_protocol_from_reynd():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    modules = json.loads(out)
    reynd = [name for name in modules if name == "reynd" or name.startswith("reynd.")]
    assert reynd, "the probe did not import reynctl"
    assert all(
        name in ("reynd", "reynd.protocol") or name.startswith("reynd.protocol.") for name in reynd
    ), reynd
    forbidden = ("trio", "reynd.daemon", "reynd.storage", "reynd.core", "structlog")
    assert not [n for n in modules if n.split(".")[0] == "trio" or n.startswith(forbidden)]


SYNC_LAYERS = """
import json, pkgutil, importlib, sys
import reynd.core, reynd.protocol, reynd.storage
for pkg in (reynd.core, reynd.protocol, reynd.storage):
    for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_synchronous_layers_import_no_event_loop_and_nothing_above_them():
    """core, protocol and storage are plain code (docs/design.md): no trio, no daemon or runtime."""
    out = subprocess.run(
        [sys.executable, "-c", SYNC_LAYERS], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    above = (
        "reynd.daemon",
        "reynd.runtime.agent",
        "reynd.runtime.registry",
        "reynd.config_store.substrate",
    )
    loaded = [n for n in json.loads(out) if n.split(".")[0] == "trio" or n.startswith(above)]
    assert loaded == [], loaded

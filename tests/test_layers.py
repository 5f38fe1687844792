"""Nothing below the daemon imports it (docs/design.md, packages and their direction of import).

The imports are read from the source, so an import under `if TYPE_CHECKING:` or
inside a function counts as much as one at the top: each is a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import reynd

ROOT = Path(reynd.__file__).parent


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_module_below_the_daemon_imports_it() -> None:
    below = [p for p in sorted(ROOT.rglob("*.py")) if ROOT / "daemon" not in p.parents]
    assert len(below) > 50  # the walk found the packages
    found = {
        str(p.relative_to(ROOT.parent)): sorted(
            n for n in _imported(p) if n == "reynd.daemon" or n.startswith("reynd.daemon.")
        )
        for p in below
    }
    assert {path: names for path, names in found.items() if names} == {}

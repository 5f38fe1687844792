"""The crash points are one registry (storage/crashpoints.POINTS): every one has a call site,
every call site and every point the docs name is registered, an unknown name is refused."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reynd.storage import crashpoints
from reynd.storage.crashpoints import CRASH_ENV, POINTS, _parse

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "reynd").rglob("*.py"))
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def _point_call(node: ast.AST) -> ast.Call | None:
    """`crashpoints.hit(...)` or `crashpoints.armed(...)`."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "crashpoints"
        and node.func.attr in ("hit", "armed")
    ):
        return node
    return None


def _forwarders(trees: dict[Path, ast.Module]) -> dict[str, tuple[int, str]]:
    """Functions that pass one of their params on as the point (fsutil.write_halves):
    name -> (position, name) of that param."""
    out: dict[str, tuple[int, str]] = {}
    for tree in trees.values():
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
            for node in ast.walk(fn):
                call = _point_call(node)
                if call and isinstance(call.args[0], ast.Name) and call.args[0].id in params:
                    out[fn.name] = (params.index(call.args[0].id), call.args[0].id)
    return out


TREES = {path: ast.parse(path.read_text(), str(path)) for path in SOURCES}
FORWARDERS = _forwarders(TREES)


def _sites() -> Iterator[tuple[str, ast.expr]]:
    """Every call that names a point, but a forwarder's own: where, and the expression."""
    forwarded = {param for _, param in FORWARDERS.values()}
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if _point_call(node):
                arg = node.args[0]
                if not (isinstance(arg, ast.Name) and arg.id in forwarded):
                    yield where, arg
            elif name in FORWARDERS:
                index, param = FORWARDERS[name]
                given = [k.value for k in node.keywords if k.arg == param]
                yield where, (node.args[index] if len(node.args) > index else given[0])


def test_every_call_site_names_a_registered_point_literally() -> None:
    literal = {}
    for where, arg in _sites():
        assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), where
        literal[where] = arg.value
    assert "write_halves" in FORWARDERS  # the index's and the snapshots' torn writes
    unknown = {where: name for where, name in literal.items() if name not in POINTS}
    assert not unknown, f"not in crashpoints.POINTS: {unknown}"
    missing = set(POINTS) - set(literal.values())
    assert not missing, f"registered points no code hits: {sorted(missing)}"


def test_every_point_the_docs_name_is_registered() -> None:
    families = {name.split(".")[0] for name in POINTS}
    named = []
    for doc in DOCS:
        for paragraph in doc.read_text().split("\n\n"):
            for spec in re.findall(rf"{CRASH_ENV}=([^`\s]+)", paragraph):
                named += [part.split(":")[0] for part in spec.split(",")]
            if "crash point" not in paragraph:
                continue
            for token in re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", paragraph):
                if token.split(".")[0] in families:
                    named.append(token)
    assert named, "the docs name no crash point (docs/durability.md shows how one is armed)"
    assert set(named) <= set(POINTS), set(named) - set(POINTS)


def test_the_registry_describes_every_point_in_one_line() -> None:
    for name, where in POINTS.items():
        assert re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", name), name
        assert where and "\n" not in where, name


@pytest.mark.parametrize("spec", ["wal.snyc", "wal.sync:3:eio,nowhere:2", "wal:1"])
def test_an_unknown_point_in_the_environment_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="unknown crash point") as caught:
        _parse(spec)
    assert all(name in str(caught.value) for name in POINTS)
    # As a process sees it: importing the module (any daemon, any worker) fails, saying so.
    env = {**os.environ, CRASH_ENV: spec}
    code = "import reynd.storage.crashpoints"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert "ValueError: REYN_CRASH_AT" in proc.stderr and "wal.after_sync" in proc.stderr


def test_hit_and_armed_refuse_an_unknown_point() -> None:
    with pytest.raises(ValueError, match=re.escape("hit: unknown crash point 'wal.snyc'")):
        crashpoints.hit("wal.snyc")
    with pytest.raises(ValueError, match=re.escape("armed: unknown crash point 'wal.midbatch'")):
        crashpoints.armed("wal.midbatch")
    crashpoints.hit("wal.sync")  # unarmed here: nothing happens
    assert not crashpoints.armed("wal.mid_batch")

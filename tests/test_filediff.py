"""reynd/core/filediff.py: two trees compared file by file (pure).

Exactly the paths whose entry differs are listed, in order; a text change carries a
unified diff that `patch` (GNU patch, a real implementation) applies to the old bytes
to give the new ones; binary files, links, big files and mode-only changes carry none,
and their blobs are never read.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reynd.core.filediff import MAX_DIFF_BYTES, Entry, compare_trees, is_binary

lines = st.lists(st.sampled_from(["a", "b", "c", "", "dd"]), max_size=8)


def f(ref: str, size: int = 3, mode: int = 0o644) -> Entry:
    return ("f", mode, ref, size)


def test_only_the_paths_that_differ_in_order_with_what_each_is() -> None:
    blobs = {"t1": b"one\n", "t2": b"two\n", "bin": b"\0\1\2", "big": b"x"}
    read_log: list[str] = []

    def read(ref: str) -> bytes:
        read_log.append(ref)
        return blobs[ref]

    before = {"same": f("t1"), "text": f("t1"), "gone": f("t1"), "mode": f("t1"), "b": f("t1")}
    after = {
        "same": f("t1"),
        "text": f("t2"),
        "new": ("l", 0, "same", 4),
        "mode": f("t1", mode=0o755),
        "b": f("bin"),
        "huge": f("big", size=MAX_DIFF_BYTES + 1),
    }
    out = {d.path: d for d in compare_trees(before, after, read)}
    assert list(out) == ["b", "gone", "huge", "mode", "new", "text"]
    assert [out[p].op for p in out] == ["change", "remove", "add", "change", "add", "change"]
    assert out["b"].binary and out["b"].patch is None
    assert out["text"].patch == "--- a/text\n+++ b/text\n@@ -1 +1 @@\n-one\n+two\n"
    assert out["gone"].patch == "--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
    assert out["mode"].patch is None and out["new"].patch is None and out["huge"].patch is None
    assert "big" not in read_log and "same" not in read_log


def test_utf8_is_text_and_anything_else_binary() -> None:
    assert not is_binary("é\n".encode())
    assert is_binary(b"\xff\xfe") and is_binary(b"a\0b")


@settings(max_examples=40, deadline=None)
@given(lines, lines, st.booleans(), st.booleans())
def test_gnu_patch_applies_the_unified_diff(a: list[str], b: list[str], na: bool, nb: bool) -> None:
    old = ("\n".join(a) + ("\n" if na and a else "")).encode()
    new = ("\n".join(b) + ("\n" if nb and b else "")).encode()
    blobs = {"old": old, "new": new}
    deltas = compare_trees({"x": f("old")}, {"x": f("new")}, blobs.__getitem__)
    if old == new:
        return
    (delta,) = deltas
    assert delta.patch is not None
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "x"
        target.write_bytes(old)
        subprocess.run(
            ["patch", "-s", "-p1", "-d", tmp],
            input=delta.patch.encode(),
            check=True,
            capture_output=True,
        )
        assert target.read_bytes() == new

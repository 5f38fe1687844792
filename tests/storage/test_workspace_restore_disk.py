"""The workspace restore on the simulated disk (simdisk.py): what it makes durable.

Every change the restore makes goes through fsops, directory-descriptor forms
included, so the simulated disk sees each one and can fail it.
"""

from __future__ import annotations

import os
from pathlib import Path

from simdisk import Fault, SimDisk

from reynd.storage import fsops
from reynd.workspace.blobs import ObjectStore
from reynd.workspace.model import Item
from reynd.workspace.preflight import preflight
from reynd.workspace.restore import restore_tree
from reynd.workspace.tree import Ignore, scan


def write(ws: Path, rel: str, text: str) -> None:
    p = ws / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_the_restore_runs_on_the_simulated_disk_and_one_failed_path_stops_no_other(
    short_tmp: Path,
) -> None:
    """Every change the restore makes goes through fsops (dir_fd forms included), so the
    simulated disk sees it; an I/O error on one rename fails that path only."""
    ws = short_tmp / "ws"
    for name in ("a", "b", "c"):
        write(ws, f"sub/{name}.txt", "old")
    write(ws, "gone.txt", "old")
    write(ws, "emptied/x.txt", "old")
    objects = ObjectStore(short_tmp / "blobs")
    target: dict[str, Item] = {}
    for name in ("a", "b", "c"):
        digest, size = objects.put_bytes(f"new {name}".encode())
        target[f"sub/{name}.txt"] = Item("f", 0o644, digest, size)
    target["new/deep/link"] = Item("l", 0, "../../sub/a.txt", 0)
    ignore = Ignore([])
    current = scan(ws, ignore, {})
    disk = SimDisk(ws, faults=[Fault("replace", 3)])  # new/deep/link, sub/a.txt, then sub/b.txt
    with fsops.installed(disk):
        assert preflight(ws, ignore, current, target, objects) == []
        done = restore_tree(ws, ignore, current, target, objects)
    assert [p for p, _ in done.failed] == ["sub/b.txt"] and "EIO" in done.failed[0][1]
    assert (done.written, done.deleted, done.skipped) == (3, 2, [])
    assert (ws / "sub/a.txt").read_text() == "new a" and (ws / "sub/c.txt").read_text() == "new c"
    assert (ws / "sub/b.txt").read_text() == "old"
    assert os.readlink(ws / "new/deep/link") == "../../sub/a.txt"
    assert not (ws / "gone.txt").exists() and not (ws / "emptied").exists()
    assert not list(ws.rglob(".reynd-tmp-*"))  # the failed path's tmp file was removed
    # What the disk made durable: every directory the restore changed was fsynced.
    durable = disk.image(lambda n: 0)
    assert durable["sub/a.txt"] == b"new a" and "gone.txt" not in durable
    assert "emptied" not in durable and "new/deep/link" in durable
    assert {"rmdir", "symlink", "mkdir", "unlink"} <= disk.calls.keys()

"""The config generation store on real files, without a daemon (reynd/config_store/core.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from reynd.config_store import ConfigCore, ConfigFileDamaged
from reynd.config_store.db import _migrate_columns, _open, agent_row
from reynd.core.lineage import Lineage


def lineage(head: int, resets: Sequence[tuple[int, int]] = ()) -> Lineage:
    return Lineage.restore(list(resets), head)


def open_core(tmp_path: Path, head: int = 0) -> ConfigCore:
    core = ConfigCore(tmp_path / "state" / "config")
    core.open(head)
    return core


def make_v1(path: Path) -> None:
    """A database as schema version 1 wrote it: agents without session / created_seq."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE agents (name TEXT PRIMARY KEY, executor TEXT NOT NULL, options TEXT NOT NULL);
        INSERT INTO settings VALUES ('retention.snapshot_keep', '7');
        INSERT INTO agents VALUES ('ada', 'builtin', '{}');
        PRAGMA user_version = 1;
        """
    )
    conn.commit()
    conn.close()


def dump(path: Path) -> tuple[list[Any], list[list[Any]], bytes]:
    conn = sqlite3.connect(path)
    schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    rows = [
        conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("settings", "agents")
    ]
    conn.close()
    return schema, rows, path.read_bytes()


def test_an_old_schema_generation_restores_into_the_current_schema(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    old = tmp_path / "v1.db"
    make_v1(old)
    digest = core.files.import_file(old)  # stored as is: still version 1
    core.index.add_gens([5], digest)

    assert core.restore_to_seq(8, lineage(8)) == digest
    conn = sqlite3.connect(core.db_path)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(agents)")]
    assert cols == ["name", "executor", "options", "session", "created_seq"]
    assert conn.execute("SELECT * FROM agents").fetchall() == [
        ("ada", "builtin", "{}", "default", 0)
    ]
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    conn.close()
    # Its settings are not: operator policy stays the live one (none here).
    assert core.settings() == {}
    # The stored generation itself is untouched; the migrated content is new, so it is captured.
    assert core.dirty
    core.seal([9])
    assert core.index.gens[9] != digest and core.generation_count() == 2


def page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_new_files_take_1_kib_pages_and_an_older_database_keeps_its_own(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    core.write_settings({"retention.snapshot_keep": 7})
    core.seal([1])
    files = [core.db_path, *core.files.dir.glob("*.db")]
    assert len(files) == 2
    for f in files:  # 4 KiB pages made each 20 KiB
        assert page_size(f) == 1024 and f.stat().st_size <= 6 * 1024, f
    core.close()
    # A state directory written before: its live database (4 KiB pages) opens as it is.
    old = tmp_path / "old"
    (old / "state" / "config").mkdir(parents=True)
    make_v1(old / "state" / "config" / "config.db")
    assert page_size(old / "state" / "config" / "config.db") == 4096
    core = open_core(old)
    assert page_size(core.db_path) == 4096
    assert core.settings() == {"retention.snapshot_keep": 7}
    core.close()


def test_the_migration_run_twice_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    make_v1(path)
    conn = _open(path)  # migrates
    conn.close()
    once = dump(path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert _migrate_columns(conn) == []
    conn.close()
    conn = _open(path)  # the whole open path again
    conn.close()
    assert dump(path) == once  # schema, rows and every byte of the file


def test_unchanged_generations_share_one_file_and_equal_content_shares_too(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    for seq in range(1, 21):
        core.seal([seq])
    assert core.generation_count() == 1 and core.captures == 1
    # Only the change point is written; every later boundary resolves to it.
    assert list(core.index.gens) == [1]
    assert {core.pick(seq, lineage(20)) for seq in range(1, 21)} == {core.index.gens[1]}

    core.write_settings({"retention.snapshot_keep": 7})
    core.seal([21])
    core.write_settings({"retention.snapshot_keep": 9})
    core.seal([22])
    core.write_settings({"retention.snapshot_keep": 7})
    core.seal([23])
    assert core.index.gens[23] == core.index.gens[21] != core.index.gens[22]
    assert core.generation_count() == 3 and core.captures == 3
    core.close()

    # After a restart the live content is hashed again: same content, no new file.
    core = open_core(tmp_path, head=23)
    core.seal([24])
    assert core.index.gens[24] == core.index.gens[23]
    assert core.generation_count() == 3 and core.captures == 0


def test_restore_follows_the_lineage_and_the_index_survives_a_reopen(tmp_path: Path) -> None:
    ada = {"ada": agent_row("builtin", {}, "default", 1)}
    both = {**ada, "bob": agent_row("builtin", {"model": "m"}, "default", 5)}

    def agents(core: ConfigCore) -> list[str]:
        return [r[0] for r in core.conn.execute("SELECT name FROM agents ORDER BY name")]

    core = open_core(tmp_path)
    core.sync_agents(ada)
    core.seal([3])
    core.sync_agents(both)
    core.write_settings({"retention.snapshot_keep": 7})
    core.seal([6])
    # rewind(4) = reset 8: what is left is captured, then generation 3 comes back;
    # the settings (operator policy) stay the live ones.
    assert core.reset(8, 4, lineage(8, [(8, 4)]), pending=[])
    assert agents(core) == ["ada"]
    assert core.settings() == {"retention.snapshot_keep": 7}
    assert not core.reset(8, 4, lineage(8, [(8, 4)]), pending=[])  # done already
    core.write_settings({"retention.snapshot_keep": 9})
    core.close()

    core = open_core(tmp_path, head=8)
    assert core.index.reset_state(8) == "done"
    # checkout(7), on the abandoned branch: generation 6 (ada and bob).
    assert core.reset(9, 7, lineage(9, [(8, 4), (9, 7)]), pending=[])
    assert agents(core) == ["ada", "bob"]
    assert core.settings() == {"retention.snapshot_keep": 9}
    # Genesis: the empty configuration, the policy still the live one.
    assert core.reset(10, 0, lineage(10, [(8, 4), (9, 7), (10, 0)]), pending=[])
    assert agents(core) == [] and core.settings() == {"retention.snapshot_keep": 9}


def test_a_damaged_generation_is_named_and_the_live_database_is_left_alone(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    core.write_settings({"retention.snapshot_keep": 7})
    core.seal([2])
    core.write_settings({"retention.snapshot_keep": 9})
    path = core.files.path(core.index.gens[2])
    good = path.read_bytes()
    for needle in (b"retention.snapshot_keep7", b"retention.snapshot_keep"):
        # The row's value 7 becomes 8; a byte of the key in the primary-key index.
        data = bytearray(good)
        at = data.rindex(needle) + len(needle) - 1
        data[at] ^= 0x0F
        path.write_bytes(bytes(data))
        with pytest.raises(ConfigFileDamaged) as caught:
            core.restore_to_seq(3, lineage(3))
        assert str(path) in str(caught.value)
        assert core.settings() == {"retention.snapshot_keep": 9}

    path.write_bytes(b"\0" * len(good))  # not a database at all
    with pytest.raises(ConfigFileDamaged, match="not a readable SQLite database"):
        core.restore_to_seq(3, lineage(3))
    # Moved away by the operator: the previous generation (none here: empty) is used.
    path.unlink()
    assert core.restore_to_seq(3, lineage(3)) is None
    assert core.settings() == {"retention.snapshot_keep": 9}  # operator policy: not rewound


def test_a_torn_index_tail_is_cut_and_damage_before_the_end_is_refused(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    core.seal([1])
    core.write_settings({"retention.snapshot_keep": 7})
    core.seal([2])
    core.close()
    index = tmp_path / "state" / "config" / "index.log"
    intact = index.read_bytes()
    index.write_bytes(intact + b"0000abcd gen 3 ")  # a crash in the middle of an append
    core = open_core(tmp_path)
    assert sorted(core.index.gens) == [1, 2] and index.read_bytes() == intact
    core.close()
    lines = intact.split(b"\n")
    lines[1] = lines[1][:-1] + b"0"  # the middle line no longer matches its CRC
    index.write_bytes(b"\n".join(lines))
    with pytest.raises(ConfigFileDamaged, match="bad entry at byte"):
        open_core(tmp_path)

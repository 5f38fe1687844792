"""The live configuration database: schema, the idempotent column migration, reads and writes.

Plain `sqlite3` on one connection, no event loop. Two tables:

- `settings(key, value)`: daemon settings changed at run time; `value` is
  JSON. Keys are dotted: `retention.snapshot_keep`. They are operator
  policy: captured in every generation like the rest, but a restore keeps
  the live ones (`carry_settings`), so time travel never rewinds them.
- `agents(name, executor, options, session, created_seq)`: a mirror of the
  agent configurations in the WAL (agent.created / agent.configured). The WAL
  stays the source of truth; the mirror is rewritten from it after every
  restore.

Schema evolution is additive only: a table is created with its first
(version 1) columns and every later column is added by `_migrate_columns`,
guarded by `PRAGMA table_info`, on every open, including the open that follows
a restore. A fresh database and an old one migrated forward therefore end up
with the same columns in the same order.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reynd.storage.fsutil import create_empty

__all__ = [
    "ADDED_COLUMNS",
    "SCHEMA_VERSION",
    "AgentRow",
    "Undecodable",
    "_migrate_columns",
    "_open",
    "agent_row",
    "carry_settings",
    "check_file",
    "content_hash",
    "quick_check",
    "read_agents",
    "read_settings",
    "sync_agents",
    "write_settings",
]

SCHEMA_VERSION = 2
PAGE_BYTES: Final = 1024  # SQLite page size of a new database file

# The tables as version 1 created them. Never edit: add a column below instead.
_BASE_TABLES: tuple[tuple[str, str], ...] = (
    ("settings", "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
    (
        "agents",
        "CREATE TABLE agents "
        "(name TEXT PRIMARY KEY, executor TEXT NOT NULL, options TEXT NOT NULL)",
    ),
)

# Columns added after their table was created: (schema version, table, column,
# declaration). Append only; each needs a constant DEFAULT (rows written by an
# older version get it).
ADDED_COLUMNS: tuple[tuple[int, str, str, str], ...] = (
    (2, "agents", "session", "TEXT NOT NULL DEFAULT 'default'"),
    (2, "agents", "created_seq", "INTEGER NOT NULL DEFAULT 0"),
)


@dataclass(frozen=True, slots=True)
class AgentRow:
    executor: str
    options: str  # canonical JSON (sorted keys)
    session: str
    created_seq: int


def _open(path: Path | str, *, uri: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) and bring the schema up to date.

    The connection is in autocommit mode; writes use explicit transactions.
    It may be used from any one thread at a time (the caller serializes).
    A file path is created 0600 first: SQLite would make it 0644 & ~umask,
    and its journal takes the database's mode.
    """
    if not uri:
        create_empty(Path(path))
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, uri=uri)
    try:
        # A new file only (an existing one keeps its own): settings and agent rows fill a
        # few pages, and every distinct content is a generation file of as many pages.
        # 4 KiB pages made each file 20 KiB.
        conn.execute(f"PRAGMA page_size={PAGE_BYTES}")
        conn.execute("PRAGMA journal_mode=DELETE")
        # EXTRA: the journal's deletion (the commit point) is synced too.
        conn.execute("PRAGMA synchronous=EXTRA")
        _create_tables(conn)
        _migrate_columns(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def quick_check(conn: sqlite3.Connection) -> None:
    """sqlite3.DatabaseError unless `PRAGMA quick_check` finds every page sound."""
    problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        raise sqlite3.DatabaseError(f"quick_check: {'; '.join(problems[:3])}")


@dataclass(slots=True)
class FileCheck:
    """What `check_file` found: damage a start or a restore would trip on, and the rest."""

    problems: list[str]
    notes: list[str]


def check_file(path: Path) -> FileCheck:
    """Check a config database without changing it: `PRAGMA quick_check` and the schema.

    A hot journal beside it (a transaction a crash interrupted) is rolled
    back in a temporary copy, as the next open would, and the result checked.
    """
    journal = path.with_name(path.name + "-journal")
    if not journal.exists():
        # immutable: no lock, no journal, nothing written (the daemon is stopped).
        return _check_open(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    with tempfile.TemporaryDirectory(prefix="reynd-check-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        shutil.copyfile(journal, Path(tmp) / journal.name)
        found = _check_open(str(copy), uri=False)
    found.notes.append(
        f"{journal}: a transaction a crash interrupted (the next start rolls it back)"
    )
    return found


def _check_open(target: str, *, uri: bool) -> FileCheck:
    found = FileCheck([], [])
    try:
        conn = sqlite3.connect(target, uri=uri)
    except sqlite3.Error as exc:
        found.problems.append(f"cannot be opened ({exc})")
        return found
    try:
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            found.problems.append(f"not a readable SQLite database ({exc})")
            return found
        try:
            rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            rows = [str(exc)]
        if rows != ["ok"]:
            found.problems.append(f"SQLite quick_check: {'; '.join(rows[:3])}")
            return found
        _check_schema(conn, found)
    finally:
        conn.close()
    return found


def _check_schema(conn: sqlite3.Connection, found: FileCheck) -> None:
    """Every version-1 table with its columns; later columns only noted (an open adds them)."""
    for table, sql in _BASE_TABLES:
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        if not have:
            found.notes.append(f"no table {table} (the next open creates it empty)")
            continue
        want = sql[sql.index("(") + 1 : sql.rindex(")")].split(",")
        lacking = [c.split()[0] for c in want if c.split()[0] not in have]
        if lacking:
            found.problems.append(f"table {table} lacks its column(s) {', '.join(lacking)}")
        added = [c for _, t, c, _ in ADDED_COLUMNS if t == table and c not in have]
        if added:
            found.notes.append(
                f"table {table} lacks {', '.join(added)} (an older schema: the next open adds them)"
            )
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        found.notes.append(f"schema version {version}, newer than this reynd's {SCHEMA_VERSION}")


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already (a full disk, an I/O
    error: it rolls back by itself, and a ROLLBACK then would hide the real error)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _create_tables(conn: sqlite3.Connection) -> None:
    existing = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [sql for name, sql in _BASE_TABLES if name not in existing]
    if not missing:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql in missing:
            conn.execute(sql)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _migrate_columns(conn: sqlite3.Connection) -> list[str]:
    """Add every column of ADDED_COLUMNS that the database lacks; returns `table.column`s added.

    Idempotent: a column already there is skipped (PRAGMA table_info), so on a
    current database this writes nothing, not even to the file.
    """
    columns: dict[str, set[str]] = {}
    missing: list[tuple[str, str, str]] = []
    for _, table, column, decl in ADDED_COLUMNS:
        if table not in columns:
            columns[table] = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        if column not in columns[table]:
            missing.append((table, column, decl))
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if not missing and version >= SCHEMA_VERSION:
        return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table, column, decl in missing:
            conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{column}" {decl}')
        # Informational (the columns are the truth); never lowered.
        conn.execute(f"PRAGMA user_version = {max(version, SCHEMA_VERSION)}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return [f"{table}.{column}" for table, column, _ in missing]


def content_hash(conn: sqlite3.Connection) -> str:
    """SHA-256 of the logical content: user_version, schema, every row in a canonical order.

    Independent of page layout, rowids and SQLite's internal counters, so
    equal content always has the same name, whatever its history.
    """
    h = hashlib.sha256()
    h.update(b"user_version %d\n" % conn.execute("PRAGMA user_version").fetchone()[0])
    schema = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
        "ORDER BY type, name"
    ).fetchall()
    for kind, name, sql in schema:
        h.update(repr((kind, name, sql)).encode() + b"\n")
        if kind != "table":
            continue
        ncols = len(conn.execute(f'PRAGMA table_info("{name}")').fetchall())
        order = ", ".join(str(i) for i in range(1, ncols + 1))
        for row in conn.execute(f'SELECT * FROM "{name}" ORDER BY {order}'):
            h.update(repr(row).encode() + b"\n")
    return h.hexdigest()


def read_settings(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every setting, decoded; a value that is not JSON is skipped (reported by the caller)."""
    out: dict[str, Any] = {}
    for key, value in conn.execute("SELECT key, value FROM settings ORDER BY key"):
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = Undecodable(value)
    return out


class Undecodable(str):
    """A stored value that is not valid JSON (hand-edited); kept so the caller can name it."""


def write_settings(conn: sqlite3.Connection, changes: Mapping[str, Any]) -> None:
    """Upsert settings in one transaction (durable at COMMIT)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT INTO settings (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [(k, json.dumps(v, sort_keys=True)) for k, v in changes.items()],
        )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def carry_settings(live: sqlite3.Connection, dest: Path) -> None:
    """Make the settings of database `dest` those of `live`, durably (before a restore's swap).

    `dest` is opened (and migrated) here; the file is fsynced before return.
    """
    rows = live.execute("SELECT key, value FROM settings ORDER BY key").fetchall()
    conn = _open(dest)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM settings")
            conn.executemany("INSERT INTO settings (key, value) VALUES (?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
    finally:
        conn.close()


def read_agents(conn: sqlite3.Connection) -> dict[str, AgentRow]:
    return {
        name: AgentRow(executor, options, session, created_seq)
        for name, executor, options, session, created_seq in conn.execute(
            "SELECT name, executor, options, session, created_seq FROM agents"
        )
    }


def agent_row(
    executor: str, options: Mapping[str, Any], session: str, created_seq: int
) -> AgentRow:
    return AgentRow(executor, json.dumps(options, sort_keys=True), session, created_seq)


def sync_agents(
    conn: sqlite3.Connection, current: Mapping[str, AgentRow], wanted: Mapping[str, AgentRow]
) -> bool:
    """Make the agents table `wanted` (it holds `current`); True when anything was written."""
    upserts = [(n, r) for n, r in wanted.items() if current.get(n) != r]
    deletes: Iterable[str] = [n for n in current if n not in wanted]
    if not upserts and not deletes:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("DELETE FROM agents WHERE name = ?", [(n,) for n in deletes])
        conn.executemany(
            "INSERT INTO agents (name, executor, options, session, created_seq) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET executor = excluded.executor, "
            "options = excluded.options, session = excluded.session, "
            "created_seq = excluded.created_seq",
            [(n, r.executor, r.options, r.session, r.created_seq) for n, r in upserts],
        )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return True

"""The PostgreSQL the bench starts for its peers (bench/postgres.py), started for real.

The bench compares reynd with PostgresSaver and pgbench on a server it
starts itself: initdb in a temporary directory, loopback only, commits
durable. This checks that server is what the bench says it is, that the
peers run on it, and that it leaves nothing behind. Without the server
binaries the test fails saying what to install.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import postgres
from bench.commit_peers import pgbench_tps


def _need_postgres() -> None:
    why = postgres.missing()
    if why is not None:
        pytest.fail(f"this test starts a real PostgreSQL: {why}")


def test_the_bench_server_is_durable_loopback_and_leaves_nothing(tmp_path: Path) -> None:
    import psycopg

    _need_postgres()
    with postgres.cluster() as pg:
        with psycopg.connect(pg.conninfo) as conn:
            settings = {
                name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                for name in ("fsync", "synchronous_commit", "full_page_writes", "listen_addresses")
            }
        assert settings == {
            "fsync": "on",
            "synchronous_commit": "on",
            "full_page_writes": "on",
            "listen_addresses": "127.0.0.1",
        }
        script = tmp_path / "insert.sql"
        with psycopg.connect(pg.conninfo, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, body text)")
        script.write_text("INSERT INTO t (body) VALUES ('x');\n")
        assert pgbench_tps(pg, 2, 1.0, script) > 0
        with psycopg.connect(pg.conninfo) as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] > 0  # type: ignore[index]
        data_dir = pg.data_dir
        assert data_dir.is_dir()
    assert not data_dir.parent.exists()


def test_postgres_saver_runs_a_turn_on_it() -> None:
    from langchain_core.messages import HumanMessage

    from bench.langgraph import THREAD, Spec, build, open_saver

    _need_postgres()
    with postgres.cluster() as pg, open_saver(Spec("postgres", pg.conninfo, delta=True)) as saver:
        graph = build(saver, delta=True)
        question = HumanMessage(content="What is the status of ticket 7?")
        graph.invoke({"messages": [question]}, THREAD)
        assert len(graph.get_state(THREAD).values["messages"]) == 4

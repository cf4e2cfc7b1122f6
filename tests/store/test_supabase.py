"""The Supabase store on a real Postgres + pgvector: the writer's privileges, row-level security,
and the outbox that keeps investigations while Supabase is unreachable."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import errors, sql

from tasks.store import (
    DuckDBStore,
    PostgresStore,
    Store,
    StoreConfigError,
    StoreError,
    StoreUnavailable,
    SupabaseStore,
    flush_outbox,
    store_from_config,
)
from tests.support.postgres import migration_files
from tests.support.records import TABLES, android_dau_drop, de_signup_drop, ios_revenue_drop


# a signed-in user of the team whose writer is drilldown_writer
DEFAULT_TEAM = {"app_metadata": {"team": "default"}}


def closed_port_dsn() -> str:
    """A Postgres URL nothing listens on (a port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://drilldown_writer:pw@127.0.0.1:{port}/postgres"


@pytest.fixture
def writer_dsn(pg_server, pg_db) -> str:
    return pg_server.writer_dsn(pg_db)


@pytest.fixture
def admin_dsn(pg_server, pg_db) -> str:
    return pg_server.admin_uri(pg_db)


@pytest.fixture
def saved(writer_dsn, embedder):
    with PostgresStore(writer_dsn, embedder=embedder) as store:
        store.save_investigation(ios_revenue_drop())
    return ios_revenue_drop()


def as_role(admin_dsn: str, role: str, query: str, params=(), claims: dict | None = None):
    """Run a query as a role; with claims, as Supabase's API runs it for a signed-in user."""
    with psycopg.connect(admin_dsn) as c:
        c.execute(sql.SQL("set local role {}").format(sql.Identifier(role)))
        if claims is not None:
            c.execute("select set_config('request.jwt.claims', %s, true)", [json.dumps(claims)])
        return c.execute(query, params).fetchall()


def test_the_writer_reads_but_cannot_change_rows_directly(writer_dsn, saved):
    with psycopg.connect(writer_dsn, autocommit=True) as c:
        assert c.execute("select count(*) from investigations").fetchone() == (1,)
        for stmt in (
            "delete from investigations",
            "delete from findings",
            "update investigations set metric = 'x'",
            "update hypotheses set status = 'confirmed'",
            "insert into reports (investigation_id, title, body_markdown) "
            "select id, 't', 'b' from investigations",
            "truncate memory_documents",
            "create table public.sneaky (x int)",
            "alter table investigations disable row level security",
            "set role service_role",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                c.execute(stmt)
    with PostgresStore(writer_dsn) as store:
        assert store.get_investigation(saved.run_id) == saved


def test_only_the_writer_may_call_the_write_function(admin_dsn, saved):
    args = "('{}'::json, '[]', '[]', '[]', null, '[]')"
    for role in ("anon", "authenticated"):
        with pytest.raises(errors.InsufficientPrivilege):
            as_role(admin_dsn, role, f"select public.save_investigation{args}")


def test_rls_anon_sees_nothing_and_signed_in_users_only_read(admin_dsn, saved):
    for table in TABLES:
        with pytest.raises(errors.InsufficientPrivilege):
            as_role(admin_dsn, "anon", f"select count(*) from {table}")
        count = f"select count(*) from {table}"
        assert as_role(admin_dsn, "authenticated", count, claims=DEFAULT_TEAM)[0][0] >= 1
    with pytest.raises(errors.InsufficientPrivilege):
        as_role(admin_dsn, "anon", "select * from match_memory_documents(array_fill(0.1::real, "
                "array[256])::extensions.vector, 1, '{}')")  # fmt: skip
    with pytest.raises(errors.InsufficientPrivilege):
        as_role(admin_dsn, "authenticated", "delete from investigations")
    # with the grants in place, row-level security is what hides rows from a role with no policy
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute("grant select on investigations to anon")
    assert as_role(admin_dsn, "anon", "select count(*) from investigations") == [(0,)]


def test_vector_type_lives_in_the_extensions_schema(writer_dsn, saved):
    with psycopg.connect(writer_dsn) as c:
        schema = c.execute(
            "select n.nspname from pg_type t join pg_namespace n on n.oid = t.typnamespace "
            "where t.typname = 'vector'"
        ).fetchone()
        assert schema == ("extensions",)
        path = c.execute("show search_path").fetchone()[0]
        assert "extensions" not in path  # the store finds the type without it


def test_migrations_apply_twice(admin_dsn):
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        for f in migration_files():
            c.execute(f.read_text())
        assert c.execute("select count(*) from investigations").fetchone() == (0,)


def test_an_outage_keeps_the_investigation_locally_until_sync(tmp_path: Path, writer_dsn, embedder):
    local = tmp_path / "store.duckdb"
    down = SupabaseStore(closed_port_dsn(), local_path=local, embedder=embedder, connect_timeout=2)
    assert down.save_investigation(ios_revenue_drop()) == "run-ios-revenue"
    assert down.save_investigation(de_signup_drop()) == "run-de-signups"
    # still answerable while Supabase is down, from the local copy
    assert down.get_investigation("run-ios-revenue") == ios_revenue_drop()
    assert down.search_similar("german signups dropped", k=1)[0].run_id == "run-de-signups"
    assert down.local().pending() == ["run-ios-revenue", "run-de-signups"]
    still_down = down.flush_outbox()
    assert still_down.sent == [] and still_down.remaining == ["run-ios-revenue", "run-de-signups"]
    assert "cannot reach" in (still_down.error or "")
    down.close()

    with SupabaseStore(writer_dsn, local_path=local, embedder=embedder) as up:
        assert up.remote.get_investigation("run-ios-revenue") is None
        result = flush_outbox(up)
        assert result.sent == ["run-ios-revenue", "run-de-signups"] and result.remaining == []
        assert result.summary() == "2 sent, 0 waiting"
        assert up.remote.get_investigation("run-ios-revenue") == ios_revenue_drop()
        assert up.remote.get_investigation("run-de-signups") == de_signup_drop()
        hits = up.remote.search_similar("ios app release revenue fell", k=1)
        assert hits[0].run_id == "run-ios-revenue"
        again = up.flush_outbox()
        assert again.sent == [] and again.remaining == []
    with DuckDBStore(local, embedder=embedder) as kept:  # the local copy stays
        assert kept.get_investigation("run-de-signups") == de_signup_drop()


def test_sync_never_overwrites_a_newer_save(tmp_path: Path, writer_dsn, embedder):
    local = tmp_path / "store.duckdb"
    with SupabaseStore(closed_port_dsn(), local_path=local, embedder=embedder) as down:
        down.save_investigation(ios_revenue_drop(report_md="# old\n\nqueued during the outage"))
    newer = ios_revenue_drop(report_md="# new\n\nsaved directly later")
    with PostgresStore(writer_dsn, embedder=embedder) as direct:
        direct.save_investigation(newer)
    with SupabaseStore(writer_dsn, local_path=local, embedder=embedder) as up:
        result = up.flush_outbox()
        assert result.superseded == ["run-ios-revenue"] and result.sent == []
        assert up.get_investigation("run-ios-revenue") == newer
        assert up.local().pending() == []


def test_a_refused_record_stays_queued_and_not_blocking(tmp_path, writer_dsn, admin_dsn, embedder):
    local = tmp_path / "store.duckdb"
    with SupabaseStore(closed_port_dsn(), local_path=local, embedder=embedder) as down:
        down.save_investigation(android_dau_drop())
        down.save_investigation(de_signup_drop())
    with psycopg.connect(admin_dsn) as c:
        # the team database refuses the DAU run (e.g. a constraint added since)
        c.execute("alter table investigations add constraint no_dau check (metric_name <> 'dau')")
    with SupabaseStore(writer_dsn, local_path=local, embedder=embedder) as up:
        result = up.flush_outbox()
    assert result.sent == ["run-de-signups"]
    assert list(result.failed) == ["run-android-dau"] and result.remaining == ["run-android-dau"]
    assert "no_dau" in result.failed["run-android-dau"]


def test_config_picks_the_backend(tmp_path: Path, monkeypatch, embedder, writer_dsn):
    path = tmp_path / "s.duckdb"
    env = {"DRILLDOWN_STORE_PATH": str(path)}
    with store_from_config(env, embedder=embedder) as s:
        assert isinstance(s, DuckDBStore) and s.path == path
    with store_from_config({**env, "SUPABASE_DB_URL": writer_dsn}, embedder=embedder) as s:
        assert isinstance(s, SupabaseStore) and s.local_path == path
        s.save_investigation(de_signup_drop())
        assert s.remote.get_investigation("run-de-signups") == de_signup_drop()
    forced = {**env, "SUPABASE_DB_URL": writer_dsn, "DRILLDOWN_STORE": "duckdb"}
    with store_from_config(forced, embedder=embedder) as s:
        assert isinstance(s, DuckDBStore)
    with pytest.raises(StoreConfigError, match="needs SUPABASE_DB_URL"):
        store_from_config({"DRILLDOWN_STORE": "supabase"}, embedder=embedder)
    with pytest.raises(StoreConfigError, match="'duckdb' or 'supabase', got 'mongo'") as ei:
        store_from_config({"DRILLDOWN_STORE": "mongo"}, embedder=embedder)
    assert isinstance(ei.value, ValueError)
    fresh = tmp_path / "fresh.duckdb"
    with pytest.raises(StoreConfigError, match="nothing to sync"):
        flush_outbox(env={"DRILLDOWN_STORE_PATH": str(fresh)})
    assert not fresh.exists()


def test_unreachable_without_a_local_copy_is_a_clear_error(tmp_path: Path, embedder):
    with SupabaseStore(closed_port_dsn(), local_path=tmp_path / "none.duckdb",
                       embedder=embedder, connect_timeout=2) as down:  # fmt: skip
        with pytest.raises(StoreUnavailable, match="cannot reach the Postgres store") as ei:
            down.list_investigations()
    assert "\n" not in str(ei.value)
    assert not (tmp_path / "none.duckdb").exists()


def test_the_stored_rows_are_queryable_in_sql(admin_dsn, saved):
    with psycopg.connect(admin_dsn) as c:
        rows = c.execute(
            "select h.status, h.confidence, f.status, f.segment, e.tool, e.tokens "
            "from investigations i join hypotheses h on h.investigation_id = i.id "
            "join findings f on f.hypothesis_id = h.hypothesis_id and f.investigation_id = i.id "
            "join evidence e on e.hypothesis_id = h.hypothesis_id and e.investigation_id = i.id "
            "order by h.position"
        ).fetchall()
    assert rows == [
        ("confirmed", 0.9, "accepted", {"platform": "ios", "app_version": "5.2"},
         "metric_compare_periods", 310),
        ("ruled_out", 0.7, "dismissed", {"platform": "android"}, "metric_aggregate", 120),
    ]  # fmt: skip


def test_a_wrong_password_is_an_error_not_an_outage(tmp_path: Path, pg_server, pg_db, embedder):
    with psycopg.connect(pg_server.admin_uri(pg_db), autocommit=True) as c:
        c.execute("create role locked_out nologin")
    dsn = pg_server.writer_dsn(pg_db).replace("drilldown_writer", "locked_out")
    local = tmp_path / "store.duckdb"
    with SupabaseStore(dsn, local_path=local, embedder=embedder) as store:
        with pytest.raises(StoreError, match="refused the connection") as ei:
            store.save_investigation(de_signup_drop())
    assert not isinstance(ei.value, StoreUnavailable)
    with SupabaseStore("not a url", local_path=local, embedder=embedder) as store:
        with pytest.raises(StoreError, match="invalid Postgres connection string"):
            store.save_investigation(de_signup_drop())
    assert not local.exists()  # not silently queued: the settings need fixing


def test_every_backend_satisfies_the_store_interface(tmp_path: Path, writer_dsn, embedder):
    stores = [
        DuckDBStore(tmp_path / "a.duckdb", embedder=embedder),
        PostgresStore(writer_dsn, embedder=embedder),
        SupabaseStore(writer_dsn, local_path=tmp_path / "b.duckdb", embedder=embedder),
    ]
    for s in stores:
        assert isinstance(s, Store)
        s.close()


def test_a_database_of_the_first_migration_is_upgraded_keeping_what_it_holds(pg_server, embedder):
    from tests.support.postgres import ROLES_SQL

    name = "t_upgrade_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server.admin_uri(), autocommit=True) as c:
        c.execute(f'create database "{name}"')
    try:
        first, *later = migration_files()
        with psycopg.connect(pg_server.admin_uri(name), autocommit=True) as c:
            c.execute(ROLES_SQL.read_text())
            c.execute(first.read_text())
            c.execute("alter role drilldown_writer login")
        old = ios_revenue_drop()
        with PostgresStore(pg_server.writer_dsn(name), embedder=embedder) as store:
            store.save_investigation(old)
        with psycopg.connect(pg_server.admin_uri(name), autocommit=True) as c:
            for f in later:
                c.execute(f.read_text())
        with PostgresStore(pg_server.writer_dsn(name), embedder=embedder) as store:
            assert store.get_investigation(old.run_id) == old
            [dismissed] = store.dismissed_findings("sum(revenue)", data=old.data_identity)
            assert dismissed["run_id"] == old.run_id
            named = ios_revenue_drop(run_id="run-named", data_source="shop")
            store.save_investigation(named)
            assert store.get_investigation("run-named") == named
        # what the one writer saved before teams stays its team's (and its signed-in users')
        teams = "select run_id, team from investigations order by run_id"
        assert as_role(pg_server.admin_uri(name), "authenticated", teams, claims=DEFAULT_TEAM) == [
            ("run-ios-revenue", "default"), ("run-named", "default")]  # fmt: skip
    finally:
        with psycopg.connect(pg_server.admin_uri(), autocommit=True) as c:
            c.execute(f'drop database "{name}" with (force)')

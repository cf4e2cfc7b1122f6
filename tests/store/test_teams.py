"""One store, several teams, on a real Postgres + pgvector: each team's writer reads, saves and
replaces only its own team's investigations, enforced by the database (row-level security and
the write function), whatever the writer's connection tries."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo

from tasks.store import PostgresStore, StoreError
from tests.store.test_supabase import as_role
from tests.support.records import TABLES, de_signup_drop, ios_revenue_drop

DIRECT_WRITES = ("delete from {t}", "update {t} set id = id")


@pytest.fixture
def admin_dsn(pg_server, pg_db) -> str:
    return pg_server.admin_uri(pg_db)


@pytest.fixture
def team_writer(pg_server, pg_db) -> Iterator[Callable[..., str]]:
    """Make a team's writer as the migrations prescribe (a login role in drilldown_writers,
    mapped to its team in public.team_writers); returns its DSN. The roles go afterwards."""
    admin = pg_server.admin_uri(pg_db)
    made: list[str] = []

    def make(team: str | None) -> str:
        role = f"drilldown_writer_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(sql.SQL("create role {} with login in role drilldown_writers")
                      .format(sql.Identifier(role)))  # fmt: skip
            made.append(role)
            if team is not None:
                c.execute("insert into public.team_writers (role_name, team) values (%s, %s)",
                          [role, team])  # fmt: skip
        return make_conninfo(admin, user=role)

    yield make
    with psycopg.connect(pg_server.admin_uri(), autocommit=True) as c:
        for role in made:
            c.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


@pytest.fixture
def teams(team_writer, embedder) -> tuple[str, str]:
    """Team A's and team B's writer DSNs, with A's revenue investigation saved by A."""
    a, b = team_writer("team-a"), team_writer("team-b")
    with PostgresStore(a, embedder=embedder) as store:
        store.save_investigation(ios_revenue_drop())
    return a, b


def stored_rows(admin_dsn: str) -> dict[str, list[tuple]]:
    """Every row of every memory table, as the owner sees them."""
    with psycopg.connect(admin_dsn) as c:
        return {t: c.execute(f"select * from {t} order by id").fetchall() for t in TABLES}


def assert_kept(before: dict[str, list[tuple]], admin_dsn: str) -> None:
    """Every row stored before is still there, unchanged (beside any rows added since)."""
    after = stored_rows(admin_dsn)
    for t in TABLES:
        assert [r for r in before[t] if r not in after[t]] == [], t


def as_signed_in(admin_dsn: str, claims: dict, query: str) -> list[tuple]:
    """Run a query as Supabase's API runs it for a signed-in user with these JWT claims."""
    return as_role(admin_dsn, "authenticated", query, claims=claims)


def test_a_writer_sees_nothing_of_another_team(teams, embedder):
    _, b = teams
    with PostgresStore(b, embedder=embedder) as store:
        assert store.get_investigation("run-ios-revenue") is None
        assert store.list_investigations() == []
        assert store.search_similar("ios app release revenue fell", k=5) == []
        revenue = ios_revenue_drop().data_identity
        assert store.dismissed_findings("sum(revenue)", data=revenue) == []
    with psycopg.connect(b) as c:
        for t in TABLES:
            assert c.execute(f"select count(*) from {t}").fetchone() == (0,), t
        found = c.execute("select count(*) from match_memory_documents("
                          "array_fill(0.1::real, array[256])::extensions.vector, 10, '{}')")
        assert found.fetchone() == (0,)


def test_saving_under_another_teams_run_id_leaves_its_investigation_alone(
    teams, admin_dsn, embedder
):
    a, b = teams
    before = stored_rows(admin_dsn)
    tampered = ios_revenue_drop(metric="tampered", findings=[], report_md="# nothing here")
    with PostgresStore(b, embedder=embedder) as store:
        store.save_investigation(tampered)  # B's own investigation of that name
        assert store.get_investigation("run-ios-revenue") == tampered
    with PostgresStore(a, embedder=embedder) as store:
        assert store.get_investigation("run-ios-revenue") == ios_revenue_drop()
        [finding] = store.dismissed_findings("sum(revenue)",
                                             data=ios_revenue_drop().data_identity)  # fmt: skip
        assert finding["run_id"] == "run-ios-revenue"
    assert_kept(before, admin_dsn)
    with psycopg.connect(admin_dsn) as c:
        teams_of_run = c.execute("select team, metric from investigations order by team")
        assert teams_of_run.fetchall() == [("team-a", "sum(revenue)"), ("team-b", "tampered")]


def test_a_writer_cannot_change_another_teams_rows_directly(teams, admin_dsn, embedder):
    _, b = teams
    before = stored_rows(admin_dsn)
    with psycopg.connect(b, autocommit=True) as c:
        for t in TABLES:
            for stmt in DIRECT_WRITES:
                with pytest.raises(errors.InsufficientPrivilege):
                    c.execute(stmt.format(t=t))
    # were the writers granted writes by mistake, row-level security still confines them
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        for t in TABLES:
            c.execute(f"grant insert, update, delete on {t} to drilldown_writers")
        a_id = c.execute("select id from investigations").fetchone()[0]
    with PostgresStore(b, embedder=embedder) as store:
        store.save_investigation(de_signup_drop())
    with psycopg.connect(b, autocommit=True) as c:
        for t in TABLES:  # A's rows are out of reach
            for stmt in DIRECT_WRITES:
                where = "id = %s" if t == "investigations" else "investigation_id = %s"
                assert c.execute(f"{stmt.format(t=t)} where {where}", [a_id]).rowcount == 0
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            c.execute("insert into reports (investigation_id, title, body_markdown) "
                      "values (%s, 'tampered', 'tampered')", [a_id])  # fmt: skip
        # B's own rows are B's to change, but never to hand to team A
        assert c.execute("update investigations set metric = 'edited'").rowcount == 1
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            c.execute("update investigations set team = 'team-a'")
        assert c.execute("delete from investigations").rowcount == 1
    assert_kept(before, admin_dsn)


def test_each_team_saves_and_reads_its_own(teams, embedder):
    a, b = teams
    with PostgresStore(b, embedder=embedder) as store:
        store.save_investigation(de_signup_drop())
        assert store.get_investigation("run-de-signups") == de_signup_drop()
        assert [s.run_id for s in store.list_investigations()] == ["run-de-signups"]
        hits = store.search_similar("german signups dropped", k=5)
        assert [h.run_id for h in hits] == ["run-de-signups"]
        changed = de_signup_drop(report_md="# Signups\n\nrewritten")
        store.save_investigation(changed)  # B replaces its own run whole
        assert store.get_investigation("run-de-signups") == changed
    with PostgresStore(a, embedder=embedder) as store:
        assert [s.run_id for s in store.list_investigations()] == ["run-ios-revenue"]
        assert store.get_investigation("run-de-signups") is None


def test_a_writer_of_no_team_is_refused_with_a_clear_error(team_writer, admin_dsn, embedder):
    nobody = team_writer(None)
    with PostgresStore(nobody, embedder=embedder) as store:
        for attempt in (lambda: store.save_investigation(de_signup_drop()),
                        store.list_investigations):  # fmt: skip
            with pytest.raises(StoreError, match="belongs to no team") as ei:
                attempt()
            assert "\n" not in str(ei.value)
    with psycopg.connect(nobody) as c:  # the database refuses it too
        with pytest.raises(errors.InsufficientPrivilege, match="belongs to no team"):
            c.execute("select public.save_investigation("
                      """'{"run_id": "r", "content_hash": "h"}', '[]', '[]', '[]', null, '[]')""")
    assert all(rows == [] for rows in stored_rows(admin_dsn).values())


def test_claims_a_writer_sets_itself_give_it_no_team(teams):
    _, b = teams
    with psycopg.connect(b) as c:
        c.execute("select set_config('request.jwt.claims', %s, false)",
                  [json.dumps({"app_metadata": {"team": "team-a"}})])  # fmt: skip
        assert c.execute("select count(*) from investigations").fetchone() == (0,)
        with pytest.raises(errors.InsufficientPrivilege):
            c.execute("set role authenticated")


def test_signed_in_users_read_their_teams_investigations_only(teams, admin_dsn):
    count = "select count(*) from investigations"
    assert as_signed_in(admin_dsn, {"app_metadata": {"team": "team-a"}}, count) == [(1,)]
    for claims in ({"app_metadata": {"team": "team-b"}}, {},
                   {"user_metadata": {"team": "team-a"}}):  # a user writes user_metadata
        for t in TABLES:
            assert as_signed_in(admin_dsn, claims, f"select count(*) from {t}") == [(0,)], claims

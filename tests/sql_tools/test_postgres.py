"""The Postgres tool context on a real Postgres: the tools answer as on DuckDB, hostile arguments
are refused with the same codes, and the database itself holds the line: a role that may write
is refused, every query is read-only and time-limited, and no error shows the password."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import sql_tools._postgres as pg
from sql_tools import Limits, QueryRejected, QueryTimeout, SqlToolError, ToolContext
from sql_tools._postgres import PostgresContext, UnsafeRole, parse_postgres_url, postgres_work_mem
from tasks.ingest.load import load_files
from tasks.ingest.postgres import open_postgres
from tasks.tools import dispatch
from tests.sql_tools.test_golden_sql import CASES as GOLDEN_CASES
from tests.support.pg_source import as_role, copy_tables, differences, password_role, reader_role
from tests.test_attacks import F1, REFUSED, recorded_runs

WEEK1 = {"start": "2024-01-01", "end": "2024-01-07"}
WEEK2 = {"start": "2024-01-08", "end": "2024-01-14"}
SECRET = "S3cret-pw-4711"


@pytest.fixture(scope="module")
def shop_url(shop_pg: str) -> str:
    """A role that may only read the shop tables (as ``drilldown postgres-role`` creates it)."""
    return reader_role(shop_pg)


@pytest.fixture
def pg_ctx(shop_url: str):
    with open_postgres(shop_url) as ctx:
        yield ctx


@pytest.fixture
def duck_ctx(shop_db):
    with ToolContext(shop_db) as ctx:
        yield ctx


def call(ctx: Any, name: str, args: Any) -> tuple[bool, dict[str, Any]]:
    return dispatch(ctx, name, args)


def same(a: Any, b: Any) -> list[str]:
    """Where two tool results differ (floats to 1e-9 relative), ``sql`` and timings aside."""
    return differences(a, b, skip=frozenset({"sql", "elapsed_ms"}))


# --- the URL -----------------------------------------------------------------------------------


def test_url_shows_everything_but_the_password():
    src = parse_postgres_url(
        f"postgresql://ana:{SECRET}@db.example:5433/shop?sslmode=require&schema=sales"
        "&tables=events,users&query_timeout=30"
    )
    assert src.conninfo["password"] == SECRET and src.conninfo["sslmode"] == "require"
    assert "schema" not in src.conninfo and "tables" not in src.conninfo
    assert (src.schema, src.tables, src.timeout_s) == ("sales", ("events", "users"), 30.0)
    assert src.display == (
        "postgresql://ana@db.example:5433/shop?sslmode=require&schema=sales&tables=events,users"
        "&query_timeout=30"
    )
    assert src.location == "postgresql://db.example:5433/shop?schema=sales&tables=events,users"
    assert SECRET not in src.scrub(f"failed for {SECRET}")
    same_place = parse_postgres_url(f"postgres://bob:other@db.example:5433/shop?{'schema=sales'}")
    assert same_place.location.startswith("postgresql://db.example:5433/shop?schema=sales")


def test_password_in_a_query_parameter_is_kept_out_too():
    src = parse_postgres_url(f"postgresql://ana@/shop?host=/run/pg&password={SECRET}")
    assert src.password == SECRET
    assert SECRET not in src.display and SECRET not in src.location
    assert pg.without_password(f"postgresql://ana:{SECRET}@h/db?password={SECRET}&schema=x") == (
        "postgresql://ana@h/db?schema=x"
    )


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_query_timeout_must_be_positive_seconds(value):
    with pytest.raises(SqlToolError, match="query_timeout"):
        parse_postgres_url(f"postgresql://a@h/db?query_timeout={value}")


def test_malformed_url_is_one_line_without_the_password():
    with pytest.raises(SqlToolError) as err:
        parse_postgres_url(f"postgresql://ana:{SECRET}@h/db?nonsense=1")
    assert err.value.code == "database_error" and SECRET not in err.value.message


# --- reading ---------------------------------------------------------------------------------


def test_select_only_role_reads_the_schema_tables(pg_ctx, duck_ctx):
    assert pg_ctx.dialect == "postgres"
    assert pg_ctx.schema.table_names == ["customers", "sales", "visits"]
    # column types in the product's vocabulary, as for the DuckDB file the rows came from
    assert pg_ctx.schema.tables == duck_ctx.schema.tables
    out = pg_ctx.run('SELECT count(*) FROM "sales"', max_rows=5)
    assert out.rows == [(6,)]


def test_tables_parameter_chooses_the_tables(shop_url):
    with PostgresContext(shop_url + "&tables=sales,customers") as ctx:
        assert ctx.schema.table_names == ["customers", "sales"]
        with pytest.raises(QueryRejected, match="'visits'"):
            ctx.run('SELECT count(*) FROM "visits"', max_rows=1)


def test_missing_table_or_schema_is_one_line(shop_url):
    with pytest.raises(SqlToolError) as err:
        PostgresContext(shop_url + "&tables=sales,nope")
    assert err.value.code == "unknown_table" and "'nope'" in err.value.message
    assert "sales" in err.value.message  # the valid ones are listed
    with pytest.raises(SqlToolError) as err:
        PostgresContext(shop_url + "&schema=elsewhere")
    assert err.value.code == "unknown_table" and "'elsewhere'" in err.value.message


TOOL_CALLS = [
    ("metric_describe", {"response_format": "detailed"}),
    ("metric_sample", {"table": "sales", "n": 3}),
    ("metric_sample", {"table": "visits", "columns": ["page", "note"], "n": 10}),
    (
        "metric_aggregate",
        {
            "table": "sales",
            "measures": [
                {"agg": "sum", "column": "revenue"},
                {"agg": "count"},
                {"agg": "avg", "column": "orders"},
                {"agg": "count_distinct", "column": "product"},
            ],
            "group_by": ["region", "customers.tier"],
            "filters": [{"column": "product", "op": "contains", "value": "dg"}],
        },
    ),
    (
        "metric_aggregate",
        {
            "table": "sales",
            "measures": [{"agg": "max", "column": "day"}, {"agg": "min", "column": "region"}],
            "filters": [{"column": "day", "op": "between", "value": ["2024-01-01", "2024-01-10"]}],
        },
    ),
    (
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": WEEK2,
            "group_by": ["region"],
        },
    ),
    (
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "count"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": WEEK2,
            "group_by": ["customers.tier"],
        },
    ),
    (
        "metric_compare_periods",
        {
            "table": "visits",
            "metric": {"agg": "sum", "column": "visits"},
            "time_column": "ts",
            "baseline": WEEK1,
            "comparison": WEEK2,
        },
    ),
    (  # values in another letter case: no rows, and notes naming the values held
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": WEEK2,
            "filters": [
                {"column": "region", "op": "in", "value": ["eu", "Us"]},
                {"column": "customers.tier", "op": "=", "value": "Gold"},
            ],
        },
    ),
]


@pytest.mark.parametrize(("tool", "args"), TOOL_CALLS, ids=[t for t, _ in TOOL_CALLS])
def test_tools_answer_as_on_duckdb(pg_ctx, duck_ctx, tool, args):
    is_error, on_pg = call(pg_ctx, tool, args)
    assert not is_error, on_pg
    _, on_duck = call(duck_ctx, tool, args)
    if tool == "metric_describe":  # a table in Postgres came from no file
        for t in on_duck["tables"]:
            t["source"] = None
    assert same(on_duck, on_pg) == []
    if tool != "metric_describe":  # the reported SQL re-runs as it is, with its parameters
        with psycopg.connect(_conninfo(pg_ctx)) as con:
            rows = con.execute(on_pg["sql"], on_pg["params"]).fetchall()
        assert len(rows) >= len(on_pg["rows"])


def test_seeded_sample_is_reproducible(pg_ctx):
    args = {"table": "sales", "n": 4, "seed": 7}
    first, again = call(pg_ctx, "metric_sample", args)[1], call(pg_ctx, "metric_sample", args)[1]
    assert first["rows"] == again["rows"] and len(first["rows"]) == 4


def _conninfo(ctx: PostgresContext) -> str:
    return psycopg.conninfo.make_conninfo("", **ctx.source.conninfo)


# --- hostile arguments (the ARG family of tests/test_attacks.py) --------------------------------


@pytest.fixture(scope="module")
def f1_url(pg_server, tmp_path_factory) -> str:
    from tests.support.pg_source import create_database

    root = tmp_path_factory.mktemp("f1pg")
    (root / "data.csv").write_text(F1)
    load_files([root / "data.csv"], root / "f1.duckdb")
    uri = create_database(pg_server.admin_uri())
    copy_tables(root / "f1.duckdb", uri)
    return reader_role(uri)


@pytest.fixture
def guarded_pg(f1_url):
    with open_postgres(f1_url, Limits(timeout_s=2)) as ctx:
        yield ctx, recorded_runs(ctx)


@pytest.mark.parametrize(("case", "tool", "args", "code"), REFUSED, ids=[r[0] for r in REFUSED])
def test_hostile_arguments_are_refused_with_the_same_codes(guarded_pg, case, tool, args, code):
    ctx, calls = guarded_pg
    is_error, payload = call(ctx, tool, args)
    assert is_error, payload
    assert payload["error"]["code"] == code, payload
    assert calls == [], "no SQL may run for a refused call"


def test_sql_in_a_filter_value_is_inert_data(guarded_pg):
    ctx, calls = guarded_pg
    value = "x' OR 1=1; DROP TABLE data; --"
    is_error, out = call(
        ctx,
        "metric_aggregate",
        {
            "table": "data",
            "measures": [{"agg": "sum", "column": "revenue"}],
            "group_by": ["region"],
            "filters": [{"column": "product", "op": "=", "value": value}],
        },
    )
    assert not is_error and out["matched_count"] == 0 and out["params"]["p1"] == value
    # the query, then the look for the value in another letter case (nothing matched): both
    # bind the value as a parameter
    assert len(calls) == 2 and not any("DROP" in sql for sql in calls), calls


def test_contains_matches_percent_and_underscore_literally(guarded_pg):
    ctx, _ = guarded_pg
    for needle, expected in (("%", 1), ("_", 1), ("%%", 0), ("%_o", 1)):
        _, out = call(
            ctx,
            "metric_aggregate",
            {
                "table": "data",
                "measures": [{"agg": "count", "column": "product"}],
                "filters": [{"column": "product", "op": "contains", "value": needle}],
            },
        )
        assert out["rows"][0]["count_product"] == expected, needle


# --- the database holds the line ---------------------------------------------------------------


def test_role_that_may_insert_is_refused(shop_pg):
    url = reader_role(shop_pg)
    role = parse_postgres_url(url).conninfo["user"]
    with psycopg.connect(shop_pg, autocommit=True) as c:
        c.execute(f'GRANT INSERT ON "customers" TO "{role}"')
    with pytest.raises(UnsafeRole) as err:
        PostgresContext(url)
    assert err.value.code == "unsafe_role"
    assert f"role {role!r}" in err.value.message and "'customers'" in err.value.message
    assert "\n" not in err.value.message and "postgres-role" in err.value.message
    # reading only the other tables is fine: the check is on the tables it would read
    with PostgresContext(url + "&tables=sales") as ctx:
        assert ctx.schema.table_names == ["sales"]


@pytest.mark.parametrize("privilege", ["UPDATE", "DELETE", "TRUNCATE", "UPDATE (tier)"])
def test_every_write_privilege_is_refused(shop_pg, privilege):
    url = reader_role(shop_pg)
    role = parse_postgres_url(url).conninfo["user"]
    grant = privilege.replace("(tier)", '("tier")')
    with psycopg.connect(shop_pg, autocommit=True) as c:
        c.execute(f'GRANT {grant} ON "customers" TO "{role}"')
    with pytest.raises(UnsafeRole, match="'customers'"):
        PostgresContext(url)


@pytest.mark.parametrize("attribute", ["SUPERUSER", "BYPASSRLS"])
def test_superuser_and_bypassrls_are_refused(shop_pg, attribute):
    url = reader_role(shop_pg)
    role = parse_postgres_url(url).conninfo["user"]
    with psycopg.connect(shop_pg, autocommit=True) as c:
        c.execute(f'ALTER ROLE "{role}" {attribute}')
    with pytest.raises(UnsafeRole) as err:
        PostgresContext(url)
    assert ("superuser" if attribute == "SUPERUSER" else "row-level security") in err.value.message


def test_a_write_past_the_guard_is_refused_by_the_read_only_transaction(pg_database, monkeypatch):
    # a role that may write, let in by skipping our check, and queries our guard never sees
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("CREATE TABLE t (k int)")
        c.execute("INSERT INTO t VALUES (1), (2)")
        c.execute(
            "CREATE FUNCTION smuggle() RETURNS int LANGUAGE sql "
            "AS 'INSERT INTO public.t VALUES (3) RETURNING 1'"
        )
    url = reader_role(uri, ["t"])
    role = parse_postgres_url(url).conninfo["user"]
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute(f'GRANT INSERT, DELETE ON t TO "{role}"')
    with pytest.raises(UnsafeRole):
        PostgresContext(url)
    monkeypatch.setattr(PostgresContext, "_refuse_unsafe_role", lambda self: None)
    monkeypatch.setattr(pg, "check_postgres_select", lambda *a, **k: None)
    with PostgresContext(url) as ctx:
        # a SELECT that writes (the session finds functions of pg_catalog only: named in full)
        for write in ("SELECT public.smuggle()", "SELECT lo_create(0)"):
            with pytest.raises(QueryRejected, match="read-only transaction"):
                ctx.run(write, max_rows=1)
            with pytest.raises(QueryRejected, match="read-only transaction"):
                ctx.introspect(write)
        for write in (  # not one query: the server-side cursor declares none of these
            "INSERT INTO t VALUES (4)",
            "WITH d AS (DELETE FROM t RETURNING 1) SELECT count(*) FROM d",
            "SELECT 1; COMMIT; SET default_transaction_read_only = off; INSERT INTO t VALUES (5)",
        ):
            with pytest.raises(SqlToolError):
                ctx.run(write, max_rows=1)
            with pytest.raises(SqlToolError):
                ctx.introspect(write)
        assert ctx.run("SELECT count(*) FROM t", max_rows=1).rows == [(2,)]
    with psycopg.connect(uri) as c:
        assert c.execute("SELECT count(*) FROM t").fetchone() == (2,)


GUARD_BAD = [
    ("SELECT 1; DROP TABLE sales", "single SELECT"),
    ("DELETE FROM sales", "single SELECT"),
    ("SELECT pg_sleep(10)", "'pg_sleep'"),
    ("SELECT set_config('statement_timeout', '0', false)", "'set_config'"),
    ("SELECT nextval('s')", "'nextval'"),
    ("SELECT pg_read_file('/etc/passwd')", "'pg_read_file'"),
    ("SELECT * FROM pg_catalog.pg_authid", "schema 'pg_catalog'"),
    ("SELECT * FROM pg_roles", "'pg_roles'"),
    ("SELECT * FROM sales FOR UPDATE", "Lock"),
    ("WITH d AS (DELETE FROM sales RETURNING 1) SELECT count(*) FROM d", "Delete"),
    ("SELECT * INTO copy FROM sales", "single SELECT|Into"),
    ("SELECT * FROM generate_series(1, 10)", "table functions|'generate_series'"),
    ("SELECT CAST(region AS regclass) FROM sales", "cast"),
    ("SELECT * FROM other.sales", "schema 'other'"),
]


@pytest.mark.parametrize(("sql", "why"), GUARD_BAD, ids=[b[0][:40] for b in GUARD_BAD])
def test_guard_refuses_what_the_builders_never_write(pg_ctx, sql, why):
    with pytest.raises(QueryRejected, match=why):
        pg_ctx.run(sql, max_rows=5)


def test_guard_accepts_public_qualified_tables(pg_ctx):
    assert pg_ctx.run('SELECT count(*) FROM "public"."sales"', max_rows=1).rows == [(6,)]


def test_slow_query_hits_statement_timeout(pg_database):
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("CREATE TABLE big AS SELECT g AS x FROM generate_series(1, 3000) g")
    url = reader_role(uri, ["big"])
    with open_postgres(url, Limits(timeout_s=0.3)) as ctx:
        slow = 'SELECT count(*) FROM "big" AS a CROSS JOIN "big" AS b CROSS JOIN "big" AS c'
        with pytest.raises(QueryTimeout, match="0.3 s"):
            ctx.run(slow, max_rows=1)
        with pytest.raises(QueryTimeout):
            ctx.introspect("SELECT pg_sleep(5)")
        assert ctx.run('SELECT count(*) FROM "big"', max_rows=1).rows == [(3000,)]
    with PostgresContext(url + "&query_timeout=0.2") as ctx:  # the URL's limit wins
        assert ctx.limits.timeout_s == 0.2
        with pytest.raises(QueryTimeout, match="0.2 s"):
            ctx.run(slow, max_rows=1)


def test_sorts_and_hashes_get_a_quarter_of_the_memory_limit(pg_database):
    """The server's default ``work_mem`` (4 MB) makes grouped statements sort on disk; the
    product's statements get a quarter of its memory limit instead, and the session keeps the
    server's own setting outside them."""
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("CREATE TABLE t AS SELECT 1 AS x")
    url = reader_role(uri, ["t"])
    show = "SELECT current_setting('work_mem')"
    for limit, expected in (("1GB", "244140kB"), ("512MiB", "128MB"), ("2 GB", "488281kB")):
        with open_postgres(url, Limits(memory_limit=limit)) as ctx:
            assert ctx.introspect(show) == [(expected,)], limit
            assert ctx.con is not None
            assert ctx.con.execute(show).fetchone() == ("4MB",)  # outside: the server's
    assert postgres_work_mem("lots") is None


def test_results_are_capped_at_max_rows(pg_ctx):
    out = pg_ctx.run('SELECT "region" FROM "sales"', max_rows=2)
    assert len(out.rows) == 2
    from sql_tools import ResourceLimit

    with pytest.raises(ResourceLimit):
        pg_ctx.run_arrow('SELECT "region" FROM "sales"', max_rows=5)


def test_wrong_password_is_one_line_without_it(shop_pg):
    role = password_role(shop_pg, SECRET, ["sales"])
    url = as_role(shop_pg, role)
    right = url.replace(f"{role}@", f"{role}:{SECRET}@")
    with PostgresContext(right) as ctx:  # the right one connects
        assert ctx.schema.table_names == ["sales"] and SECRET not in ctx.display
    wrong = url.replace(f"{role}@", f"{role}:{SECRET}x@")
    with pytest.raises(SqlToolError) as err:
        PostgresContext(wrong)
    message = err.value.message
    assert err.value.code == "database_error" and "password authentication failed" in message
    assert SECRET not in message and "\n" not in message


def test_unreachable_host_is_one_line_without_the_password():
    with pytest.raises(SqlToolError) as err:
        PostgresContext(f"postgresql://ana:{SECRET}@127.0.0.1:1/shop?connect_timeout=3")
    assert err.value.code == "database_error"
    assert err.value.message.startswith("cannot connect to postgresql://ana@127.0.0.1:1/shop")
    assert SECRET not in err.value.message and "\n" not in err.value.message


def test_content_fingerprint_moves_with_the_rows(pg_database):
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("CREATE TABLE t (k int, v double precision)")
        c.execute("INSERT INTO t SELECT g, g * 1.5 FROM generate_series(1, 100) g")
    url = reader_role(uri, ["t"])

    def fingerprint() -> dict[str, Any]:
        with PostgresContext(url) as ctx:
            return ctx.content_fingerprint()

    first = fingerprint()
    assert first == fingerprint()
    assert first["tables"]["t"]["rows"] == 100 and first["tables"]["t"]["columns"] == [
        ["k", "INTEGER"],
        ["v", "DOUBLE"],
    ]
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("UPDATE t SET v = v + 1 WHERE k = 42")  # same count, one value changed
    changed = fingerprint()
    assert changed["tables"]["t"]["rows"] == 100
    assert changed["tables"]["t"]["row_hash_sum"] != first["tables"]["t"]["row_hash_sum"]


def test_names_and_values_with_percent_signs_and_quotes(pg_database):
    # psycopg reads "%" as a placeholder: the rendered text doubles it in names and literals
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("""CREATE TABLE "50%_off" (day date, "growth%" double precision,
                     "seg%s" text, "it's" text)""")  # fmt: skip
        c.execute("""INSERT INTO "50%_off" VALUES ('2024-01-01', 1.5, 'a%b', 'x'),
                     ('2024-01-08', 2.5, '%(p1)s', 'y'), ('2024-01-09', 4, 'a', 'x')""")  # fmt: skip
    with open_postgres(reader_role(uri)) as ctx:
        assert [c.name for c in ctx.schema.tables["50%_off"]] == ["day", "growth%", "seg%s", "it's"]
        is_error, out = call(
            ctx,
            "metric_aggregate",
            {
                "table": "50%_off",
                "measures": [{"agg": "sum", "column": "growth%"}],
                "group_by": ["seg%s"],
                "filters": [{"column": "seg%s", "op": "contains", "value": "%"}],
            },
        )
        assert not is_error, out
        assert out["rows"] == [
            {"seg%s": "%(p1)s", "sum_growth%": 2.5},
            {"seg%s": "a%b", "sum_growth%": 1.5},
        ]
        is_error, out = call(
            ctx,
            "metric_compare_periods",
            {
                "table": "50%_off",
                "metric": {"agg": "sum", "column": "growth%"},
                "time_column": "day",
                "baseline": WEEK1,
                "comparison": WEEK2,
                "group_by": ["it's"],
            },
        )
        assert not is_error, out
        assert {r["it's"]: (r["baseline"], r["comparison"]) for r in out["rows"]} == {
            "x": (1.5, 4.0),
            "y": (None, 2.5),
        }
        with psycopg.connect(_conninfo(ctx)) as con:  # the reported text runs as it is
            assert len(con.execute(out["sql"], out["params"]).fetchall()) == 2


# --- every golden query, as checked in, runs on Postgres with DuckDB's rows ------------------------


@pytest.mark.parametrize("name", list(GOLDEN_CASES))
def test_every_golden_query_runs_on_postgres_with_duckdbs_rows(pg_ctx, duck_ctx, name):
    from sql_tools.catalog import jsonable
    from tests.sql_tools.test_golden_sql import SchemaOnly, golden_path

    query = GOLDEN_CASES[name][1](SchemaOnly(pg_ctx))
    text = golden_path(name, "postgres").read_text()  # the checked-in text...
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("--"))  # ...its SQL
    on_pg = pg_ctx.run(text, query.params, max_rows=1000)
    on_duck = duck_ctx.run(query.sql("duckdb"), query.params, max_rows=1000)
    assert len(on_pg.columns) == len(on_duck.columns)  # unnamed ones are named per database
    if name == "sample_random":  # another hash picks other rows, as many
        assert len(on_pg.rows) == len(on_duck.rows)
        return

    def rows(out: Any) -> list[list[Any]]:
        return sorted(([jsonable(v) for v in r] for r in out.rows), key=repr)

    if name == "engine_leaf_days_copies":  # another hash samples other rows: the cells agree
        cell = on_duck.columns.index("__cell")

        def rows(out: Any) -> list[list[Any]]:
            kept = (r[: cell + 1] for r in out.rows if r[cell] == 1)
            return sorted(([jsonable(v) for v in r] for r in kept), key=repr)

    assert differences(rows(on_duck), rows(on_pg)) == []

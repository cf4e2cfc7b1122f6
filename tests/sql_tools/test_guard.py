"""The statement guard: only one SELECT over known user tables, using builder functions."""

from __future__ import annotations

import duckdb
import pytest

from sql_tools import QueryRejected
from sql_tools._guard import check_postgres_select, check_select, qualify_tables


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE sales(a INT, region VARCHAR)")
    yield c
    c.close()


GOOD = [
    "SELECT a FROM sales",
    'SELECT "t0"."a" FROM "sales" AS "t0"',
    "SELECT a FROM main.sales",
    'WITH x AS (SELECT sum(a) AS s FROM "sales") SELECT s FROM x',
    "SELECT region, count(*) FILTER (WHERE a > $p1) FROM sales GROUP BY ALL",
    "SELECT * FROM sales AS t0 ORDER BY hash(t0, $p1) LIMIT 5",
    "SELECT contains(region, $p1), abs(a), coalesce(a, 0), nullif(a, 0) FROM sales",
    "SELECT a FROM sales WHERE a BETWEEN $p1 AND $p2 OR a IN ($p3, $p4)",
    "SELECT count(*) OVER () FROM sales",
]
BAD = [
    ("SELECT 1; DROP TABLE sales", "one statement"),
    ("COPY sales TO '/tmp/x'", "only SELECT"),
    ("SELECT * FROM read_csv('/etc/passwd')", "table functions"),
    ("SELECT * FROM '/etc/passwd'", "not allowed"),
    ("SELECT * FROM query('select 1')", "table functions"),
    ("SELECT * FROM query_table('sales')", "table functions"),
    ("SELECT getenv('HOME')", "getenv"),
    ("SELECT read_text('/etc/passwd')", "read_text"),
    ("SELECT current_setting('memory_limit')", "current_setting"),
    ("SELECT * FROM duckdb_settings()", "table functions"),
    ("SELECT * FROM information_schema.tables", "schema"),
    ("SELECT * FROM _drilldown.tables", "schema"),
    ("SELECT * FROM system.main.sales", "qualified"),
    ("SELECT * FROM sales, other", "'other'"),
    ("ATTACH 'x.db'", "only SELECT"),
    ("PRAGMA version", "only SELECT"),
    ("CALL pragma_version()", "only SELECT"),
    ("SELECT list_transform([1], lambda x: x + 1)", "not allowed"),
    ("SELECT * FROM sales JOIN (SELECT * FROM glob('/*')) g ON true", "table functions"),
    ("CREATE TEMP TABLE t AS SELECT 1", "only SELECT"),
    ("SELECT 1 FROM sales WHERE a = (SELECT count(*) FROM range(10))", "table functions"),
    ("SELECT FROM WHERE", "parse"),
]


@pytest.mark.parametrize("sql", GOOD)
def test_guard_accepts_builder_shapes(con, sql):
    check_select(con, sql, {"sales"})


@pytest.mark.parametrize(("sql", "why"), BAD, ids=[b[0][:40] for b in BAD])
def test_guard_rejects(con, sql, why):
    with pytest.raises(QueryRejected, match=why):
        check_select(con, sql, {"sales"})


# --- Postgres: the text the builders' trees become (see sql_tools.dialects) ---------------------

PG_GOOD = [
    'SELECT "t0"."a" FROM "sales" AS "t0" WHERE "t0"."region" = %(p1)s',
    'SELECT count(*) FROM "public"."sales"',
    'WITH "x" AS (SELECT sum("a") AS "s" FROM "sales") SELECT "s" FROM "x"',
    "SELECT (POSITION(%(p1)s IN region) > 0), abs(a), coalesce(a, 0), nullif(a, 0) FROM sales",
    "SELECT * FROM sales AS t0 ORDER BY HASHTEXTEXTENDED(CAST(ROW(t0, %(p1)s) AS TEXT), 0)",
    "SELECT MOD(HASHTEXTEXTENDED(CAST(ROW(a) AS TEXT), 0), 4) FROM sales",
    "SELECT GROUPING(a, region), count(DISTINCT a) FILTER (WHERE a > 0) FROM sales "
    "GROUP BY GROUPING SETS ((a, region), (a), ())",
    "SELECT CASE WHEN a > CAST('-Infinity' AS DOUBLE PRECISION) THEN a END FROM sales",
    'SELECT x FROM (SELECT a AS x FROM sales) AS "b"',
    'SELECT "a" AS "x%%" FROM "50%%_off"',
]
PG_BAD = [
    ("SELECT 1; DROP TABLE sales", "single SELECT"),
    ("UPDATE sales SET a = 1", "single SELECT"),
    ("SELECT pg_sleep(1)", "'pg_sleep'"),
    ("SELECT * FROM sales FOR UPDATE", "Lock"),
    ("SELECT * FROM pg_catalog.pg_authid", "schema"),
    ("SELECT * FROM other", "'other'"),
    ("SELECT CAST(a AS regclass) FROM sales", "cast"),
    ("SELECT * FROM dblink('x', 'select 1') AS t(a int)", "table functions|dblink"),
    ("SELECT * FROM", "parse"),
]


@pytest.mark.parametrize("sql", PG_GOOD)
def test_postgres_guard_accepts_builder_shapes(sql):
    check_postgres_select(sql, {"sales", "50%_off"}, "public")


@pytest.mark.parametrize(("sql", "why"), PG_BAD, ids=[b[0][:40] for b in PG_BAD])
def test_postgres_guard_rejects(sql, why):
    with pytest.raises(QueryRejected, match=why):
        check_postgres_select(sql, {"sales"}, "public")


READS = [
    ("SELECT a FROM sales", {"sales": 1}),
    ('WITH x AS (SELECT sum(a) AS s FROM "sales") SELECT s FROM x', {"sales": 1}),
    ("SELECT 1 FROM sales AS s1 JOIN main.sales AS s2 ON s1.a = s2.a", {"sales": 2}),
    ("WITH sales AS (SELECT a FROM main.sales) SELECT a FROM sales", {"sales": 1}),
    ("SELECT 1", {}),
]


@pytest.mark.parametrize(("sql", "reads"), READS)
def test_guard_counts_each_pass_over_a_source_table(con, sql, reads):
    """A statement's passes over the user's tables: a reference to a table is one pass (a
    self-join two); a CTE of the same name is not the table."""
    assert dict(check_select(con, sql, {"sales"})) == reads
    pg = sql.replace("main.", "public.")
    assert dict(check_postgres_select(pg, {"sales"}, "public")) == reads


QUALIFIED = [
    ("SELECT a FROM sales", 'SELECT a FROM "public".sales'),
    (
        'SELECT a FROM "sales" AS s WHERE s.a > 1',
        'SELECT a FROM "public"."sales" AS s WHERE s.a > 1',
    ),
    (  # a CTE keeps its name; the table inside it and a join beside it are qualified
        'WITH x AS (SELECT a FROM "sales") SELECT * FROM x JOIN "u""x" ON true',
        'WITH x AS (SELECT a FROM "public"."sales") SELECT * FROM x JOIN "public"."u""x" ON true',
    ),
    ('SELECT 1 FROM "public"."sales", other.t', 'SELECT 1 FROM "public"."sales", other.t'),
    (  # names and values before the table: positions are characters, not bytes
        "SELECT 'é€%%' AS \"ü\" FROM (SELECT 1 FROM \"Straße\") AS q, \"50%%_off\"",
        "SELECT 'é€%%' AS \"ü\" FROM (SELECT 1 FROM \"public\".\"Straße\") AS q, "
        '"public"."50%%_off"',
    ),
    ("SELECT 1", "SELECT 1"),
    ("SELECT * FROM", "SELECT * FROM"),  # not read: left as it is, and finds no table
]


@pytest.mark.parametrize(("sql", "qualified"), QUALIFIED)
def test_postgres_tables_are_named_with_their_schema(sql, qualified):
    assert qualify_tables(sql, "public", placeholders=True) == qualified


def test_a_schema_name_is_quoted_and_its_percent_doubled_only_for_placeholders():
    assert qualify_tables("SELECT 1 FROM t", 'a"b%', placeholders=True) == (
        'SELECT 1 FROM "a""b%%".t'
    )
    assert qualify_tables("SELECT 1 FROM t", 'a"b%', placeholders=False) == (
        'SELECT 1 FROM "a""b%".t'
    )

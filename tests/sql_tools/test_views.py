"""Views of a DuckDB file that read beyond its tables (a file, the session's settings, another
database; directly, through a macro or through another view) are never offered, queried or
fingerprinted, and are named in a note; views over the file's own tables are kept."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from sql_tools import ToolContext
from sql_tools.views import query_of
from tasks.tools import dispatch

MARKER = "PLANTED-FILE-CONTENT-5e1c"

SALES = """
CREATE TABLE sales AS
SELECT DATE '2024-03-01' + d::INTEGER AS day, region, channel,
       (100 + (hash(d, region, channel) % 7)::INTEGER)::DOUBLE
         * CASE WHEN d >= 7 AND region = 'south' THEN 0.3 ELSE 1 END AS revenue
FROM range(14) AS r(d), (VALUES ('north'), ('south'), ('east'), ('west')) AS g(region),
     (VALUES ('web'), ('app')) AS c(channel)
"""


def hostile_views(folder: Path) -> dict[str, str]:
    """view name -> its definition: each reads a file, the settings or the environment."""
    (folder / "planted.txt").write_text(MARKER)
    (folder / "planted.csv").write_text(f"secret\n{MARKER}\n")
    duckdb.sql(f"COPY (SELECT '{MARKER}' AS secret) TO '{folder / 'planted.parquet'}'")
    return {
        "file_text": f"SELECT * FROM read_text('{folder / 'planted.txt'}')",
        "file_csv": f"SELECT * FROM read_csv('{folder / 'planted.csv'}')",
        "file_parquet": f"SELECT * FROM read_parquet('{folder / 'planted.parquet'}')",
        "file_scan": f"SELECT * FROM '{folder / 'planted.csv'}'",
        "file_glob": f"SELECT * FROM glob('{folder}/*')",
        "settings": "SELECT * FROM duckdb_settings()",
        "setting_value": "SELECT current_setting('temp_directory') AS t, * FROM sales",
        "secrets": "SELECT * FROM duckdb_secrets()",
        "databases": "SELECT path FROM duckdb_databases()",
        "extensions": "SELECT * FROM duckdb_extensions()",
        "in_subquery": "SELECT (SELECT max(value) FROM duckdb_settings()) AS v, * FROM sales",
        "over_a_view": "SELECT * FROM settings",
        "over_two_views": "WITH x AS (SELECT * FROM over_a_view) SELECT * FROM x",
        "joined": "SELECT s.* FROM sales AS s, file_text",
        "macro": "SELECT leak(region) AS v FROM sales",
        "version": "SELECT version() AS v",
    }


def build(path: Path, views: dict[str, str]) -> Path:
    con = duckdb.connect(str(path))
    try:
        con.execute(SALES)
        con.execute("CREATE MACRO leak(x) AS current_setting('temp_directory') || x")
        for name, sql in views.items():  # in order: a view over another is made after it
            con.execute(f'CREATE VIEW "{name}" AS {sql}')
    finally:
        con.close()
    return path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """(a file with the hostile views beside ``sales``, the same file without them, the views)"""
    views = hostile_views(tmp_path)
    return build(tmp_path / "views.duckdb", views), build(tmp_path / "plain.duckdb", {}), views


def test_views_reading_beyond_the_file_are_left_out_and_named(planted):
    with_views, plain, views = planted
    with ToolContext(with_views) as ctx, ToolContext(plain) as bare:
        assert ctx.schema.table_names == ["sales"]
        assert set(ctx.schema.left_out) == set(views)
        for name in views:
            assert sum(f"view {name!r} left out" in n for n in ctx.schema.notes) == 1
        # the data's identity is the table's alone: the views neither break it nor change it
        assert ctx.content_fingerprint()["tables"] == bare.content_fingerprint()["tables"]
        assert MARKER not in repr(ctx.schema.notes)


@pytest.mark.parametrize("name", ["file_text", "settings", "over_a_view", "setting_value"])
def test_the_tools_refuse_a_view_left_out(planted, name):
    with_views = planted[0]
    with ToolContext(with_views) as ctx:
        is_error, out = dispatch(ctx, "metric_sample", {"table": name})
    assert is_error and out["error"]["code"] == "unknown_table"
    assert MARKER not in repr(out) and "drilldown-tmp-" not in repr(out)


def test_views_over_the_files_own_tables_are_kept(tmp_path):
    views = {
        "by_region": "SELECT region, sum(revenue) AS r FROM sales GROUP BY ALL",
        "over_view": "WITH x AS (SELECT * FROM by_region) SELECT upper(region) AS u, r FROM x",
        "windowed": "SELECT *, row_number() OVER (PARTITION BY region ORDER BY day) AS n "
        "FROM sales WHERE region LIKE 'n%' QUALIFY n < 3",
        "macro_call": "SELECT double_it(revenue) AS v, list_sum([1, 2]) AS l FROM sales",
        "unioned": "SELECT day FROM sales UNION ALL SELECT day FROM main.sales",
        "pivoted": "PIVOT sales ON region IN ('north', 'south') USING sum(revenue)",
        "constants": "SELECT * FROM (VALUES (1), (2)) AS t(x)",
        'odd "name" AS x': "SELECT CAST(day AS VARCHAR) AS d FROM sales",
    }
    db = tmp_path / "kept.duckdb"
    con = duckdb.connect(str(db))
    con.execute(SALES)
    con.execute("CREATE MACRO double_it(x) AS x * 2")
    for name, sql in views.items():
        con.execute(f"CREATE VIEW {duckdb_ident(name)} AS {sql}")
    con.close()
    with ToolContext(db) as ctx:
        assert ctx.schema.left_out == {}
        assert set(ctx.schema.table_names) == {"sales", *views}
        assert set(ctx.content_fingerprint()["tables"]) == {"sales", *views}


def test_a_view_the_database_cannot_read_is_left_out_of_the_identity(tmp_path):
    """The second wall: a view that passes the reading of its definition but fails when read is
    left out of the fingerprint and named, instead of stopping the investigation."""
    broken = {"broken": "SELECT CAST(region AS INTEGER) AS x FROM sales"}
    db = build(tmp_path / "bad.duckdb", broken)
    plain = build(tmp_path / "plain.duckdb", {})
    with ToolContext(db) as ctx, ToolContext(plain) as bare:
        assert "broken" in ctx.schema.table_names
        assert ctx.content_fingerprint()["tables"] == bare.content_fingerprint()["tables"]
        assert ctx.schema.table_names == ["sales"]
        assert [n for n in ctx.schema.notes if "'broken' left out" in n]


def test_a_view_query_is_found_by_the_tokenizer():
    assert query_of('CREATE VIEW "x AS y" (p, q) AS SELECT 1 AS "AS";') == 'SELECT 1 AS "AS"'
    assert query_of("CREATE VIEW main.v AS WITH c AS (SELECT 1) SELECT * FROM c;") == (
        "WITH c AS (SELECT 1) SELECT * FROM c"
    )


def duckdb_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

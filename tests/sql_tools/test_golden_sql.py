"""Golden SQL: every query the product builds, rendered in every dialect, against checked-in files.

Each case builds one query (a tool's, or one of the engine's) on the shop database (sales joined to
customers, and visits with timestamps) and renders it in each of ``DIALECTS``, laid out by sqlglot
for reading; the text must equal ``golden/<case>.<dialect>.sql``. Any change to how a query is
built or rendered shows up here as a diff to review. After a deliberate change, rewrite the files:

    DRILLDOWN_UPDATE_GOLDENS=1 python -m pytest tests/sql_tools/test_golden_sql.py

The DuckDB files are also run on the database, and the tools are checked to run exactly what
their builders return. The BigQuery and Snowflake rewrites are run on DuckDB too, where DuckDB
can spell them, and must return the rows of the original; what a dialect cannot express is
refused by name.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sqlglot import exp

from sql_tools import ToolContext
from sql_tools._sql import Query, non_finite_query
from sql_tools.aggregate import AggregateInput, aggregate_query
from sql_tools.catalog import jsonable
from sql_tools.compare_periods import ComparePeriodsInput, compare_periods_query
from sql_tools.describe import DescribeInput, describe_query
from sql_tools.dialects import DIALECTS, DialectError, for_bigquery, for_snowflake, render
from sql_tools.sample import SampleInput, sample_query
from tasks.engine.cube import EngineSql, segment_query
from tasks.engine.leaf_days import cells_with_copies
from tasks.engine.parse import build_question
from tasks.engine.quality._scope import _Scope
from tasks.engine.quality.duplicates import Ahead, duplicates_query
from tasks.engine.spec import Question
from tasks.ingest.load import load_files
from tasks.tools import dispatch

GOLDEN = Path(__file__).parent / "golden"
DATA = Path(__file__).parents[1] / "data"
UPDATE = bool(os.environ.get("DRILLDOWN_UPDATE_GOLDENS"))
WEEK1 = {"start": "2024-01-01", "end": "2024-01-07"}
WEEK2 = {"start": "2024-01-08", "end": "2024-01-14"}

# --- the cases: name -> (what it shows, how to build it) -----------------------------------------

Build = Callable[[ToolContext], Query]


def _tool(fn: Callable[[ToolContext, Any], Query], model: type, args: dict[str, Any]) -> Build:
    return lambda ctx: fn(ctx, model.model_validate(args))


def _non_finite(fn: Callable[[ToolContext, Any], Any], model: type, args: dict[str, Any]) -> Build:
    """The follow-up query counting NaN and ±Infinity in the tool's rows (revenue is DOUBLE)."""

    def build(ctx: ToolContext) -> Query:
        q = fn(ctx, model.model_validate(args))
        return non_finite_query(q, [ctx.schema.column(q.table, "revenue")])

    return build


def _question(ctx: ToolContext, **kw: Any) -> Question:
    kw.setdefault("table", "sales")
    if "period_column" not in kw:
        kw.setdefault("time_column", "day")
        kw.setdefault("baseline", "2024-01-01:2024-01-07")
        kw.setdefault("comparison", "2024-01-08:2024-01-14")
    return build_question(ctx.schema, named_metrics=False, **kw)


def _engine(
    method: Callable[[EngineSql], exp.Expression], dims: list[str], **question: Any
) -> Build:
    def build(ctx: ToolContext) -> Query:
        sql = EngineSql(ctx, _question(ctx, **question), dims)
        return Query(method(sql), sql.params.values)

    return build


def _cells_with_copies(k: int, dims: list[str], **question: Any) -> Build:
    def build(ctx: ToolContext) -> Query:
        q = _question(ctx, **question)
        sql = EngineSql(ctx, q, dims)
        scope = _Scope.build(ctx, q, dims)  # type: ignore[arg-type]
        copies = Ahead(*duplicates_query(scope, k), k)
        return Query(cells_with_copies(sql, copies, q.periods.by_dates), sql.params.values)

    return build


def _segment(segment: dict[str, Any], **question: Any) -> Build:
    def build(ctx: ToolContext) -> Query:
        sq = segment_query(ctx, _question(ctx, **question), segment)
        assert sq.tree is not None
        return Query(sq.tree, sq.params)

    return build


AGGREGATE = {
    "table": "sales",
    "measures": [
        {"agg": "sum", "column": "revenue"},
        {"agg": "count_distinct", "column": "customer_id"},
        {"agg": "count"},
        {"agg": "max", "column": "day"},
    ],
    "group_by": ["region"],
    "filters": [
        {"column": "day", "op": "between", "value": ["2024-01-01", "2024-01-14"]},
        {"column": "customers.tier", "op": "not_null"},
        {"column": "region", "op": "not_in", "value": ["LATAM"]},
        {"column": "orders", "op": ">=", "value": 2},
        {"column": "revenue", "op": "<", "value": 1000.5},
    ],
}
SAMPLE_RANDOM = {
    "table": "visits",
    "seed": 7,
    "filters": [
        {"column": "note", "op": "is_null"},
        {"column": "page", "op": "=", "value": "home"},
        {"column": "ts", "op": ">", "value": "2024-01-01T08:00:00"},
    ],
}
COMPARE_DATES = {
    "table": "sales",
    "metric": {"agg": "sum", "column": "revenue"},
    "time_column": "day",
    "baseline": WEEK1,
    "comparison": WEEK2,
    "group_by": ["region"],
    "filters": [
        {"column": "product", "op": "!=", "value": "Gizmo"},
        {"column": "customers.tier", "op": "in", "value": ["gold", "silver"]},
    ],
}
RATIO = {"metric": "sum(revenue) / sum(orders)"}
# a period column instead of dates: the leaves carry no daily statistics
RATIO_BY_LABEL = {**RATIO, "period_column": "product", "baseline": "Widget", "comparison": "Gadget"}
DISTINCT_DAILY = {"metric": "count(distinct customer_id) / count(*)", "grain": "day"}
SALES = {"metric": "sum(revenue)", "filters": ["region != LATAM"]}
VISITS = {
    "table": "visits",
    "metric": "sum(visits)",
    "time_column": "ts",
    "baseline": "2024-01-01:2024-01-07",
    "comparison": "2024-01-08:2024-01-14",
}
DIMS = ["region", "product", "customers.tier"]

CASES: dict[str, tuple[str, Build]] = {
    "describe": (
        "metric_describe: row counts of every table",
        _tool(describe_query, DescribeInput, {}),
    ),
    "sample_filtered": (
        "metric_sample: some columns; contains (with % and _ in the value), in on a joined "
        "column, <=",
        _tool(
            sample_query,
            SampleInput,
            {
                "table": "sales",
                "n": 3,
                "columns": ["day", "product", "revenue"],
                "filters": [
                    {"column": "product", "op": "contains", "value": "50%_"},
                    {"column": "customers.tier", "op": "in", "value": ["gold", "silver"]},
                    {"column": "day", "op": "<=", "value": "2024-01-09"},
                ],
            },
        ),
    ),
    "sample_random": (
        "metric_sample: a reproducible random sample (seed); is_null, =, >",
        _tool(sample_query, SampleInput, SAMPLE_RANDOM),
    ),
    "aggregate": (
        "metric_aggregate: sum, count distinct, count, max by region; between, not_null on a "
        "joined column, not_in, >=, <",
        _tool(aggregate_query, AggregateInput, AGGREGATE),
    ),
    "aggregate_by_joined_column": (
        "metric_aggregate: grouped by a joined table's column, whose output name is table.column",
        _tool(
            aggregate_query,
            AggregateInput,
            {"table": "sales", "measures": [{"agg": "count"}], "group_by": ["customers.tier"]},
        ),
    ),
    "aggregate_ordered": (
        "metric_aggregate: no groups; avg and min, ascending, a smaller limit",
        _tool(
            aggregate_query,
            AggregateInput,
            {
                "table": "visits",
                "measures": [{"agg": "avg", "column": "visits"}, {"agg": "min", "column": "ts"}],
                "order_by": {"by": "min_ts", "direction": "asc"},
                "limit": 5,
            },
        ),
    ),
    "aggregate_non_finite": (
        "metric_aggregate's follow-up: NaN and ±Infinity in the rows it read",
        _non_finite(aggregate_query, AggregateInput, AGGREGATE),
    ),
    "compare_periods_dates": (
        "metric_compare_periods: date ranges, sum per region; != and in on a joined column",
        _tool(compare_periods_query, ComparePeriodsInput, COMPARE_DATES),
    ),
    "compare_periods_timestamps": (
        "metric_compare_periods: date ranges on a TIMESTAMP column, a non-additive avg",
        _tool(
            compare_periods_query,
            ComparePeriodsInput,
            {
                "table": "visits",
                "metric": {"agg": "avg", "column": "visits"},
                "time_column": "ts",
                "baseline": WEEK1,
                "comparison": WEEK2,
                "group_by": ["page"],
            },
        ),
    ),
    "compare_periods_labels": (
        "metric_compare_periods: labels of a period column, a distinct count, no segments",
        _tool(
            compare_periods_query,
            ComparePeriodsInput,
            {
                "table": "sales",
                "metric": {"agg": "count_distinct", "column": "customer_id"},
                "period_column": "region",
                "baseline": {"label": "EU"},
                "comparison": {"label": "US"},
            },
        ),
    ),
    "compare_periods_non_finite": (
        "metric_compare_periods' follow-up: NaN and ±Infinity in the rows it read",
        _non_finite(compare_periods_query, ComparePeriodsInput, COMPARE_DATES),
    ),
    "engine_leaves_sum": (
        "engine leaves: sum of a DOUBLE (non-finite as missing), daily second moments, a filter",
        _engine(lambda s: s.leaves(), DIMS, **SALES),
    ),
    "engine_cube_sum": (
        "engine cube: the leaves above, grouping sets up to depth 2 and the total",
        _engine(lambda s: s.cube(2), DIMS, **SALES),
    ),
    "engine_leaves_ratio": (
        "engine leaves: a ratio over labels of a period column (no daily statistics)",
        _engine(lambda s: s.leaves(), ["region", "customers.tier"], **RATIO_BY_LABEL),
    ),
    "engine_cube_ratio": (
        "engine cube: a ratio over period labels, every depth",
        _engine(lambda s: s.cube(3), ["region", "customers.tier"], **RATIO_BY_LABEL),
    ),
    "engine_leaves_distinct": (
        "engine leaves: a distinct count per day, deduplicated per leaf, period and day",
        _engine(lambda s: s.leaves(), DIMS, **DISTINCT_DAILY),
    ),
    "engine_cube_distinct": (
        "engine cube: a distinct count per day, depth 1",
        _engine(lambda s: s.cube(1), DIMS, **DISTINCT_DAILY),
    ),
    "engine_cover_cells": (
        "engine screening: two covers of a per-day distinct count (approximate, per day)",
        _engine(lambda s: s.cover_cells([(0, 1), (1, 2)]), DIMS, **DISTINCT_DAILY),
    ),
    "engine_leaf_days_sum": (
        "engine: the one pass over the source, the rows summed per leaf, period and day (the "
        "cube, the daily series and the segments' sums are read from it)",
        _engine(lambda s: s.cells(with_day=True), DIMS, **SALES),
    ),
    "engine_leaf_days_copies": (
        "engine: the one pass over the source also counting the rows loaded twice (one row in "
        "4, sampled by the hash of the whole row, grouped per day by that hash)",
        _cells_with_copies(4, DIMS, **SALES),
    ),
    "engine_leaf_days_ratio": (
        "engine: the one pass over the source for a ratio over period labels (no days)",
        _engine(lambda s: s.cells(), ["region", "customers.tier"], **RATIO_BY_LABEL),
    ),
    "engine_daily": (
        "engine daily series: per-day totals of a ratio",
        _engine(lambda s: s.daily(), [], **RATIO),
    ),
    "engine_daily_timestamps": (
        "engine daily series: a TIMESTAMP time column (half-open periods, cast to DATE)",
        _engine(lambda s: s.daily(), [], **VISITS),
    ),
    "engine_distinct_totals": (
        "engine: a distinct count's exact value per period, per day",
        _engine(lambda s: s.distinct_totals(), [], **DISTINCT_DAILY),
    ),
    "engine_segment": (
        "engine evidence: one segment's metric per period (= on an own and a joined column)",
        _segment({"region": "EU", "customers.tier": "gold"}, **RATIO),
    ),
}


# --- building and comparing ----------------------------------------------------------------------


class SchemaOnly:
    """What a builder may read of a context: the schema, the limits and the dialect. There is no
    connection: a builder that ran a query would fail here."""

    def __init__(self, ctx: ToolContext) -> None:
        self.schema, self.limits, self.dialect = ctx.schema, ctx.limits, ctx.dialect


@pytest.fixture(scope="module")
def shop(shop_db: Path) -> Iterator[ToolContext]:
    with ToolContext(shop_db) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def built(shop: ToolContext) -> dict[str, Query]:
    """Every case's query, built from the schema alone."""
    return {name: build(SchemaOnly(shop)) for name, (_, build) in CASES.items()}  # type: ignore[arg-type]


def golden_text(name: str, query: Query, dialect: str) -> str:
    """The file a case renders to: what it shows, its bound values, the SQL laid out (or why
    the dialect cannot express it)."""
    lines = [f"-- {name}: {CASES[name][0]}"]
    lines += [f"-- {key} = {value!r}" for key, value in query.params.items()]
    try:
        lines.append(render(query.tree, dialect, pretty=True))
    except DialectError as exc:
        lines.append(f"-- not rendered: {exc}")
    return "\n".join(lines) + "\n"


def golden_path(name: str, dialect: str) -> Path:
    return GOLDEN / f"{name}.{dialect}.sql"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_rendering_matches_golden(built: dict[str, Query], name: str, dialect: str) -> None:
    path = golden_path(name, dialect)
    current = golden_text(name, built[name], dialect)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(current)
    expected = path.read_text() if path.exists() else ""
    if current != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                current.splitlines(keepends=True),
                fromfile=f"golden/{path.name}",
                tofile="rendered now",
            )
        )
        pytest.fail(
            f"{name} renders differently in {dialect} than {path.name} says. If the change is "
            f"deliberate, rewrite the goldens with DRILLDOWN_UPDATE_GOLDENS=1 and review the "
            f"diff:\n{diff}",
            pytrace=False,
        )


def test_every_golden_file_belongs_to_a_case() -> None:
    expected = {golden_path(n, d).name for n in CASES for d in DIALECTS}
    stale = sorted(p.name for p in GOLDEN.glob("*.sql") if p.name not in expected)
    if UPDATE:
        for name in stale:
            (GOLDEN / name).unlink()
        stale = []
    assert not stale, (
        f"golden files of no case (remove them, or run with the update switch): {stale}"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_duckdb_golden_runs(shop: ToolContext, built: dict[str, Query], name: str) -> None:
    """The checked-in DuckDB text is SQL the sandboxed connection accepts and runs."""
    shop.run(golden_path(name, "duckdb").read_text(), built[name].params, max_rows=1000)


@pytest.mark.parametrize(
    ("name", "tool", "args"),
    [
        ("describe", "metric_describe", {}),
        ("sample_random", "metric_sample", SAMPLE_RANDOM),
        ("aggregate", "metric_aggregate", AGGREGATE),
        ("compare_periods_dates", "metric_compare_periods", COMPARE_DATES),
    ],
)
def test_tools_run_what_their_builders_return(
    shop: ToolContext, built: dict[str, Query], name: str, tool: str, args: dict[str, Any]
) -> None:
    is_error, result = dispatch(shop, tool, args)
    assert not is_error, result
    assert result["sql"] == render(built[name].tree, "duckdb")
    assert result["params"] == {k: jsonable(v) for k, v in built[name].params.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_duckdb_text_is_sqlglots_own_and_trees_stay_put(built: dict[str, Query], name: str) -> None:
    """DuckDB gets sqlglot's rendering untouched, and rendering another dialect rewrites a copy:
    the tree the tools run stays as built."""
    tree = built[name].tree
    before = tree.sql(dialect="duckdb", identify=True)
    assert render(tree, "duckdb") == before
    for dialect in DIALECTS:
        try:
            render(tree, dialect)
        except DialectError:
            pass
    assert tree.sql(dialect="duckdb", identify=True) == before


# --- the rewrites mean the same: run them on DuckDB ----------------------------------------------
# DuckDB has most of what the BigQuery and Snowflake rewrites use (ISNAN, INSTR, one-argument
# GROUPING, comparisons with 'NaN', positional parameters), so each rewritten tree, rendered back
# as DuckDB, must return the rows of the original, on data with NaN and infinities in it. Rows
# hashed for sampling are left out: FARM_FINGERPRINT and HASH(t.*) have no DuckDB spelling.

NON_FINITE_SALES = [
    "2024-01-03,EU,Widget,NaN,1,1",
    "2024-01-10,US,Gadget,inf,1,2",
    "2024-01-11,EU,Gizmo,-inf,1,4",
]


@pytest.fixture(scope="module")
def non_finite_shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Query]]:
    """The shop with NaN, Infinity and -Infinity revenue rows, and every case built on it."""
    root = tmp_path_factory.mktemp("non-finite-shop")
    sales = (DATA / "sales.csv").read_text().rstrip("\n") + "\n" + "\n".join(NON_FINITE_SALES)
    (root / "sales.csv").write_text(sales + "\n")
    for n in ("customers.csv", "visits.csv"):
        (root / n).write_text((DATA / n).read_text())
    db = root / "shop.duckdb"
    load_files([root / "sales.csv", root / "customers.csv", root / "visits.csv"], db)
    with ToolContext(db) as ctx:
        assert ctx.schema.column("sales", "revenue").type == "DOUBLE"
        queries = {name: build(SchemaOnly(ctx)) for name, (_, build) in CASES.items()}  # type: ignore[arg-type]
    return db, queries


def _rows(con: Any, sql: str, params: Any) -> list[str]:
    """The rows as sorted text (NaN equal to itself, order aside: the cube has none)."""
    return sorted(repr(r) for r in con.execute(sql, params).fetchall())


@pytest.mark.parametrize("dialect", ["bigquery", "snowflake"])
@pytest.mark.parametrize("name", list(CASES))
def test_rewrites_return_the_same_rows_on_duckdb(
    non_finite_shop: tuple[Path, dict[str, Query]], name: str, dialect: str
) -> None:
    db, queries = non_finite_shop
    query = queries[name]
    if any(f.name.lower() == "hash" for f in query.tree.find_all(exp.Anonymous)):
        pytest.skip("hashes rows for sampling: no DuckDB spelling of the rewrite")
    rewrite = {"bigquery": for_bigquery, "snowflake": for_snowflake}[dialect]
    try:
        rewritten = rewrite(query.tree.copy())
    except DialectError:
        pytest.skip(f"{dialect} cannot express it (the golden file says why)")
    params: Any = query.params
    if dialect == "snowflake":  # bound by position: p1 is :1
        params = [query.params[f"p{i + 1}"] for i in range(len(query.params))]
    con = duckdb.connect(str(db), read_only=True)
    try:
        original = _rows(con, render(query.tree, "duckdb"), query.params)
        assert original, "the case reads no rows: it would show nothing"
        assert _rows(con, rewritten.sql(dialect="duckdb", identify=True), params) == original
    finally:
        con.close()


# --- what a dialect cannot express is refused, by name -------------------------------------------


def test_bigquery_refuses_a_dotted_output_name() -> None:
    tree = exp.select(exp.column("tier").as_("customers.tier")).from_("t")
    with pytest.raises(DialectError, match=r"bigquery: output column name 'customers\.tier'"):
        render(tree, "bigquery")


def test_a_joined_column_is_output_under_a_private_name(built: dict[str, Query]) -> None:
    """A tool names no output after a user's column (``sql_tools._names``): a joined
    column's ``table.column`` reaches no dialect as an output name."""
    sql = render(built["aggregate_by_joined_column"].tree, "bigquery")
    assert "`__dd_g0`" in sql and "customers.tier`" not in sql


@pytest.mark.parametrize("dialect", ["bigquery", "snowflake"])
def test_an_unknown_duckdb_function_is_refused_by_name(dialect: str) -> None:
    tree = exp.select(exp.Anonymous(this="list_sum", expressions=[exp.column("x")])).from_("t")
    with pytest.raises(DialectError, match=rf"{dialect}: no translation of DuckDB .*list_sum"):
        render(tree, dialect)
    assert render(tree, "duckdb") == 'SELECT LIST_SUM("x") FROM "t"'


def test_snowflake_refuses_a_placeholder_without_a_position() -> None:
    tree = exp.select(exp.Placeholder(this="seed"))
    with pytest.raises(DialectError, match="snowflake: placeholder 'seed' has no position"):
        render(tree, "snowflake")


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown SQL dialect 'mysql'"):
        render(exp.select("1"), "mysql")

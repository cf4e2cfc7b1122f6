"""One query tree, rendered per database: the Postgres rewrites of DuckDB's constructs, and
DuckDB's text exactly as sqlglot writes it (no rewrite)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from sql_tools import finite_or_null, non_finite_counts
from sql_tools.dialects import render


def col(name: str, table: str | None = "t0") -> exp.Column:
    return exp.column(name, table)


def fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def p(name: str) -> exp.Placeholder:
    return exp.Placeholder(this=name)


def sub(query: exp.Select, alias: str) -> exp.Expression:
    """A derived table as the engine writes it: an alias on a parenthesised query."""
    return exp.alias_(exp.paren(query), alias, table=True)


CASES = [
    (
        "finite",
        finite_or_null(col("v")),
        'CASE WHEN ISFINITE("t0"."v") THEN "t0"."v" ELSE NULL END',
        'CASE WHEN ("t0"."v" > CAST(\'-Infinity\' AS DOUBLE PRECISION) AND "t0"."v" < '
        'CAST(\'Infinity\' AS DOUBLE PRECISION)) THEN "t0"."v" ELSE NULL END',
    ),
    (
        "nan",
        non_finite_counts(col("v"))[0],
        'COUNT(*) FILTER(WHERE ISNAN("t0"."v"))',
        'COUNT(*) FILTER(WHERE ("t0"."v" = CAST(\'NaN\' AS DOUBLE PRECISION)))',
    ),
    (
        "infinity",
        non_finite_counts(col("v"))[1],
        'COUNT(*) FILTER(WHERE ISINF("t0"."v") AND "t0"."v" > 0)',
        'COUNT(*) FILTER(WHERE ("t0"."v" IN (CAST(\'Infinity\' AS DOUBLE PRECISION), '
        'CAST(\'-Infinity\' AS DOUBLE PRECISION))) AND "t0"."v" > 0)',
    ),
    (
        "contains",
        fn("contains", col("s"), p("p1")),
        'CONTAINS("t0"."s", $p1)',
        '(POSITION(%(p1)s IN "t0"."s") > 0)',
    ),
    (
        "hash",
        fn("hash", col("a"), col("b")),
        'HASH("t0"."a", "t0"."b")',
        'HASHTEXTEXTENDED(CAST(ROW("t0"."a", "t0"."b") AS TEXT), 0)',
    ),
    (
        "hash modulo",
        exp.Mod(this=fn("hash", col("a")), expression=exp.Literal.number(8)),
        'HASH("t0"."a") % 8',
        'MOD(HASHTEXTEXTENDED(CAST(ROW("t0"."a") AS TEXT), 0), 8)',
    ),
    (
        "approx distinct",
        fn("approx_count_distinct", col("u")),
        'APPROX_COUNT_DISTINCT("t0"."u")',
        'COUNT(DISTINCT "t0"."u")',
    ),
    (
        "integer division",
        exp.Div(this=col("a"), expression=col("b")),
        '"t0"."a" / "t0"."b"',
        'CAST("t0"."a" AS DOUBLE PRECISION) / "t0"."b"',
    ),
    (
        "percent in names and text",
        exp.alias_(exp.Literal.string("50%_off"), "x%"),
        "'50%_off' AS \"x%\"",
        "'50%%_off' AS \"x%%\"",
    ),
    (
        "try_cast to text",
        exp.TryCast(this=col("a"), to=exp.DataType.build("VARCHAR")),
        'TRY_CAST("t0"."a" AS TEXT)',
        'CAST("t0"."a" AS VARCHAR)',
    ),
]


@pytest.mark.parametrize(("name", "tree", "duck", "pg"), CASES, ids=[c[0] for c in CASES])
def test_each_construct_in_each_dialect(name, tree, duck, pg):
    assert render(tree, "duckdb") == duck == tree.sql(dialect="duckdb", identify=True)
    assert render(tree, "postgres") == pg


def test_order_by_an_alias_inside_an_expression():
    delta = exp.Sub(this=col("c", None), expression=col("b", None))
    tree = (
        exp.select(delta.as_("delta"), col("k", None).as_("k"))
        .from_("seg")
        .order_by(
            exp.Ordered(this=exp.Abs(this=col("delta", None)), desc=True, nulls_first=False),
            exp.Ordered(this=col("k", None)),
        )
    )
    assert render(tree, "duckdb").endswith('ORDER BY ABS("delta") DESC, "k"')
    # Postgres resolves a name inside an ORDER BY expression among the input columns only
    assert render(tree, "postgres").endswith('ORDER BY ABS(("c" - "b")) DESC NULLS LAST, "k"')


def test_derived_tables_keep_their_alias_in_postgres():
    inner = exp.select("x").from_("t")
    tree = exp.select("x").from_(sub(exp.select("x").from_(sub(inner, "i")), "b"))
    assert render(tree, "duckdb") == 'SELECT "x" FROM (SELECT "x" FROM (SELECT "x" FROM "t"))'
    assert render(tree, "postgres") == (
        'SELECT "x" FROM (SELECT "x" FROM (SELECT "x" FROM "t") AS "i") AS "b"'
    )


def test_rendering_leaves_the_tree_as_it_was():
    tree = exp.select(fn("contains", col("s"), p("p1"))).from_("t")
    before = tree.sql(dialect="duckdb")
    render(tree, "postgres")
    assert tree.sql(dialect="duckdb") == before


def test_try_cast_to_another_type_has_no_postgres_rendering():
    tree = exp.TryCast(this=col("a"), to=exp.DataType.build("DOUBLE"))
    assert render(tree, "duckdb") == 'TRY_CAST("t0"."a" AS DOUBLE)'
    with pytest.raises(ValueError, match="has no equivalent"):
        render(tree, "postgres")


def test_unknown_dialect_is_refused():
    with pytest.raises(ValueError, match="unknown SQL dialect"):
        render(exp.select("1"), "oracle")

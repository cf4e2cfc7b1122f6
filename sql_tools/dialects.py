"""Rendering one query tree in each SQL dialect the product speaks.

Every query is built once as a sqlglot tree (``sql_tools/_sql.py``, the tools, the engine's
leaf and cube queries) and rendered here for the database that runs it. sqlglot's own
generators do most of the work; the transforms below rewrite the few constructs whose meaning
differs between dialects, so the same tree asks the same question everywhere. The trees are
written in DuckDB's terms, and DuckDB's text is sqlglot's, untouched.

A construct a dialect cannot express with the same meaning raises :class:`DialectError`
naming it, rather than rendering SQL that would run and mean something else. The golden files
in ``tests/sql_tools/golden/`` show every query of the product in every dialect.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

DIALECTS = ("duckdb", "postgres", "bigquery", "snowflake")


class DialectError(ValueError):
    """The query uses a construct the target dialect cannot express with the same meaning."""


def render(tree: exp.Expression, dialect: str, *, pretty: bool = False) -> str:
    """``tree`` as SQL text in ``dialect``, every identifier quoted; ``pretty`` lays it out on
    several lines for reading (the golden files in ``tests/sql_tools/golden/``)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}: use one of {', '.join(DIALECTS)}")
    transform = _TRANSFORMS.get(dialect)
    if transform is not None:
        tree = transform(tree.copy())
    return tree.sql(dialect=dialect, identify=True, pretty=pretty)


# --- shared pieces -------------------------------------------------------------------------------
# The trees call a few DuckDB functions by name (exp.Anonymous). Each dialect lists the ones it
# rewrites and the ones that mean the same under the same name; any other is refused, so a new
# DuckDB-only function in a builder fails here instead of reaching another database.


def _functions(tree: exp.Expression, name: str) -> list[exp.Anonymous]:
    return [f for f in tree.find_all(exp.Anonymous) if f.name.lower() == name]


def _refuse_unknown_functions(tree: exp.Expression, dialect: str, known: set[str]) -> None:
    unknown = sorted({f.name.lower() for f in tree.find_all(exp.Anonymous)} - known)
    if unknown:
        raise DialectError(
            f"{dialect}: no translation of DuckDB function(s) {', '.join(unknown)}(); "
            "add one to sql_tools/dialects.py"
        )


def _float_division(tree: exp.Expression) -> None:
    """DuckDB's ``/`` divides as floating point, integers too; cast each dividend to DOUBLE so
    that a count over a count is not cut to a fixed scale (Snowflake) or a NUMERIC (BigQuery)."""
    for div in list(tree.find_all(exp.Div)):
        div.set("this", exp.Cast(this=div.this, to=exp.DataType.build("DOUBLE")))


def _replace(node: exp.Expression, new: exp.Expression) -> None:
    node.replace(exp.Paren(this=new))


# --- BigQuery ------------------------------------------------------------------------------------

_BIGQUERY_SAME = {"approx_count_distinct"}
_BIGQUERY_REWRITTEN = {"isnan", "isinf", "isfinite", "contains", "hash", "grouping"}


def for_bigquery(tree: exp.Expression) -> exp.Expression:
    """The tree with DuckDB's constructs in BigQuery's terms (GoogleSQL, ``@name`` parameters).

    - ``isnan(x)``, ``isinf(x)``, ``isfinite(x)`` → ``IS_NAN(x)``, ``IS_INF(x)``,
      ``NOT (IS_INF(x) OR IS_NAN(x))``.
    - ``contains(s, t)`` (a literal substring) → ``INSTR(s, t) > 0``; BigQuery's own
      ``CONTAINS_SUBSTR`` ignores case and normalizes text, so it would match more rows.
    - ``hash(a, ...)`` → ``FARM_FINGERPRINT(TO_JSON_STRING(STRUCT(a, ...)))``: a 64-bit hash of
      the values (a table alias stands for its row), as DuckDB's is; the numbers differ, so a
      seeded sample picks other rows than on DuckDB, reproducibly.
    - ``GROUPING(a, b, c)`` → ``GROUPING(a) * 4 + GROUPING(b) * 2 + GROUPING(c)``: BigQuery's
      GROUPING takes one argument; the sum is the bit vector DuckDB returns.
    - ``/`` divides as floating point (see :func:`_float_division`).

    Raises :class:`DialectError` for an output column name holding a ``.`` (a joined table's
    column, ``table.column``): BigQuery column names cannot hold one.
    """
    _refuse_unknown_functions(tree, "bigquery", _BIGQUERY_SAME | _BIGQUERY_REWRITTEN)
    for alias in tree.find_all(exp.Alias):
        if "." in alias.alias:
            raise DialectError(
                f"bigquery: output column name {alias.alias!r} holds a '.', which BigQuery "
                "column names cannot (a joined table's column, named table.column)"
            )
    for f in _functions(tree, "isnan"):
        f.replace(exp.IsNan(this=f.expressions[0]))
    for f in _functions(tree, "isinf"):
        f.replace(exp.IsInf(this=f.expressions[0]))
    for f in _functions(tree, "isfinite"):
        x = f.expressions[0]
        _replace(f, exp.not_(exp.or_(exp.IsInf(this=x.copy()), exp.IsNan(this=x.copy()))))
    for f in _functions(tree, "contains"):
        text, part = f.expressions
        _replace(f, exp.GT(this=exp.StrPosition(this=text, substr=part), expression=_number(0)))
    for f in _functions(tree, "hash"):
        row = exp.JSONFormat(this=exp.Struct(expressions=list(f.expressions)))
        f.replace(exp.FarmFingerprint(expressions=[row]))
    groupings = [*_functions(tree, "grouping"), *tree.find_all(exp.Grouping)]
    for g in groupings:
        if len(g.expressions) > 1:
            _replace(g, _grouping_bits(g.expressions))
    _float_division(tree)
    return tree


def _number(n: int) -> exp.Literal:
    return exp.Literal.number(n)


def _grouping_bits(columns: list[exp.Expression]) -> exp.Expression:
    """``GROUPING(c1) * 2^(n-1) + ... + GROUPING(cn)``, one argument per GROUPING."""
    n = len(columns)
    terms: list[exp.Expression] = []
    for i, c in enumerate(columns):
        one = exp.Grouping(expressions=[c])
        weight = 1 << (n - 1 - i)
        terms.append(one if weight == 1 else exp.Mul(this=one, expression=_number(weight)))
    total = terms[0]
    for t in terms[1:]:
        total = exp.Add(this=total, expression=t)
    return total


# --- Snowflake -----------------------------------------------------------------------------------

_SNOWFLAKE_SAME = {"contains", "grouping", "approx_count_distinct"}
_SNOWFLAKE_REWRITTEN = {"isnan", "isinf", "isfinite", "hash"}
_PARAM = re.compile(r"p([1-9][0-9]*)")


def for_snowflake(tree: exp.Expression) -> exp.Expression:
    """The tree with DuckDB's constructs in Snowflake's terms.

    - ``$pN`` → ``:N``: the Snowflake connector binds on the server by position (paramstyle
      ``numeric``), the values passed as a list in number order (``p1`` first), each ``:N``
      naming the N-th. A named ``:name`` is not a binding style the connector has.
    - ``isnan(x)``, ``isinf(x)``, ``isfinite(x)`` → comparisons with ``'NaN'``, ``'inf'`` and
      ``'-inf'`` cast to DOUBLE: Snowflake has none of the three functions, and its NaN equals
      itself.
    - ``hash(t0, seed)`` where ``t0`` is a table alias → ``HASH(HASH("t0".*), seed)``: Snowflake
      hashes a row written ``alias.*``; a bare alias would name a column.
    - ``/`` divides as floating point (see :func:`_float_division`).

    ``contains`` (a literal, case-sensitive substring) and ``GROUPING(a, b, ...)`` (the same bit
    vector, first argument most significant) mean what they mean in DuckDB.
    """
    _refuse_unknown_functions(tree, "snowflake", _SNOWFLAKE_SAME | _SNOWFLAKE_REWRITTEN)
    for p in list(tree.find_all(exp.Placeholder)):
        number = _PARAM.fullmatch(p.name)
        if number is None:
            raise DialectError(
                f"snowflake: placeholder {p.name!r} has no position; the builders name "
                "parameters p1, p2, ..."
            )
        p.replace(exp.Placeholder(this=number[1]))
    for f in _functions(tree, "isnan"):
        _replace(f, exp.EQ(this=f.expressions[0], expression=_double("NaN")))
    for f in _functions(tree, "isinf"):
        _replace(f, exp.In(this=f.expressions[0], expressions=[_double("inf"), _double("-inf")]))
    for f in _functions(tree, "isfinite"):
        x = f.expressions[0]
        kinds = [_double("NaN"), _double("inf"), _double("-inf")]
        _replace(f, exp.not_(exp.In(this=x, expressions=kinds)))
    for f in _functions(tree, "hash"):
        rows = _row_aliases(f)
        for arg in f.expressions:
            if isinstance(arg, exp.Column) and not arg.table and arg.name in rows:
                star = exp.Column(this=exp.Star(), table=arg.this.copy())
                arg.replace(exp.Anonymous(this="HASH", expressions=[star]))
    _float_division(tree)
    return tree


def _double(text: str) -> exp.Expression:
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("DOUBLE"))


def _row_aliases(node: exp.Expression) -> set[str]:
    """Names of the tables in the FROM and JOINs of the SELECT that holds ``node``."""
    select = node.find_ancestor(exp.Select)
    if select is None:
        return set()
    return {t.alias_or_name for t in select.find_all(exp.Table) if t.parent_select is select}


_TRANSFORMS: dict[str, Callable[[exp.Expression], exp.Expression]] = {
    "bigquery": for_bigquery,
    "snowflake": for_snowflake,
}

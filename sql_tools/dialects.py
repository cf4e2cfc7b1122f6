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
        _replace(f, _substring_found(text, part))
    for f in _functions(tree, "hash"):
        row = exp.JSONFormat(this=exp.Struct(expressions=list(f.expressions)))
        f.replace(exp.FarmFingerprint(expressions=[row]))
    groupings = [*_functions(tree, "grouping"), *tree.find_all(exp.Grouping)]
    for g in groupings:
        if len(g.expressions) > 1:
            _replace(g, _grouping_bits(g.expressions))
    _float_division(tree)
    return tree


def _substring_found(text: exp.Expression, needle: exp.Expression) -> exp.Expression:
    """``needle`` occurs in ``text``, literally (no wildcards, case-sensitive): its position
    (``INSTR`` in BigQuery, ``strpos`` in Postgres) is above 0."""
    return exp.GT(this=exp.StrPosition(this=text, substr=needle), expression=_number(0))


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


# --- Postgres ------------------------------------------------------------------------------------
#
# The trees are written in DuckDB's terms. In Postgres:
#
# - ``isfinite``/``isnan``/``isinf`` exist for dates only; a float is compared with the special
#   values instead (Postgres orders NaN above +Infinity and holds NaN = NaN true).
# - ``contains(text, needle)`` is ``strpos(text, needle) > 0`` (a literal match, no LIKE
#   wildcards to escape).
# - ``hash(a, b, ...)`` is ``hashtextextended(CAST(ROW(a, b, ...) AS TEXT), 0)``: a 64-bit hash
#   of the values' text (DuckDB's hash is unsigned, this one signed; callers only group by it,
#   order by it or test it modulo a power of two).
# - ``approx_count_distinct`` does not exist; the exact ``count(DISTINCT ...)`` answers.
# - ``TRY_CAST`` does not exist, and sqlglot writes it as ``CAST``, which fails where DuckDB
#   gives NULL: only a cast to text (which cannot fail) is rendered; any other raises.
# - ``a % b`` becomes ``mod(a, b)``, and every ``%`` in a string literal or an identifier is
#   doubled: queries carry psycopg placeholders (``%(p1)s``), in which a lone ``%`` is a syntax
#   error. The text is what psycopg executes with the query's parameters.
# - An ORDER BY expression sees only the input columns, not the output's aliases (DuckDB sees
#   both): an alias used inside an expression there is replaced by what it names.
# - A derived table's alias set on a parenthesised query (the engine's ``FROM (SELECT ...) AS b``)
#   is not written by sqlglot; DuckDB and Postgres 16 do without it, earlier Postgres versions
#   refuse a subquery in FROM without an alias: the query becomes a subquery carrying it.
# - ``a / b`` is left to sqlglot, which casts the dividend to DOUBLE PRECISION unless it is
#   already a float, so integers divide as in DuckDB instead of truncating.

_PG_INFINITY = "Infinity"


def _pg_function_name(node: exp.Expression) -> str | None:
    return node.name.lower() if isinstance(node, exp.Anonymous) else None


def _pg_non_finite(node: exp.Expression) -> exp.Expression:
    """``isfinite(x)``, ``isnan(x)`` and ``isinf(x)`` of a float as comparisons."""
    name = _pg_function_name(node)
    if name not in ("isfinite", "isnan", "isinf") or len(node.expressions) != 1:
        return node
    x = node.expressions[0]
    if name == "isfinite":  # false for NaN (above +Infinity) and for both infinities
        return exp.paren(
            exp.and_(
                exp.GT(this=x.copy(), expression=_double(f"-{_PG_INFINITY}")),
                exp.LT(this=x.copy(), expression=_double(_PG_INFINITY)),
            )
        )
    if name == "isnan":
        return exp.paren(exp.EQ(this=x.copy(), expression=_double("NaN")))
    return exp.paren(
        exp.In(this=x.copy(), expressions=[_double(_PG_INFINITY), _double(f"-{_PG_INFINITY}")])
    )


def _pg_contains(node: exp.Expression) -> exp.Expression:
    """``contains(text, needle)`` as ``strpos(text, needle) > 0``."""
    if _pg_function_name(node) != "contains" or len(node.expressions) != 2:
        return node
    text, needle = node.expressions
    return exp.paren(_substring_found(text.copy(), needle.copy()))


def _pg_hash(node: exp.Expression) -> exp.Expression:
    """``hash(a, ...)`` as a 64-bit hash of the row of values' text."""
    if _pg_function_name(node) != "hash" or not node.expressions:
        return node
    row = exp.Anonymous(this="ROW", expressions=[e.copy() for e in node.expressions])
    text = exp.cast(row, exp.DataType.build("TEXT"))
    return exp.Anonymous(this="hashtextextended", expressions=[text, exp.Literal.number(0)])


def _pg_approx_distinct(node: exp.Expression) -> exp.Expression:
    """``approx_count_distinct(x)`` as the exact ``count(DISTINCT x)``."""
    if isinstance(node, exp.ApproxDistinct):
        arg = node.this
    elif _pg_function_name(node) == "approx_count_distinct" and len(node.expressions) == 1:
        arg = node.expressions[0]
    else:
        return node
    return exp.Count(this=exp.Distinct(expressions=[arg.copy()]))


_PG_TEXT_TYPES = (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)


def _pg_try_cast(node: exp.Expression) -> exp.Expression:
    """``TRY_CAST(x AS text)`` as ``CAST``; any other ``TRY_CAST`` has no Postgres equal."""
    if not isinstance(node, exp.TryCast):
        return node
    if node.to.this not in _PG_TEXT_TYPES:
        raise DialectError(
            f"postgres: TRY_CAST to {node.to.sql()} has no equivalent (CAST fails where "
            "TRY_CAST gives NULL): build this query without it"
        )
    return exp.Cast(this=node.this.copy(), to=node.to.copy())


def _pg_mod(node: exp.Expression) -> exp.Expression:
    """``a % b`` as ``mod(a, b)`` (a ``%`` in the text would be read as a placeholder)."""
    if not isinstance(node, exp.Mod):
        return node
    return exp.Anonymous(this="mod", expressions=[node.this.copy(), node.expression.copy()])


def _pg_order_by_aliases(node: exp.Expression) -> exp.Expression:
    """Inside an ORDER BY expression, an output alias replaced by the expression it names."""
    if not isinstance(node, exp.Select) or not node.args.get("order"):
        return node
    aliases = {p.alias: p.this for p in node.expressions if isinstance(p, exp.Alias) and p.alias}
    for ordered in node.args["order"].expressions:
        key = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        if isinstance(key, exp.Column | exp.Literal) or not aliases:
            continue  # a bare name or a position may name an output column in Postgres too
        for col in list(key.find_all(exp.Column)):
            if not col.table and col.name in aliases:
                col.replace(exp.paren(aliases[col.name].copy()))
    return node


def _pg_subquery_alias(node: exp.Expression) -> exp.Expression:
    """``(SELECT ...)`` carrying a table alias as a subquery that writes it."""
    alias = node.args.get("alias") if isinstance(node, exp.Paren) else None
    if alias is None or not isinstance(node.this, exp.Query):
        return node
    return exp.Subquery(this=node.this.copy(), alias=alias.copy())


def _pg_percent(node: exp.Expression) -> exp.Expression:
    """Every ``%`` of a string literal or an identifier doubled (psycopg's escape)."""
    if isinstance(node, exp.Literal) and node.is_string and "%" in node.this:
        return exp.Literal.string(node.this.replace("%", "%%"))
    if isinstance(node, exp.Identifier) and "%" in node.this:
        return exp.Identifier(this=node.this.replace("%", "%%"), quoted=node.quoted)
    return node


_POSTGRES_STEPS: tuple[Callable[[exp.Expression], exp.Expression], ...] = (
    _pg_subquery_alias,
    _pg_order_by_aliases,
    _pg_non_finite,
    _pg_contains,
    _pg_hash,
    _pg_approx_distinct,
    _pg_try_cast,
    _pg_mod,
    _pg_percent,  # last: the text the steps before wrote is escaped too
)


_POSTGRES_KNOWN = {
    "isnan",
    "isinf",
    "isfinite",
    "contains",
    "hash",
    "approx_count_distinct",
    "grouping",
}


def for_postgres(tree: exp.Expression) -> exp.Expression:
    """The tree with DuckDB's constructs in Postgres's terms (psycopg's ``%(pN)s`` parameters);
    the rewrites are listed above."""
    _refuse_unknown_functions(tree, "postgres", _POSTGRES_KNOWN)
    for step in _POSTGRES_STEPS:
        tree = _bottom_up(tree, step)
    return tree


def _bottom_up(tree: exp.Expression, step: Callable[[exp.Expression], exp.Expression]):
    """Apply ``step`` to every node, each after its descendants (so a rewrite of a parent
    copies children already rewritten, and nested cases are all reached)."""
    for node in reversed(list(tree.walk(bfs=False))):
        new = step(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


_TRANSFORMS: dict[str, Callable[[exp.Expression], exp.Expression]] = {
    "bigquery": for_bigquery,
    "snowflake": for_snowflake,
    "postgres": for_postgres,
}

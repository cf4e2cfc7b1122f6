"""Rendering one query tree in each SQL dialect the product speaks.

Every query is built once as a sqlglot tree (``sql_tools/_sql.py``, the tools, the engine's
leaf and cube queries) and rendered here for the database that runs it. sqlglot's own
generators do most of the work; the transforms below rewrite the few constructs whose meaning
differs between dialects, so the same tree asks the same question everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

DIALECTS = ("duckdb", "postgres", "bigquery", "snowflake")


def render(tree: exp.Expression, dialect: str) -> str:
    """``tree`` as SQL text in ``dialect``, every identifier quoted."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}: use one of {', '.join(DIALECTS)}")
    transform = TRANSFORMS.get(dialect)
    if transform is not None:
        tree = transform(tree.copy())
    return tree.sql(dialect=dialect, identify=True)


# --- postgres -------------------------------------------------------------------------------
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


def _pg_float(text: str) -> exp.Expression:
    return exp.cast(exp.Literal.string(text), exp.DataType.build("DOUBLE"))


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
                exp.GT(this=x.copy(), expression=_pg_float(f"-{_PG_INFINITY}")),
                exp.LT(this=x.copy(), expression=_pg_float(_PG_INFINITY)),
            )
        )
    if name == "isnan":
        return exp.paren(exp.EQ(this=x.copy(), expression=_pg_float("NaN")))
    return exp.paren(
        exp.In(this=x.copy(), expressions=[_pg_float(_PG_INFINITY), _pg_float(f"-{_PG_INFINITY}")])
    )


def _pg_contains(node: exp.Expression) -> exp.Expression:
    """``contains(text, needle)`` as ``strpos(text, needle) > 0``."""
    if _pg_function_name(node) != "contains" or len(node.expressions) != 2:
        return node
    text, needle = node.expressions
    found = exp.StrPosition(this=text.copy(), substr=needle.copy())
    return exp.paren(exp.GT(this=found, expression=exp.Literal.number(0)))


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
        raise ValueError(
            f"TRY_CAST to {node.to.sql()} has no Postgres equivalent (CAST fails where "
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


def postgres(tree: exp.Expression) -> exp.Expression:
    """``tree`` rewritten to mean in Postgres what it means in DuckDB (in place)."""
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


# dialect -> the rewrite applied to a copy of the tree before sqlglot renders it
TRANSFORMS: dict[str, Callable[[exp.Expression], exp.Expression]] = {"postgres": postgres}

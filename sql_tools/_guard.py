"""Second wall: refuse anything but one read-only SELECT over the known user tables.

The tools only ever execute SQL they built themselves, from validated arguments. This guard
checks that SQL again before it reaches the database (DuckDB: :func:`check_select`; Postgres:
:func:`check_postgres_select`), so a bug in a builder cannot turn into a write, a file read, a
table function or a second statement.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import sqlglot
from sqlglot import exp

from sql_tools._errors import QueryRejected, short

# Functions the builders emit. Anything else (read_csv, query, glob, getenv, ...) is refused.
ALLOWED_FUNCTIONS = frozenset(
    {
        "abs",
        "avg",
        "cast",
        "coalesce",
        "contains",
        "count",
        "hash",
        "max",
        "min",
        "nullif",
        "sum",
        "greatest",
        "least",
        "grouping",
        "approx_count_distinct",
        "approx_distinct",
        "case",
        "if",
        "is_nan",
        "is_inf",
        "isfinite",
        "lower",
    }
)
# Expression node types that never belong in a tool query.
FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = (
    exp.Command,
    exp.Create,
    exp.Drop,
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Copy,
    exp.Attach,
    exp.Detach,
    exp.Set,
    exp.Pragma,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Use,
    exp.Describe,
    exp.Lambda,
    exp.Into,
)


def check_select(
    con: duckdb.DuckDBPyConnection, sql: str, allowed_tables: set[str]
) -> Counter[str]:
    """Raise ``QueryRejected`` unless ``sql`` is a single SELECT over ``allowed_tables``; return
    how many times it reads each of them (:func:`source_reads`)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRejected(f"query does not parse: {short(str(exc), 200)}") from exc
    if len(statements) != 1:
        raise QueryRejected(f"exactly one statement allowed, got {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise QueryRejected(f"only SELECT is allowed, got {statements[0].type.name}")
    tree = _one_query(sql, "duckdb")
    return _check_tree(tree, allowed_tables, ALLOWED_FUNCTIONS, schema="main")


def _one_query(sql: str, dialect: str) -> exp.Query:
    try:
        trees = sqlglot.parse(sql, read=dialect)
    except sqlglot.errors.SqlglotError as exc:
        raise QueryRejected(f"query does not parse: {short(str(exc), 200)}") from exc
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise QueryRejected("only a single SELECT query is allowed")
    return trees[0]


def _check_tree(
    tree: exp.Query,
    allowed_tables: set[str],
    functions: frozenset[str],
    *,
    schema: str,
    forbidden: tuple[type[exp.Expression], ...] = FORBIDDEN_NODES,
) -> Counter[str]:
    """Check every node of ``tree``; return the reads of each allowed table (a reference to it
    by name, not to a CTE of that name: each is one pass over the table's rows)."""
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    reads: Counter[str] = Counter()
    for node in tree.walk():
        if isinstance(node, forbidden):
            raise QueryRejected(f"statement part {type(node).__name__} is not allowed")
        if isinstance(node, exp.Table):
            if _check_table(node, allowed_tables, ctes, schema):
                reads[node.name] += 1
        elif isinstance(node, exp.Func) and not isinstance(node, exp.Connector | exp.Cast):
            name = (node.sql_name() if not isinstance(node, exp.Anonymous) else node.name).lower()
            if name not in functions:
                raise QueryRejected(f"function {name!r} is not allowed")
    return reads


def _check_table(node: exp.Table, allowed: set[str], ctes: set[str], schema: str) -> bool:
    """Refuse a table outside ``allowed``; True when ``node`` reads a source table (not a CTE)."""
    if not isinstance(node.this, exp.Identifier):
        raise QueryRejected("table functions are not allowed")
    if node.args.get("catalog") is not None:
        raise QueryRejected("qualified table names are not allowed")
    db = node.args.get("db")
    if db is not None and db.name != schema:
        raise QueryRejected(f"schema {db.name!r} is not allowed")
    name = node.name
    cte = db is None and name in ctes
    if name not in allowed and not cte:
        raise QueryRejected(f"table {name!r} is not allowed")
    return not cte


# --- postgres -------------------------------------------------------------------------------

# What the builders' trees become in Postgres (see ``sql_tools.dialects``). Anything else
# (pg_sleep, nextval, set_config, pg_read_file, dblink, lo_import, ...) is refused.
POSTGRES_FUNCTIONS = frozenset(
    {
        "abs",
        "avg",
        "case",
        "coalesce",
        "count",
        "greatest",
        "grouping",
        "hashtextextended",
        "if",
        "least",
        "lower",
        "max",
        "min",
        "nullif",
        "row",
        "str_position",
        "sum",
    }
)
# Types a Postgres query may cast to: a cast to a user-defined type could run its cast function.
POSTGRES_CAST_TYPES = frozenset(
    {
        exp.DataType.Type.DOUBLE,
        exp.DataType.Type.DATE,
        exp.DataType.Type.TEXT,
        exp.DataType.Type.VARCHAR,
    }
)


def check_postgres_select(sql: str, allowed_tables: set[str], schema: str) -> Counter[str]:
    """Raise ``QueryRejected`` unless ``sql`` (psycopg text: ``%(p1)s`` placeholders) is a single
    SELECT over ``allowed_tables`` (unqualified, or in ``schema``), with no locking clause, using
    only the builders' functions and casts; return its reads of each table."""
    tree = _one_query(sql, "postgres")
    for name in tree.find_all(exp.Identifier):  # psycopg's text doubles a name's "%"
        name.set("this", name.this.replace("%%", "%"))
    reads = _check_tree(
        tree,
        allowed_tables,
        POSTGRES_FUNCTIONS,
        schema=schema,
        forbidden=(*FORBIDDEN_NODES, exp.Lock),
    )
    for cast in tree.find_all(exp.Cast):
        if cast.to.this not in POSTGRES_CAST_TYPES:
            raise QueryRejected(f"cast to {cast.to.sql(dialect='postgres')!r} is not allowed")
    return reads


def table_reads(sql: str, tables: set[str], schema: str) -> Counter[str]:
    """How many times the product's own Postgres query ``sql`` (not a caller's: it is not
    checked) reads each of ``tables`` in ``schema``; an empty count for SQL this parser does not
    read (the catalogue queries, which read only ``pg_catalog``)."""
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except sqlglot.errors.SqlglotError:
        return Counter()
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return Counter(
        t.name
        for t in tree.find_all(exp.Table)
        if t.name in tables and t.db in ("", schema) and not (not t.db and t.name in ctes)
    )


def qualify_tables(sql: str, schema: str, *, placeholders: bool) -> str:
    """``sql`` (Postgres text) with every unqualified table name that is not a CTE's written as
    ``"schema"."table"``, the rest of the text as it was: sessions search only ``pg_catalog``
    and ``pg_temp``, so a name is found in the chosen schema only when it names it.
    ``placeholders``: the text is psycopg's with parameters (a ``%`` of the schema doubled).
    Text this parser does not read is returned as it is (an unqualified name in it then finds
    no table of the schema)."""
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except sqlglot.errors.SqlglotError:
        return sql
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    starts = []
    for t in tree.find_all(exp.Table):
        if t.args.get("db") is not None or not isinstance(t.this, exp.Identifier):
            continue
        if t.name in ctes:
            continue
        start = t.this.meta.get("start")
        if start is None:
            raise QueryRejected(f"cannot qualify table {t.name!r} with its schema")
        starts.append(start)
    prefix = '"' + schema.replace('"', '""') + '".'
    if placeholders:
        prefix = prefix.replace("%", "%%")
    for start in sorted(starts, reverse=True):
        sql = sql[:start] + prefix + sql[start:]
    return sql

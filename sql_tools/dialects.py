"""Rendering one query tree in each SQL dialect the product speaks.

Every query is built once as a sqlglot tree (``sql_tools/_sql.py``, the tools, the engine's
leaf and cube queries) and rendered here for the database that runs it. sqlglot's own
generators do most of the work; the transforms below rewrite the few constructs whose meaning
differs between dialects, so the same tree asks the same question everywhere.
"""

from __future__ import annotations

from sqlglot import exp

DIALECTS = ("duckdb", "postgres", "bigquery", "snowflake")


def render(tree: exp.Expression, dialect: str, *, pretty: bool = False) -> str:
    """``tree`` as SQL text in ``dialect``, every identifier quoted; ``pretty`` lays it out on
    several lines for reading (the golden files in ``tests/sql_tools/golden/``)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}: use one of {', '.join(DIALECTS)}")
    return tree.sql(dialect=dialect, identify=True, pretty=pretty)

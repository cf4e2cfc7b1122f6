"""Which views of a DuckDB file read nothing but its own tables.

A view is a query stored in the file, and the query is the file author's: it can read a file
(``read_text('/etc/hostname')``, ``read_csv``, ``glob``, ``'data.csv'``), the session's
settings and environment (``duckdb_settings()``, ``current_setting(...)``, ``getenv``,
``duckdb_secrets()``, ``pragma_*``, ``duckdb_databases()``), another database, or do so through
a macro or another view. Offered as a relation, its rows would go to the model, the report and
the memory store; measured for the data's identity, the sandbox's refusal of the file read
would stop the investigation.

:func:`refused_views` reads each view's definition as DuckDB's own parser reads it
(``json_serialize_sql``) and admits a view only when every relation it reads is a table or an
admitted view of the file's ``main`` schema (or one of its own common table expressions), it
calls no table function, and every function it calls is one of DuckDB's that gives the same
answer for the same arguments whatever the session (stability ``CONSISTENT``, not ``version``),
or a macro whose own body passes the same test. Everything else, including a definition this
reading does not know, is refused with the reason; the tool context leaves refused views out of
the schema, so they are never offered, queried or fingerprinted, and names them in a note.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb

# Functions DuckDB calls consistent that still tell the session's environment.
ENVIRONMENT_FUNCTIONS = frozenset({"version", "platform"})
# Parts of a parsed query that only hold other parts (walked into, not judged).
_STRUCTURAL_REFS = frozenset({"JOIN", "SUBQUERY", "EXPRESSION_LIST", "EMPTY", "PIVOT"})
_MAX_DEPTH = 32
# What every relation in a parsed query holds (an expression holds "class" besides).
_TABLE_REF_KEYS = frozenset({"type", "alias", "sample", "query_location"})


class Refused(Exception):
    """Why a view is not offered (one short phrase)."""


@dataclass
class _Reader:
    con: duckdb.DuckDBPyConnection
    database: str
    tables: set[str]
    views: dict[str, str]  # name -> its query's text
    verdicts: dict[str, str | None] = field(default_factory=dict)  # name -> reason, or None
    _functions: dict[str, list[tuple[str, str | None, str | None, str]]] = field(
        default_factory=dict
    )

    def view(self, name: str, depth: int = 0) -> str | None:
        """Why view ``name`` is refused, or None when it reads only the file's tables."""
        if name in self.verdicts:
            return self.verdicts[name]
        self.verdicts[name] = "its definition refers back to itself"  # until decided
        try:
            self._query(self.views[name], depth + 1)
            reason = None
        except Refused as exc:
            reason = str(exc)
        self.verdicts[name] = reason
        return reason

    def _query(self, sql: str | None, depth: int) -> None:
        if sql is None or depth > _MAX_DEPTH:
            raise Refused("its definition could not be read")
        try:
            row = self.con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
            tree = json.loads(row[0]) if row else {"error": True}
        except (duckdb.Error, ValueError) as exc:
            raise Refused("its definition could not be read") from exc
        if tree.get("error") or len(tree.get("statements") or []) != 1:
            raise Refused("its definition could not be read")
        self._walk(tree["statements"][0], frozenset(), depth)

    def _walk(self, node: Any, ctes: frozenset[str], depth: int) -> None:
        if isinstance(node, list):
            for item in node:
                self._walk(item, ctes, depth)
            return
        if not isinstance(node, dict):
            return
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            ctes = ctes | {str(e.get("key", "")).lower() for e in cte_map.get("map") or []}
        kind = node.get("type")
        if "function_name" in node:
            self._function(node, depth)
        elif _TABLE_REF_KEYS <= node.keys() and "class" not in node:
            if kind == "BASE_TABLE":
                self._relation(node, ctes, depth)
            elif kind not in _STRUCTURAL_REFS:
                raise Refused(_table_ref(node, kind))
        for value in node.values():
            self._walk(value, ctes, depth)

    def _relation(self, ref: dict[str, Any], ctes: frozenset[str], depth: int) -> None:
        catalog, schema = ref.get("catalog_name") or "", ref.get("schema_name") or ""
        name = str(ref.get("table_name") or "")
        if not catalog and not schema and name.lower() in ctes:
            return
        if catalog and catalog != self.database:
            raise Refused("it reads another database")
        if schema and schema != "main":
            raise Refused(f"it reads outside the schema main ({schema})")
        match = _resolve(name, self.tables | set(self.views))
        if match is None:
            raise Refused("it reads something that is not a table of this database")
        if match in self.views and self.view(match, depth) is not None:
            raise Refused(f"it reads the view {match!r}, which is left out")

    def _function(self, call: dict[str, Any], depth: int) -> None:
        name = str(call["function_name"]).lower()
        if call.get("catalog") or call.get("schema") not in (None, "", "main"):
            raise Refused(f"it calls {name}() outside the built-in functions")
        found = self._functions_named(name)
        if not found or name in ENVIRONMENT_FUNCTIONS:
            raise Refused(f"it calls {name}()")
        for kind, stability, body, _ in found:
            if kind in ("scalar", "aggregate", "window"):
                if stability != "CONSISTENT":
                    raise Refused(f"it calls {name}(), which reads the session")
            elif kind == "macro":
                try:
                    self._query(f"SELECT {body}" if body else None, depth + 1)
                except Refused as exc:
                    raise Refused(f"it calls the macro {name}(), where {exc}") from None
            else:
                raise Refused(f"it calls {name}()")

    def _functions_named(self, name: str) -> list[tuple[str, str | None, str | None, str]]:
        if name not in self._functions:
            self._functions[name] = self.con.execute(
                "SELECT function_type, stability, macro_definition, database_name"
                " FROM duckdb_functions() WHERE lower(function_name) = ?"
                " AND schema_name IN ('main', 'pg_catalog')",
                [name],
            ).fetchall()
        return self._functions[name]


def _table_ref(node: dict[str, Any], kind: str) -> str:
    if kind == "TABLE_FUNCTION":
        name = (node.get("function") or {}).get("function_name")
        return f"it calls the table function {name}()"
    return f"it reads a {kind.lower()}"


def _resolve(name: str, names: set[str]) -> str | None:
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def refused_views(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """view name -> why it is left out, for every view of the file's ``main`` schema that reads
    anything but the file's own tables (see the module's docstring)."""
    database = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables()"
            " WHERE database_name = ? AND schema_name = 'main'",
            [database],
        ).fetchall()
    }
    views = {
        name: query_of(sql)
        for name, sql in con.execute(
            "SELECT view_name, sql FROM duckdb_views()"
            " WHERE database_name = ? AND schema_name = 'main' AND NOT internal",
            [database],
        ).fetchall()
    }
    reader = _Reader(con, database, tables, views)
    out = {name: reader.view(name) for name in sorted(views)}
    return {name: why for name, why in out.items() if why is not None}


def query_of(create_view: str | None) -> str | None:
    """The query of a ``CREATE VIEW name [(columns)] AS query;`` statement (as DuckDB stores
    it), found by DuckDB's tokenizer: what follows the first ``AS`` outside parentheses."""
    if not create_view:
        return None
    depth = 0
    for start, end, kind in _tokens(create_view):
        text = create_view[start:end]
        if kind == duckdb.token_type.operator:
            depth += text.count("(") - text.count(")")
        elif kind == duckdb.token_type.keyword and depth == 0 and text.upper() == "AS":
            return create_view[end:].strip().rstrip(";")
    return None


def _tokens(sql: str) -> Iterator[tuple[int, int, Any]]:
    tokens = duckdb.tokenize(sql)
    for i, (start, kind) in enumerate(tokens):
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        yield start, len(sql[start:end].rstrip()) + start, kind


def left_out_note(name: str, reason: str, kind: str = "view") -> str:
    """The one line that names a relation left out (a ``kind``: view, relation) and why."""
    from sql_tools.output import printable_line

    return printable_line(f"{kind} {name!r} left out: {reason}", 300)

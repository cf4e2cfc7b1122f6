"""The store's own functions in a database whose ``public`` schema another role may create
objects in: that role plants functions and operators that the bodies of
``public.save_investigation()`` (which runs as its owner) and ``public.match_memory_documents()``
would resolve, each one recording that it ran.

Writers then save, replace and search investigations: everything reads back as saved, the
searches answer as they do once the planted objects are gone, and no planted code ever ran, as
the owner or as the writer. Every function of the store searches ``pg_catalog, pg_temp`` only.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql

from tasks.store import PostgresStore
from tests.support.records import android_dau_drop, de_signup_drop, ios_revenue_drop

# Slow: a database per planted object, each with three investigations saved and searched.
pytestmark = pytest.mark.slow

SEARCH_PATH = "search_path=pg_catalog, pg_temp"
STORE_FUNCTIONS = {
    "drilldown_caller()",
    "drilldown_team()",
    "match_memory_documents(extensions.vector,integer,jsonb)",
    "save_investigation(json,json,json,json,json,json)",
}
# Every planted body first leaves a trace that no rollback takes back (a sequence) and one that
# names the role it ran as (a row, kept when the caller's transaction commits).
TRACE = (
    "SELECT pg_catalog.nextval('public.shadow_hits'); "
    "INSERT INTO public.shadow_calls (name, ran_as) VALUES ('{name}', current_user); "
)


def _function(name: str, args: str, returns: str, value: str) -> str:
    trace = TRACE.format(name=f"{name}({args})")
    return (
        f"CREATE FUNCTION public.{name}({args}) RETURNS {returns} LANGUAGE sql "
        f"AS $body$ {trace} SELECT {value} $body$;"
    )


def _operator(op: str, left: str, right: str, returns: str, value: str) -> str:
    fn = "op_" + uuid.uuid4().hex[:8]
    return _function(fn, f"{left}, {right}", returns, value) + (
        f" CREATE OPERATOR public.{op} (LEFTARG = {left}, RIGHTARG = {right}, "
        f"FUNCTION = public.{fn});"
    )


# What the other role plants in public. The first four are closer matches for the calls in the
# functions' bodies than the built-ins (or, for <=>, found before pgvector's schema); the others
# have the built-ins' own signatures.
SHADOWS = {
    # the run lock's hash, called with an integer seed: runs as the write function's owner
    "hashtextextended(text, integer)": _function(
        "hashtextextended", "text, integer", "bigint", "0::bigint"
    ),
    "hashtextextended that grants its role superuser": (
        "CREATE FUNCTION public.hashtextextended(text, integer) RETURNS bigint LANGUAGE sql "
        "AS $body$ " + TRACE.format(name="superuser")
        + "ALTER ROLE {role} SUPERUSER; SELECT 0::bigint $body$;"
    ),
    "json_build_array(text, text)": _function(
        "json_build_array", "text, text", "json", "'[\"one\", \"lock\"]'::json"
    ),
    "vector <=> vector": _operator(
        "<=>", "extensions.vector", "extensions.vector", "double precision", "0::float8"
    ),
    "integer - double precision": _operator(
        "-", "integer", "double precision", "double precision", "1::float8"
    ),
    "text = text": _operator("=", "text", "text", "boolean", "true"),
    "json ->> text": _operator("->>", "json", "text", "text", "'run-planted'::text"),
    "jsonb @> jsonb": _operator("@>", "jsonb", "jsonb", "boolean", "true"),
    "json_typeof(json)": _function("json_typeof", "json", "text", "'object'::text"),
    "pg_advisory_xact_lock(bigint)": _function(
        "pg_advisory_xact_lock", "bigint", "void", "null::void"
    ),
    "quote_ident(text)": _function("quote_ident", "text", "text", "'x'::text"),
}
SHADOWS["all of them"] = " ".join(
    v for k, v in SHADOWS.items() if k != "hashtextextended that grants its role superuser"
)


def _plant(admin: str, statements: str) -> str:
    """Run ``statements`` as a new role that may only create objects in ``public``; its name."""
    role = "shadow_" + uuid.uuid4().hex[:8]
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute("CREATE SEQUENCE IF NOT EXISTS public.shadow_hits")
        c.execute("CREATE TABLE IF NOT EXISTS public.shadow_calls (name text, ran_as text)")
        c.execute("GRANT USAGE ON SEQUENCE public.shadow_hits TO public")
        c.execute("GRANT INSERT, SELECT ON public.shadow_calls TO public")
        c.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        c.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {0}; "
                          "GRANT USAGE ON SCHEMA extensions TO {0}").format(
            sql.Identifier(role)))  # fmt: skip
        with c.transaction():
            c.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            c.execute(statements.replace("{role}", role))
    return role


def _remove(admin: str, role: str) -> None:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        c.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _searches(store: PostgresStore) -> list[list[tuple[str, float]]]:
    queries = [
        ("ios app release revenue fell", None),
        ("german signups dropped", None),
        ("android daily users", "dau"),
        ("revenue", "sum(revenue)"),
    ]
    return [
        [(hit.run_id, round(hit.score, 9)) for hit in store.search_similar(q, k=3, metric=m)]
        for q, m in queries
    ]


def _traces(admin: str) -> tuple[tuple, list[tuple]]:
    with psycopg.connect(admin) as c:
        hits = c.execute("SELECT last_value, is_called FROM public.shadow_hits").fetchone()
        calls = c.execute("SELECT name, ran_as FROM public.shadow_calls").fetchall()
    return hits, calls


@pytest.mark.parametrize("variant", SHADOWS)
def test_no_planted_object_runs_inside_the_store_functions(pg_server, pg_db, embedder, variant):
    admin, writer = pg_server.admin_uri(pg_db), pg_server.writer_dsn(pg_db)
    records = [ios_revenue_drop(), de_signup_drop(), android_dau_drop()]
    changed = ios_revenue_drop(metric_name="revenue (net)", report_md="# replaced")
    role = _plant(admin, SHADOWS[variant])
    try:
        with PostgresStore(writer, embedder=embedder) as store:
            for record in records:
                store.save_investigation(record)
            store.save_investigation(records[0])  # the same content: nothing written
            for record in records:
                assert store.get_investigation(record.run_id) == record
            store.save_investigation(changed)  # other content: replaced whole
            assert store.get_investigation(changed.run_id) == changed
            planted = _searches(store)
        with psycopg.connect(admin) as c:
            superuser = c.execute("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = %s",
                                  [role]).fetchone()  # fmt: skip
        assert superuser == (False,)
        assert _traces(admin) == ((1, False), [])
    finally:
        _remove(admin, role)
    with PostgresStore(writer, embedder=embedder) as store:
        assert _searches(store) == planted
        assert sorted(s.run_id for s in store.list_investigations()) == sorted(
            r.run_id for r in records)
        assert store.get_investigation(changed.run_id) == changed
    with psycopg.connect(admin) as c:
        counts = c.execute(
            "SELECT (SELECT count(*) FROM public.investigations), "
            "(SELECT count(*) FROM public.memory_documents), "
            "(SELECT count(*) FROM public.reports)"
        ).fetchone()
    assert counts == (3, 3, 3)


def test_every_store_function_searches_pg_catalog_and_pg_temp_only(pg_server, pg_db):
    with psycopg.connect(pg_server.admin_uri(pg_db)) as c:
        rows = c.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig FROM pg_catalog.pg_proc p "
            "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'public'"
        ).fetchall()
    found = {name.removeprefix("public.") for name, _ in rows}
    assert STORE_FUNCTIONS <= found
    paths = {name: [s for s in (config or []) if s.startswith("search_path=")] for name, config
             in rows}  # fmt: skip
    assert paths == {name: [SEARCH_PATH] for name, _ in rows}

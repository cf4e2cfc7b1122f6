"""Profiling tables where they live in Postgres: the same profile and join keys the DuckDB loader
computes for the same rows, measured by queries that run in Postgres."""

from __future__ import annotations

import psycopg
import pytest

from sql_tools import ToolContext
from sql_tools._postgres import PostgresContext
from tasks.ingest.load import load_files
from tasks.ingest.postgres import open_context, open_postgres, profile_table
from tasks.ingest.profile import NEAR_UNIQUE_MIN_VALUES
from tests.engine.test_scenarios import SCENARIOS
from tests.flows.test_passes import _seq_scans
from tests.support.pg_source import copy_tables, reader_role

MIXED = """id,code,flag,amount,seen_at,label
1,10,true,1.5,2024-01-01 10:00:00,alpha
2,20,false,,2024-01-02 11:30:00,beta
3,x7,true,2.5,,alpha
4,40,,3.5,2024-01-04 09:15:00,
5,50,true,4.5,2024-01-05 08:00:00,gamma
"""


def _profiles_equal(duck: ToolContext, pg: PostgresContext) -> None:
    assert sorted(pg.schema.catalog.profiles) == sorted(duck.schema.catalog.profiles)
    for name, expected in duck.schema.catalog.profiles.items():
        got = pg.schema.catalog.profiles[name]
        assert got.row_count == expected.row_count
        for e, g in zip(expected.columns, got.columns, strict=True):
            assert g.model_dump(exclude={"label"}) == e.model_dump(exclude={"label"}), e.name
    assert pg.schema.catalog.join_keys == duck.schema.catalog.join_keys


def test_shop_profile_and_join_keys_match_duckdb(shop_pg, shop_db):
    url = reader_role(shop_pg)
    with ToolContext(shop_db) as duck, open_postgres(url) as pg:
        _profiles_equal(duck, pg)
        keys = [(k.from_table, k.from_column, k.to_table) for k in pg.schema.catalog.join_keys]
        assert ("sales", "customer_id", "customers") in keys


def test_mixed_text_nulls_booleans_and_timestamps_match_duckdb(make_db, pg_database):
    db = make_db(things=MIXED)
    uri = pg_database()
    copy_tables(db, uri)
    with ToolContext(db) as duck, open_context(reader_role(uri)) as pg:
        _profiles_equal(duck, pg)
        code = pg.schema.catalog.profiles["things"].column("code")
        assert code is not None and code.mixed_type and "'x7'" in (code.mixed_note or "")


def test_large_tables_take_postgres_estimates_of_distinct_values(pg_database):
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute(
            "CREATE TABLE t AS SELECT g AS id, g % 7 AS bucket FROM generate_series(1, 500) g"
        )
        c.execute("ANALYZE t")
    with open_postgres(reader_role(uri)) as ctx:
        exact = ctx.schema.catalog.profiles["t"]
        estimated = profile_table(ctx, "t", exact_distinct_max_rows=100)
    for name, distinct in (("id", 500), ("bucket", 7)):
        e, g = exact.column(name), estimated.column(name)
        assert e is not None and g is not None
        assert (e.distinct_count, e.distinct_exact) == (distinct, True)
        assert (g.distinct_count, g.distinct_exact) == (distinct, False)
        assert g.role == e.role


@pytest.mark.parametrize(
    ("pg_type", "product_type"),
    [
        ("numeric(12,2)", "DECIMAL(12,2)"),
        ("numeric", "DECIMAL"),
        ("character varying(20)", "VARCHAR"),
        ("timestamp(3) with time zone", "TIMESTAMP WITH TIME ZONE"),
        ("real", "FLOAT"),
        ("integer[]", "INTEGER[]"),
        ("jsonb", "JSON"),
    ],
)
def test_postgres_types_in_the_product_vocabulary(pg_type, product_type):
    from sql_tools._postgres import product_type as convert

    assert convert(pg_type) == product_type


def _near_unique(profile, column) -> bool:
    non_null = profile.row_count - column.null_count
    return non_null > NEAR_UNIQUE_MIN_VALUES and column.distinct_count >= 0.9 * non_null


def test_opening_reads_each_table_once_and_profiles_as_duckdb(pg_database, tmp_path):
    """The profile and the fingerprint come from one statement per table (Postgres's own count
    of sequential scans says so), and give the profile the DuckDB loader gives the same rows
    (a near-unique column's samples are its first values by count then value)."""
    db = tmp_path / "data.duckdb"
    load_files(sorted(p for p in (SCENARIOS / "pricing_join").iterdir() if "csv" in p.name), db)
    uri = pg_database()
    copy_tables(db, uri)
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("ANALYZE")
        c.execute("SELECT pg_stat_reset()")
    url = reader_role(uri, ["users"])
    with open_postgres(url) as pg:
        fingerprint = pg.content_fingerprint()
        catalog = pg.schema.catalog
    assert _seq_scans(uri) == {"users": 1}
    with PostgresContext(url) as unprofiled:  # measured by a query of its own
        assert fingerprint == unprofiled.content_fingerprint()
    with ToolContext(db) as duck:
        expected = duck.schema.catalog.profiles["users"]
    got = catalog.profiles["users"]
    assert got.row_count == expected.row_count
    for e, g in zip(expected.columns, got.columns, strict=True):
        if _near_unique(expected, e):
            assert g.samples == sorted(g.samples), e.name
            e = e.model_copy(update={"samples": g.samples})
        assert g.model_dump(exclude={"label"}) == e.model_dump(exclude={"label"}), e.name

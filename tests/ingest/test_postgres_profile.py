"""Profiling tables where they live in Postgres: the same profile and join keys the DuckDB loader
computes for the same rows, measured by queries that run in Postgres."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from sql_tools import PostgresContext, ToolContext
from sql_tools.catalog import Catalog
from tasks.ingest import postgres
from tasks.ingest.load import load_files
from tasks.ingest.postgres import open_context, open_postgres, profile_postgres, profile_table
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


def _pricing_join(tmp_path: Path) -> Path:
    """The tables of the planted scenario pricing_join, loaded by the real loader."""
    db = tmp_path / "data.duckdb"
    load_files(sorted(p for p in (SCENARIOS / "pricing_join").iterdir() if "csv" in p.name), db)
    return db


def test_opening_reads_each_table_once_and_profiles_as_duckdb(pg_database, tmp_path):
    """The profile and the fingerprint come from one statement per table (Postgres's own count
    of sequential scans says so), and give the profile the DuckDB loader gives the same rows
    (a near-unique column's samples are its first values by count then value)."""
    db = _pricing_join(tmp_path)
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


def _analyze_and_reset_counts(uri: str) -> None:
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute("ANALYZE")
        c.execute("SELECT pg_stat_reset()")


def _open_counting_scans(uri: str) -> tuple[Catalog, dict[str, int], dict[str, int]]:
    """Open every table of ``uri`` as a reading role: the catalogue, Postgres's count of each
    table's sequential scans and the product's count of its reads."""
    _analyze_and_reset_counts(uri)
    with open_postgres(reader_role(uri)) as pg:
        catalog, ledger = pg.schema.catalog, pg.passes.by_table()
    return catalog, _seq_scans(uri), ledger


def _join_keys_of_duckdb(db: Path) -> list:
    with ToolContext(db) as duck:
        return duck.schema.catalog.join_keys


def test_opening_reads_each_table_once_join_keys_included(pg_database, tmp_path):
    """Opening both tables of pricing_join reads each once: the pass that profiles a table also
    measures what the join key's checks need, and the keys (containment included) are the
    DuckDB loader's."""
    db = _pricing_join(tmp_path)
    uri = pg_database()
    copy_tables(db, uri)
    catalog, scans, ledger = _open_counting_scans(uri)
    assert scans == ledger == {"events": 1, "users": 1}
    expected = _join_keys_of_duckdb(db)
    assert [(k.from_table, k.from_column, k.to_table) for k in expected] == [
        ("events", "user_id", "users")
    ]
    assert catalog.join_keys == expected


@pytest.mark.parametrize("bound", ["KEY_VALUES_MAX", "KEY_TEXT_MAX_BYTES"])
def test_a_key_column_over_the_bound_is_checked_in_sql(pg_database, make_db, monkeypatch, bound):
    """A key column with more values (or text bytes) than the pass brings back is checked by
    the containment query: the same keys, one more scan of both tables."""
    db = make_db(
        orders="order_id,customer_code,amount\n"
        + "".join(f"{i},c{i % 40:03d},{i}.5\n" for i in range(200)),
        customers="customer_code,tier\n" + "".join(f"c{i:03d},t{i % 3}\n" for i in range(50)),
    )
    expected = _join_keys_of_duckdb(db)
    assert [k.containment for k in expected] == [1.0]
    uri = pg_database()
    copy_tables(db, uri)
    catalog, scans, ledger = _open_counting_scans(uri)
    assert catalog.join_keys == expected
    assert scans == ledger == {"orders": 1, "customers": 1}
    monkeypatch.setattr(postgres, bound, 30 if bound == "KEY_VALUES_MAX" else 120)
    catalog, scans, ledger = _open_counting_scans(uri)
    assert catalog.join_keys == expected
    assert scans == ledger == {"orders": 2, "customers": 2}


KEY_VALUES = {
    "customer_code": lambda i: f"c{i:03d}",
    "customer_id": lambda i: 1000 + i,
    "day": lambda i: f"2024-02-{1 + i % 28:02d}" if i < 28 else f"2024-03-{i - 27:02d}",
}


@pytest.mark.parametrize("key", sorted(KEY_VALUES))
@pytest.mark.parametrize(("found", "containment"), [(36, 0.9), (35, None)])
def test_containment_is_counted_from_the_pass_as_the_duckdb_loader_counts_it(
    pg_database, make_db, key, found, containment
):
    """36 of a key's 40 values found in the other table keep it (0.9), 35 do not; text,
    integers and dates are compared as the database compares them, with no query of their
    own."""
    value = KEY_VALUES[key]
    db = make_db(
        facts=f"{key},amount\n" + "".join(f"{value(i % 40)},{i}.5\n" for i in range(120)),
        dims=f"{key},label\n" + "".join(f"{value(i)},l{i % 4}\n" for i in range(found)),
    )
    expected = _join_keys_of_duckdb(db)
    assert [k.containment for k in expected] == ([] if containment is None else [containment])
    uri = pg_database()
    copy_tables(db, uri)
    catalog, scans, ledger = _open_counting_scans(uri)
    assert catalog.join_keys == expected
    assert scans == ledger == {"facts": 1, "dims": 1}


def test_uniqueness_is_exact_from_the_pass_when_distinct_values_are_estimated(pg_database, make_db):
    """A table with more rows than ``exact_distinct_max_rows`` takes Postgres's estimate of its
    distinct values, yet whether a key's values are all different comes exact from the pass:
    ``customers.customer_id`` with one value twice is no key, ``stores.store_id`` is, and no
    table is read again."""
    db = make_db(
        orders="order_id,customer_id,store_id,amount\n"
        + "".join(f"{i},{1000 + i % 500},{i % 300},{i}.5\n" for i in range(3000)),
        customers="customer_id,tier\n"
        + "".join(f"{1000 + min(i, 1998)},t{i % 3}\n" for i in range(2000)),
        stores="store_id,city\n" + "".join(f"{i},c{i % 9}\n" for i in range(2000)),
    )
    expected = _join_keys_of_duckdb(db)
    assert [(k.from_column, k.to_table, k.containment) for k in expected] == [
        ("store_id", "stores", 1.0)
    ]
    uri = pg_database()
    copy_tables(db, uri)
    _analyze_and_reset_counts(uri)
    with PostgresContext(reader_role(uri)) as pg:
        catalog = profile_postgres(pg, exact_distinct_max_rows=100)
        ledger = pg.passes.by_table()
    customer_id = catalog.profiles["customers"].column("customer_id")
    assert customer_id is not None and not customer_id.distinct_exact
    assert catalog.join_keys == expected
    assert _seq_scans(uri) == ledger == {"orders": 1, "customers": 1, "stores": 1}


def test_a_key_whose_type_compares_otherwise_in_python_is_checked_in_sql(pg_database):
    """``character(n)`` ignores trailing spaces where Python's strings do not: its key is
    checked by the containment query (one more scan of both tables), which finds it."""
    uri = pg_database()
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute(
            "CREATE TABLE sales AS SELECT 'i' || g % 20 AS item_code, g * 1.5::float8 AS amount "
            "FROM generate_series(1, 200) g; "
            "CREATE TABLE items AS SELECT CAST('i' || g AS character(6)) AS item_code, "
            "'l' || g AS label FROM generate_series(0, 19) g"
        )
    catalog, scans, ledger = _open_counting_scans(uri)
    keys = [(k.from_table, k.to_table, k.containment) for k in catalog.join_keys]
    assert keys == [("sales", "items", 1.0)]
    assert scans == ledger == {"sales": 2, "items": 2}

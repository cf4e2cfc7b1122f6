"""Tests for tasks.ingest.profile: column profiles, role guesses, join keys, stored catalogue."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from sql_tools import ToolInputError
from sql_tools.catalog import (
    ColumnInfo,
    LoadRecord,
    TableProfile,
    ensure_catalog,
    read_catalog,
    write_load,
)
from tasks.ingest.profile import (
    detect_join_keys,
    guess_role,
    is_identifier_name,
    profile_database,
    profile_table,
    quote,
)

HOSTILE = 'a"; DROP TABLE t; --'


@pytest.fixture
def con(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A file database with an empty catalogue, as the loader leaves it before profiling."""
    c = duckdb.connect(str(tmp_path / "test.duckdb"))
    ensure_catalog(c)
    yield c
    c.close()


def record(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Insert a LoadRecord for an existing table; labels are the names upper-cased."""
    cols = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? "
        "ORDER BY column_index",
        [table],
    ).fetchall()
    rows = con.execute(f"SELECT count(*) FROM main.{quote(table)}").fetchall()[0][0]
    write_load(
        con,
        LoadRecord(
            table=table,
            source=f"/data/{table}.csv",
            file_name=f"{table}.csv",
            sha256="0" * 64,
            format="csv",
            rows=rows,
            bytes=0,
            columns=[ColumnInfo(name=n, label=n.upper()) for (n,) in cols],
            loaded_at=datetime(2024, 1, 1),
        ),
    )


def profile(con: duckdb.DuckDBPyConnection, table: str, **kw: int) -> TableProfile:
    return profile_table(con, table, {}, **kw)


def make_events(con: duckdb.DuckDBPyConnection, users: int = 40) -> None:
    """A realistic events table: 400 rows, user ids 0..users-1."""
    con.execute(
        """
        CREATE TABLE events AS SELECT
            DATE '2024-01-01' + (i % 30)::INTEGER AS date,
            (i % ?)::BIGINT AS user_id,
            ['ios', 'android', 'web'][1 + i % 3] AS platform,
            (10 + i % 4)::INTEGER AS app_version,
            ['US', 'DE', 'FR', 'GB', 'JP'][1 + i % 5] AS country,
            (1 + i % 3)::INTEGER AS sessions,
            round((i * 37 % 1000) / 7.0, 2) AS revenue
        FROM range(400) r(i)
        """,
        [users],
    )


def make_users(con: duckdb.DuckDBPyConnection, n: int = 40, duplicate: bool = False) -> None:
    con.execute(
        "CREATE TABLE users AS SELECT i::BIGINT AS user_id, ['free', 'pro'][1 + i % 2] AS tier "
        "FROM range(?) r(i)",
        [n],
    )
    if duplicate:
        con.execute("INSERT INTO users VALUES (0, 'pro'), (1, 'free')")


# --------------------------------------------------------------------------------------------
# Column statistics
# --------------------------------------------------------------------------------------------


def test_types_and_kinds(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """CREATE TABLE t AS SELECT 1::BIGINT AS i, 1.5::DOUBLE AS f, 2.25::DECIMAL(10,2) AS dec,
        'x' AS s, DATE '2024-01-02' AS d, TIMESTAMP '2024-01-02 03:04:05' AS ts,
        TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tz, true AS b, INTERVAL 1 DAY AS iv,
        [1, 2] AS l"""
    )
    p = profile(con, "t")
    got = {c.name: (c.type, c.kind) for c in p.columns}
    assert got == {
        "i": ("BIGINT", "number"),
        "f": ("DOUBLE", "number"),
        "dec": ("DECIMAL(10,2)", "number"),
        "s": ("VARCHAR", "text"),
        "d": ("DATE", "date"),
        "ts": ("TIMESTAMP", "timestamp"),
        "tz": ("TIMESTAMP WITH TIME ZONE", "timestamp"),
        "b": ("BOOLEAN", "boolean"),
        "iv": ("INTERVAL", "other"),
        "l": ("INTEGER[]", "other"),
    }
    assert [c.name for c in p.columns] == list(got)  # table order
    assert p.column("ts").min == "2024-01-02T03:04:05"
    assert p.column("dec").max == 2.25
    assert p.column("b").min is True
    assert p.column("l").min is None  # no min/max for nested types


def test_null_counts_and_rates(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE t AS SELECT * FROM "
        "(VALUES (1, 'a'), (NULL, 'b'), (NULL, NULL), (4, 'd')) v(n, s)"
    )
    p = profile(con, "t")
    assert p.row_count == 4
    assert (p.column("n").null_count, p.column("n").null_rate) == (2, 0.5)
    assert (p.column("s").null_count, p.column("s").null_rate) == (1, 0.25)


def test_exact_distinct_ignores_nulls(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a'), ('b'), ('a'), (NULL), ('c')) v(s)")
    c = profile(con, "t").column("s")
    assert (c.distinct_count, c.distinct_exact) == (3, True)


def test_approx_distinct_above_row_threshold(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE t AS SELECT i % 30 AS k, i AS u FROM range(60) r(i)")
    exact = profile(con, "t", exact_distinct_max_rows=60)
    assert [(c.distinct_count, c.distinct_exact) for c in exact.columns] == [(30, True), (60, True)]
    approx = profile(con, "t", exact_distinct_max_rows=59)
    k, u = approx.columns
    assert not k.distinct_exact and not u.distinct_exact
    assert abs(k.distinct_count - 30) <= 3
    assert 54 <= u.distinct_count <= 60  # never above the non-null count


def test_samples_are_most_frequent_values(con: duckdb.DuckDBPyConnection) -> None:
    values = ["b"] * 3 + ["a"] * 5 + ["c"] * 3 + ["z", "y", "x"] + [None] * 9
    con.execute("CREATE TABLE t (s VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    c = profile(con, "t").column("s")
    # most frequent first, ties by value, NULL (the most frequent) is not a sample
    assert c.samples == ["a", "b", "c", "x", "y"]


@pytest.mark.parametrize("threshold", [12, 30], ids=["default", "set-higher"])
def test_integer_samples_over_a_wide_range_keep_duckdbs_setting(
    con: duckdb.DuckDBPyConnection, threshold: int
) -> None:
    # 50,000 ids in 120,000 rows: ids 3, 1 and then every odd id below 40,000 twice or more
    con.execute(f"SET perfect_ht_threshold = {threshold}")
    con.execute(
        "CREATE TABLE t AS SELECT (CASE WHEN i < 5 THEN 3 WHEN i < 9 THEN 1 "
        "ELSE (i * 7919) % 50000 END)::BIGINT AS id FROM range(120000) r(i)"
    )
    expected = con.execute(
        "SELECT id FROM t GROUP BY id ORDER BY count(*) DESC, id LIMIT 5"
    ).fetchall()
    c = profile(con, "t").column("id")
    assert c.samples == [v for (v,) in expected] and c.samples[:2] == [3, 1]
    assert con.execute("SELECT current_setting('perfect_ht_threshold')").fetchone() == (threshold,)


def test_text_numbers_and_dates_count_every_row(con: duckdb.DuckDBPyConnection) -> None:
    # by distinct value '1' would be one of three; by row it is three of five
    con.execute("CREATE TABLE t (n VARCHAR, d VARCHAR)")
    con.executemany(
        "INSERT INTO t VALUES (?, ?)",
        [["1", "2024-01-01"]] * 3 + [["x", "soon"], ["y", "later"], [None, None]],
    )
    p = profile(con, "t")
    assert p.column("n").mixed_note == "mostly numeric text: 3 of 5 values are numbers (e.g. 'x')"
    assert p.column("d").mixed_note == ("mostly date text: 3 of 5 values are dates (e.g. 'later')")


def test_samples_of_near_unique_column_are_five_distinct_values(
    con: duckdb.DuckDBPyConnection,
) -> None:
    con.execute("CREATE TABLE t AS SELECT 'user-' || i::VARCHAR AS s FROM range(3000) r(i)")
    c = profile(con, "t").column("s")
    assert len(c.samples) == 5 and len(set(c.samples)) == 5
    assert all(isinstance(v, str) and v.startswith("user-") for v in c.samples)


def test_min_max_numbers_dates_text(con: duckdb.DuckDBPyConnection) -> None:
    long = "x" * 500
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES "
        "(3, 2.5, DATE '2024-03-01', 'pear'), "
        "(-1, 10.0, DATE '2023-12-31', 'apple'), "
        "(NULL, NULL, NULL, ?)) v(n, f, d, s)",
        [long],
    )
    p = profile(con, "t")
    assert (p.column("n").min, p.column("n").max) == (-1, 3)
    assert (p.column("f").min, p.column("f").max) == (2.5, 10.0)
    assert (p.column("d").min, p.column("d").max) == ("2023-12-31", "2024-03-01")
    s = p.column("s")
    assert s.min == "apple"
    assert s.max == "x" * 200  # truncated
    assert "x" * 200 in s.samples and long not in s.samples


def test_text_min_max_from_groups_and_from_a_scan_agree_with_sql(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # low: grouped (min/max come with the samples); uniq: near-unique (min/max from one scan);
    # nully: grouped with NULLs; empty: no value at all
    con.execute(
        "CREATE TABLE t AS SELECT 'k' || (i % 7)::VARCHAR AS low, "
        "'id' || lpad(((i * 7919) % 3000)::VARCHAR, 5, '0') AS uniq, "
        "CASE WHEN i % 3 = 0 THEN NULL ELSE 'v' || (i % 50)::VARCHAR END AS nully, "
        "NULL::VARCHAR AS empty FROM range(3000) r(i)"
    )
    p = profile(con, "t")
    for name in ("low", "uniq", "nully", "empty"):
        c = p.column(name)
        expected = con.execute(f"SELECT min({name}), max({name}) FROM t").fetchone()
        assert (c.min, c.max) == expected, name
    assert p.column("low").samples == ["k0", "k1", "k2", "k3", "k4"]
    assert p.column("nully").samples == ["v0", "v1", "v10", "v11", "v12"]  # 40 each: by value
    assert p.column("empty").samples == []
    uniq = p.column("uniq")
    assert len(uniq.samples) == 5 and all(str(v).startswith("id") for v in uniq.samples)


def test_text_columns_named_like_the_profile_query_aliases(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE t AS SELECT 'x' || (i % 5)::VARCHAR AS v, 'y' || (i % 3)::VARCHAR AS n, "
        f"'z' || (i % 2)::VARCHAR AS {quote(HOSTILE)} FROM range(30) r(i)"
    )
    p = profile(con, "t")
    assert [(c.min, c.max, c.samples) for c in p.columns] == [
        ("x0", "x4", ["x0", "x1", "x2", "x3", "x4"]),
        ("y0", "y2", ["y0", "y1", "y2"]),
        ("z0", "z1", ["z0", "z1"]),
    ]


def test_mixed_examples_only_for_mixed_columns(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES ('1', '2024-01-01', 'a'), ('2', 'soon', 'b'), "
        "('x', '2024-01-03', 'c'), ('4', '2024-01-04', 'd')) v(n, d, s)"
    )
    p = profile(con, "t")
    assert p.column("n").mixed_note == "mostly numeric text: 3 of 4 values are numbers (e.g. 'x')"
    assert p.column("d").mixed_note == "mostly date text: 3 of 4 values are dates (e.g. 'soon')"
    assert (p.column("s").mixed_type, p.column("s").mixed_note) == (False, None)


def test_mixed_numeric_text_has_note(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('1'), ('2'), ('three'), ('4')) v(v)")
    c = profile(con, "t").column("v")
    assert c.mixed_type is True
    assert c.mixed_note == "mostly numeric text: 3 of 4 values are numbers (e.g. 'three')"


def test_mixed_date_text_and_example_truncated(con: duckdb.DuckDBPyConnection) -> None:
    odd = "not a date " * 20
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES ('2024-01-01'), ('2024-01-02'), (?)) v(v)", [odd]
    )
    c = profile(con, "t").column("v")
    assert c.mixed_type is True
    assert c.mixed_note.startswith("mostly date text: 2 of 3 values are dates (e.g. 'not a date")
    assert len(c.mixed_note) < 120


@pytest.mark.parametrize(
    "values",
    [["1", "2", "3"], ["a", "b", "1"], ["2024-01-01", "x", "y"]],
    ids=["all-numbers", "mostly-words", "mostly-words-one-date"],
)
def test_not_mixed(con: duckdb.DuckDBPyConnection, values: list[str]) -> None:
    con.execute("CREATE TABLE t (v VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    c = profile(con, "t").column("v")
    assert (c.mixed_type, c.mixed_note) == (False, None)


def test_all_null_column(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE t AS SELECT i, NULL::VARCHAR AS s, NULL::DOUBLE AS x FROM range(5) r(i)"
    )
    p = profile(con, "t")
    for name in ("s", "x"):
        c = p.column(name)
        assert (c.null_count, c.null_rate, c.distinct_count) == (5, 1.0, 0)
        assert (c.min, c.max, c.samples, c.mixed_type, c.role) == (None, None, [], False, "other")


def test_empty_strings_are_values_not_nulls(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE t AS SELECT * FROM "
        "(VALUES ('', '1'), ('', '2'), ('x', ''), (NULL, '4')) v(s, n)"
    )
    p = profile(con, "t")
    s = p.column("s")
    assert (s.null_count, s.distinct_count, s.samples, s.min, s.max) == (1, 2, ["", "x"], "", "x")
    n = p.column("n")
    assert n.null_count == 0
    assert n.mixed_note == "mostly numeric text: 3 of 4 values are numbers (e.g. '')"


def test_hostile_column_name(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TABLE t AS SELECT i AS {quote(HOSTILE)}, 'v' AS ok FROM range(3) r(i)")
    p = profile_table(con, "t", {HOSTILE: "label <b>"})
    c = p.column(HOSTILE)
    assert (c.label, c.distinct_count, c.min, c.max, c.samples) == ("label <b>", 3, 0, 2, [0, 1, 2])
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(3,)]


def test_hostile_table_name_through_profile_database(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TABLE {quote(HOSTILE)} AS SELECT 1 AS id")
    record(con, HOSTILE)
    cat = profile_database(con)
    assert cat.profiles[HOSTILE].row_count == 1


def test_empty_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE t (id BIGINT, s VARCHAR, d DATE)")
    p = profile(con, "t")
    assert p.row_count == 0
    assert all(c.null_rate == 0.0 and c.distinct_count == 0 and c.samples == [] for c in p.columns)


def test_unknown_table(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(ToolInputError) as e:
        profile(con, "nope")
    assert e.value.code == "unknown_table"
    with pytest.raises(ToolInputError) as e:
        profile_database(con, ["nope"])
    assert e.value.code == "unknown_table"


# --------------------------------------------------------------------------------------------
# Roles
# --------------------------------------------------------------------------------------------


def test_roles_of_a_realistic_events_table(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    roles = {c.name: c.role for c in profile(con, "events").columns}
    assert roles == {
        "date": "time",
        "user_id": "identifier",
        "platform": "dimension",
        "app_version": "dimension",
        "country": "dimension",
        "sessions": "measure",
        "revenue": "measure",
    }


def test_roles_by_cardinality_and_shape(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """CREATE TABLE t AS SELECT
            'u' || i::VARCHAR AS handle,             -- unique short text, > 1000 values
            i * 7 AS ticket,                         -- integer unique per row
            i % 50 AS age,                           -- integer, 50 distinct
            i % 3 AS tier,                           -- integer code
            (i % 2 = 0) AS is_paid,
            'constant' AS source,
            'This is a long free text comment number ' || i::VARCHAR || '.' AS comment,
            i % 3 AS order_count,                    -- few values, but an amount name
            TIMESTAMP '2024-01-01' + INTERVAL (i) MINUTE AS created_at,
            i AS userId
        FROM range(1500) r(i)"""
    )
    roles = {c.name: c.role for c in profile(con, "t").columns}
    assert roles == {
        "handle": "identifier",
        "ticket": "identifier",
        "age": "measure",
        "tier": "dimension",
        "is_paid": "dimension",
        "source": "other",
        "comment": "other",
        "order_count": "measure",
        "created_at": "time",
        "userId": "identifier",
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("id", True),
        ("user_id", True),
        ("userId", True),
        ("USER_ID", True),
        ("uuid", True),
        ("order_key", True),
        ("email", True),
        ("valid", False),
        ("paid", False),
        ("android", False),
        ("keyword", False),
    ],
)
def test_identifier_names(name: str, expected: bool) -> None:
    assert is_identifier_name(name) is expected


def test_guess_role_small_unique_integers_are_not_identifiers() -> None:
    # unique per row but only 10 rows and not id-named: a small code/measure, not an identifier
    assert guess_role("rank", "INTEGER", 10, 10, 10) == "dimension"
    assert guess_role("price", "INTEGER", 10, 10, 1) == "measure"


# --------------------------------------------------------------------------------------------
# Join keys
# --------------------------------------------------------------------------------------------


def joins(cat_or_keys: object) -> set[tuple[str, str, str, str]]:
    keys = getattr(cat_or_keys, "join_keys", cat_or_keys)
    return {(k.from_table, k.from_column, k.to_table, k.to_column) for k in keys}


def test_join_key_detected(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    make_users(con)
    record(con, "events")
    record(con, "users")
    cat = profile_database(con)
    assert joins(cat) == {("events", "user_id", "users", "user_id")}
    assert cat.join_keys[0].containment == 1.0


def test_join_key_tolerates_a_few_orphans(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con, users=40)
    make_users(con, n=37)  # 37 of 40 event users known: containment 0.925
    keys = detect_join_keys(con, {"events": profile(con, "events"), "users": profile(con, "users")})
    assert joins(keys) == {("events", "user_id", "users", "user_id")}
    assert keys[0].containment == pytest.approx(37 / 40)


def test_no_join_key_when_target_has_duplicates(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    make_users(con, duplicate=True)
    keys = detect_join_keys(con, {"events": profile(con, "events"), "users": profile(con, "users")})
    assert joins(keys) == set()


def test_no_join_key_when_values_do_not_match(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    con.execute("CREATE TABLE users AS SELECT (1000 + i)::BIGINT AS user_id FROM range(40) r(i)")
    keys = detect_join_keys(con, {"events": profile(con, "events"), "users": profile(con, "users")})
    assert joins(keys) == set()


def test_no_join_key_when_types_differ(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    con.execute("CREATE TABLE users AS SELECT i::VARCHAR AS user_id FROM range(40) r(i)")
    keys = detect_join_keys(con, {"events": profile(con, "events"), "users": profile(con, "users")})
    assert joins(keys) == set()


def test_join_key_by_table_name(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE orders AS SELECT i AS id, i % 10 AS customer_id, i % 4 AS categoryId, "
        "i * 1.5 AS amount FROM range(100) r(i)"
    )
    con.execute(
        "CREATE TABLE customers AS SELECT i AS id, 'c' || i::VARCHAR AS name FROM range(12) r(i)"
    )
    con.execute("CREATE TABLE categories AS SELECT i AS id FROM range(4) r(i)")
    profiles = {t: profile(con, t) for t in ("orders", "customers", "categories")}
    assert joins(detect_join_keys(con, profiles)) == {
        ("orders", "customer_id", "customers", "id"),
        ("orders", "categoryId", "categories", "id"),
    }  # a bare shared "id" is each table's own key: customers.id -> orders.id is not a join


def test_one_to_one_keeps_both_directions(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE users AS SELECT 'u' || i::VARCHAR AS user_id FROM range(20) r(i)")
    con.execute(
        "CREATE TABLE settings AS SELECT 'u' || i::VARCHAR AS user_id, i % 2 = 0 AS dark "
        "FROM range(20) r(i)"
    )
    profiles = {"users": profile(con, "users"), "settings": profile(con, "settings")}
    keys = detect_join_keys(con, profiles)
    assert [(k.from_table, k.to_table) for k in keys] == [
        ("settings", "users"),
        ("users", "settings"),
    ]


def test_uniqueness_rechecked_exactly_when_distinct_is_estimated(
    con: duckdb.DuckDBPyConnection,
) -> None:
    make_events(con)
    make_users(con, n=40)
    con.execute("INSERT INTO users VALUES (5, 'pro')")
    users = profile(con, "users", exact_distinct_max_rows=1)
    users.columns[0].distinct_count = 41  # an estimate that happens to look unique
    keys = detect_join_keys(con, {"events": profile(con, "events"), "users": users})
    assert joins(keys) == set()


# --------------------------------------------------------------------------------------------
# Stored catalogue
# --------------------------------------------------------------------------------------------


def test_profile_stored_and_read_back(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    record(con, "events")
    returned = profile_database(con)
    stored = read_catalog(con)
    assert returned == stored
    p = stored.profiles["events"]
    assert p.row_count == 400
    assert p.column("platform").label == "PLATFORM"  # label from the load record
    assert p.column("platform").samples == ["ios", "android", "web"]  # 134, 133, 133 rows


def test_reprofile_one_table_keeps_other_and_recomputes_joins(
    con: duckdb.DuckDBPyConnection,
) -> None:
    make_events(con)
    make_users(con)
    record(con, "events")
    record(con, "users")
    first = profile_database(con)
    assert joins(first) == {("events", "user_id", "users", "user_id")}

    con.execute("INSERT INTO users VALUES (0, 'pro')")  # users.user_id no longer unique
    con.execute("INSERT INTO events (user_id) VALUES (999)")  # not re-profiled: stays stale
    second = profile_database(con, ["users"])
    assert second.profiles["events"] == first.profiles["events"]
    assert second.profiles["users"].row_count == 41
    assert second.join_keys == []


def test_recorded_table_without_profile_is_profiled_too(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    make_users(con)
    record(con, "events")
    record(con, "users")
    profile_database(con)
    record(con, "users")  # reloaded: write_load clears the stored profile
    cat = profile_database(con, ["events"])
    assert set(cat.profiles) == {"events", "users"}
    assert joins(cat) == {("events", "user_id", "users", "user_id")}


def test_runs_inside_callers_transaction(con: duckdb.DuckDBPyConnection) -> None:
    make_events(con)
    record(con, "events")
    con.execute("BEGIN TRANSACTION")
    cat = profile_database(con)
    assert "events" in cat.profiles
    assert con.sql("SELECT 42").fetchall() == [(42,)]  # no pending result left behind
    con.execute("ROLLBACK")  # still the caller's transaction: nothing was committed
    assert read_catalog(con).profiles == {}


def test_measures_are_never_join_keys(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE a AS SELECT i % 5 AS sessions FROM range(50) r(i)")
    con.execute("CREATE TABLE b AS SELECT i AS sessions FROM range(5) r(i)")
    keys = detect_join_keys(con, {"a": profile(con, "a"), "b": profile(con, "b")})
    assert joins(keys) == set()

"""Loading as a user does it: ``drilldown load``, then ``drilldown tool`` on the result.

Every value arrives exactly as the file has it, wherever it is in the file (DuckDB picks column
types from its first 20,480 rows), or the load is refused with one line naming the line; a
refused load leaves the database file byte for byte as it was.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import drilldown, file_digest, tool


# Slow end to end (`drilldown load` run as a command, file by file):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

EARLY_ROWS = 30_000  # well past DuckDB's 20,480-row type sample
BIG_ROWS = 150_000  # enough for DuckDB to write blocks to the file before it commits


def late_csv(path: Path, header: str, early: Callable[[int], str], late: str) -> Path:
    """``header``, then ``EARLY_ROWS`` rows of ``early(i)`` under key ``a``, then one row of
    ``late`` under key ``b`` (on line ``EARLY_ROWS + 2``)."""
    rows = "".join(f"a,{early(i)}\n" for i in range(EARLY_ROWS))
    path.write_text(f"{header}\n{rows}b,{late}\n")
    return path


def existing_db(tmp_path: Path) -> Path:
    """A database that already holds a table from an earlier load."""
    users = tmp_path / "users.csv"
    users.write_text("user_id,plan\n1,free\n2,pro\n")
    db = tmp_path / "data.duckdb"
    proc = drilldown("load", str(users), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return db


def assert_refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The load failed with one ``error:`` line holding every needle; returns the line."""
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def value_of_b(db: Path, table: str, column: str) -> object:
    """``sum(column)`` over the rows with key ``b``, through ``drilldown tool``."""
    code, out = tool(
        db,
        "metric_aggregate",
        {
            "table": table,
            "measures": [{"agg": "sum", "column": column}],
            "filters": [{"column": "k", "op": "=", "value": "b"}],
        },
    )
    assert code == 0, out
    return out["rows"][0][f"sum_{column}"]


# ------------------------------------------------------------------------------ late values


@pytest.mark.parametrize(
    ("late", "expected"),
    [
        ("30000.5", 30000.5),  # a fraction in a column of whole numbers (was rounded to 30001)
        ("1.5e0", 1.5),  # an exponent that makes a fraction (was rounded to 2)
        ("-5", -5),  # a negative after only non-negative numbers
        ("99999999999999999999", 99999999999999999999),  # beyond BIGINT
    ],
)
def test_a_late_number_keeps_its_exact_value(tmp_path: Path, late: str, expected: float) -> None:
    src = late_csv(tmp_path / "late.csv", "k,v", str, late)
    db = tmp_path / "t.duckdb"
    proc = drilldown("load", str(src), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert as_number(value_of_b(db, "late", "v")) == expected
    code, out = tool(
        db, "metric_aggregate", {"table": "late", "measures": [{"agg": "sum", "column": "v"}]}
    )
    assert code == 0
    assert as_number(out["rows"][0]["sum_v"]) == sum(range(EARLY_ROWS)) + expected


def as_number(value: object) -> object:
    """A JSON value as the number it stands for: integers beyond 2^53 arrive as exact strings."""
    if isinstance(value, str):
        assert abs(int(value)) > 2**53, f"{value!r}: only integers beyond 2^53 are strings"
        return int(value)
    return value


def test_a_late_time_of_day_is_kept(tmp_path: Path) -> None:
    src = late_csv(
        tmp_path / "d.csv", "k,day", lambda i: f"2024-01-{i % 28 + 1:02d}", "2024-01-05 10:30:00"
    )
    db = tmp_path / "t.duckdb"
    proc = drilldown("load", str(src), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    code, out = tool(
        db, "metric_sample", {"table": "d", "filters": [{"column": "k", "op": "=", "value": "b"}]}
    )
    assert code == 0, out
    assert str(out["rows"][0]["day"]).replace("T", " ").startswith("2024-01-05 10:30:00")


@pytest.mark.parametrize(
    ("header", "early", "late", "needles"),
    [
        (
            "k,ts",
            lambda i: f"2024-01-01 10:00:{i % 60:02d}",
            "2024-01-01 10:00:00+05:00",
            ("line 30002", "column ts", "TIMESTAMP", "time-zone offset"),
        ),
        ("k,v", lambda i: f"{i}.5", "1e400", ("line 30002", "column v", "DOUBLE", "range")),
    ],
)
def test_a_late_value_no_type_holds_is_refused_with_its_line(
    tmp_path: Path,
    header: str,
    early: Callable[[int], str],
    late: str,
    needles: tuple[str, ...],
) -> None:
    db = existing_db(tmp_path)
    before = file_digest(db)
    src = late_csv(tmp_path / "late.csv", header, early, late)
    msg = assert_refused(drilldown("load", str(src), "--db", str(db)), "late.csv", *needles)
    assert len(msg) <= 500
    assert file_digest(db) == before
    assert not Path(f"{db}.wal").exists()


def test_the_refused_line_counts_line_breaks_inside_quoted_values(tmp_path: Path) -> None:
    src = tmp_path / "notes.csv"
    rows = "".join(f"a,plain,2024-01-01 10:00:{i % 60:02d}\n" for i in range(EARLY_ROWS))
    src.write_text(f'k,note,ts\na,"two\nlines",2024-01-01 09:00:00\n{rows}b,x,2024-01-01 10:00Z\n')
    db = existing_db(tmp_path)
    before = file_digest(db)
    proc = drilldown("load", str(src), "--db", str(db))
    assert_refused(proc, "notes.csv line 30004:", "column ts")  # header 1, quoted record 2-3
    assert file_digest(db) == before


# ------------------------------------------------------------------------------ failed loads


def damaged_parquet(path: Path) -> Path:
    """A Parquet file whose footer is intact (it passes the checks made before loading) and
    whose compressed pages are not, so DuckDB fails while reading it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 100_000
    pq.write_table(
        pa.table({"x": range(n), "s": [f"s{i}" for i in range(n)]}), path, compression="zstd"
    )
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for i in range(200, len(data) - footer - 200, 500):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


def test_a_failed_load_leaves_the_database_file_as_it_was(tmp_path: Path) -> None:
    db = existing_db(tmp_path)
    before = file_digest(db)
    big = tmp_path / "big.csv"
    big.write_text("k,v\n" + "".join(f"k{i % 97},{i}\n" for i in range(BIG_ROWS)))
    broken = damaged_parquet(tmp_path / "broken.parquet")
    assert_refused(drilldown("load", str(big), str(broken), "--db", str(db)), "broken.parquet")
    assert file_digest(db) == before

    late = tmp_path / "late.csv"
    rows = "".join(f"a,2024-01-01 10:00:{i % 60:02d}\n" for i in range(BIG_ROWS))
    late.write_text(f"k,ts\n{rows}b,2024-01-01 10:00:00+05:00\n")
    assert_refused(drilldown("load", str(late), "--db", str(db)), f"line {BIG_ROWS + 2}")
    assert file_digest(db) == before

    assert sorted(p.name for p in tmp_path.iterdir() if "duckdb" in p.name) == ["data.duckdb"]
    proc = drilldown("load", str(big), "--db", str(db))  # a load that works keeps the others
    assert proc.returncode == 0, proc.stderr
    code, out = tool(db, "metric_describe", {})
    assert code == 0, out
    assert {t["name"]: t["row_count"] for t in out["tables"]} == {"big": BIG_ROWS, "users": 2}

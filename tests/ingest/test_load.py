"""The loader's public API: inputs, table names, statuses, atomicity, catalogue records,
formats (CSV, TSV, gzip, Parquet) and type handling."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

import tasks.ingest.load as load_mod
from sql_tools import LoadError
from sql_tools.catalog import read_catalog
from tasks.ingest._duck import duck_message
from tasks.ingest._names import column_names, normalize_column, quote_ident, table_name
from tasks.ingest._sniff import detect_delimiter
from tasks.ingest.load import LoadOptions, LoadReport, load_files

SALES = b"day,region,revenue\n2024-01-01,EU,10.5\n2024-01-02,US,7\n"
USERS = b"user_id,name\n1,Ann\n2,Bob\n3,Cy\n"


def write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` (creating parents) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def digest(path: Path) -> str | None:
    """SHA-256 of a file, None when it does not exist."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def ro(db: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection (closed by the caller or at garbage collection)."""
    return duckdb.connect(str(db), read_only=True)


def user_tables(db: Path) -> list[str]:
    """Tables in the ``main`` schema."""
    con = ro(db)
    try:
        rows = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "ORDER BY 1"
        ).fetchall()
        return [r[0] for r in rows]
    finally:
        con.close()


# ------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("stem", "expected"),
    [
        ("sales", "sales"),
        ("Sales Report (2024)", "sales_report_2024"),
        ("2024-sales", "t_2024_sales"),
        ("été", "ete"),
        ("###", "table"),
        ("a--b__c", "a_b__c"),
    ],
)
def test_table_name(stem: str, expected: str) -> None:
    assert table_name(stem) == expected


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("revenue", "revenue"),
        ("Revenue_2", "Revenue_2"),
        ("col with space", "col_with_space"),
        ("1st", "c_1st"),
        ("", "column_4"),
        ("€", "column_4"),
        ("Ünïcödé Name", "unicode_name"),
        ("x" * 80, "x" * 63),
    ],
)
def test_normalize_column(label: str, expected: str) -> None:
    assert normalize_column(label, 4) == expected


def test_column_dedupe_skips_taken_names() -> None:
    names, warnings = column_names(["a", "a", "a_2", "A"])
    assert names == ["a", "a_3", "a_2", "A_4"]
    assert len(warnings) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a,b\n1,2\n", ","),
        ("a;b\n1,5;2\n", ";"),
        ("a\tb\n1\t2\n", "\t"),
        ("a|b\n1|2\n", "|"),
        ("a,b;c\n1,2;3\n", ","),  # tie: 2 columns either way, comma first
        ("a,b;c;d\n1,2;3;4\n", ";"),  # most columns wins
        ("name\nSmith, John\nDoe\n", ";"),  # one column: a delimiter that splits nothing
        ('v\n"1,234"\n', ","),
        ("a,b,c\n1,2,3\n4,5\n6,7,8\n", ","),  # ragged: the full pass names line 3
    ],
)
def test_detect_delimiter(text: str, expected: str) -> None:
    assert detect_delimiter(text, True, "f.csv") == expected


def test_detect_delimiter_gives_up_clearly() -> None:
    text = "a,b\nx;y\nz\tw\nq|r\nk\n"  # every candidate splits some lines, none most
    with pytest.raises(LoadError, match="could not detect the delimiter"):
        detect_delimiter(text, True, "f.csv")


def test_quote_ident() -> None:
    assert quote_ident('a"b') == '"a""b"'


def test_duck_message_is_short_and_drops_the_csv_line() -> None:
    err = duckdb.InvalidInputException(
        "Invalid Input Error: CSV Error on Line: 1\nOriginal Line: " + "x" * 10_000 + "\nmore"
    )
    msg = duck_message(err)
    assert len(msg) <= 200 and "xxxx" not in msg and msg.startswith("Invalid Input Error")


# ------------------------------------------------------------------------------ basic load


def test_load_csv_records_catalogue(tmp_path: Path) -> None:
    src = write(tmp_path / "Sales.csv", SALES)
    db = tmp_path / "db.duckdb"
    before = datetime.now(UTC)
    report = load_files([src], db)
    assert isinstance(report, LoadReport)
    assert report.db == str(db) and report.skipped == []
    (t,) = report.tables
    assert (t.table, t.status, t.rows, t.source) == ("sales", "loaded", 2, str(src))
    assert [(c.name, c.label) for c in t.columns] == [
        ("day", "day"),
        ("region", "region"),
        ("revenue", "revenue"),
    ]
    con = ro(db)
    rec = read_catalog(con).loads["sales"]
    assert rec.sha256 == hashlib.sha256(SALES).hexdigest()
    assert (rec.format, rec.rows, rec.bytes, rec.encoding, rec.delimiter) == (
        "csv",
        2,
        len(SALES),
        "utf-8",
        ",",
    )
    assert rec.file_name == "Sales.csv" and rec.source == str(src)
    assert rec.loaded_at >= before and rec.loaded_at.tzinfo is not None
    assert con.execute("SELECT * FROM sales ORDER BY day").fetchall()[0][1:] == ("EU", 10.5)


def test_dates_and_timestamps(tmp_path: Path) -> None:
    data = b"d,ts,v\n2024-01-01,2024-01-01 10:00:00,1\n2024-02-29,2024-03-01 23:59:59,2\n"
    load_files([write(tmp_path / "t.csv", data)], tmp_path / "db.duckdb")
    con = ro(tmp_path / "db.duckdb")
    types = {r[0]: r[1] for r in con.execute("DESCRIBE t").fetchall()}
    assert types == {"d": "DATE", "ts": "TIMESTAMP", "v": "BIGINT"}


def test_tsv_and_tsv_gz(tmp_path: Path) -> None:
    a = write(tmp_path / "a.tsv", b"x\ty\n1,5\tb c\n")
    b = write(tmp_path / "b.tsv.gz", gzip.compress(b"x\ty\n1\t2\n"))
    report = load_files([a, b], tmp_path / "db.duckdb")
    con = ro(tmp_path / "db.duckdb")
    assert con.execute("SELECT y FROM a").fetchone() == ("b c",)
    assert con.execute("SELECT x, y FROM b").fetchone() == (1, 2)
    assert [r.table for r in report.tables] == ["a", "b"]


def test_csv_gz_load(tmp_path: Path) -> None:
    data = gzip.compress(SALES)
    report = load_files([write(tmp_path / "s.csv.gz", data)], tmp_path / "db.duckdb")
    con = ro(tmp_path / "db.duckdb")
    rec = read_catalog(con).loads["s"]
    assert (rec.format, rec.bytes, rec.sha256) == (
        "csv.gz",
        len(SALES),
        hashlib.sha256(data).hexdigest(),
    )
    assert report.tables[0].rows == 2
    assert con.execute("SELECT sum(revenue) FROM s").fetchone() == (17.5,)


def test_crlf_and_old_mac_line_ends(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", b"x,y\r\n1,2\r\n3,4\r\n")
    b = write(tmp_path / "b.csv", b"x,y\r1,2\r3,4\r")
    load_files([a, b], tmp_path / "db.duckdb")
    con = ro(tmp_path / "db.duckdb")
    for t in ("a", "b"):
        assert con.execute(f"SELECT sum(x), sum(y) FROM {t}").fetchone() == (4, 6)


def test_comment_like_lines_are_data(tmp_path: Path) -> None:
    load_files([write(tmp_path / "c.csv", b"a,b\n#x,1\n2,3\n")], tmp_path / "db.duckdb")
    con = ro(tmp_path / "db.duckdb")
    assert con.execute("SELECT a FROM c ORDER BY b").fetchall() == [("#x",), ("2",)]


def test_glob_characters_in_file_name(tmp_path: Path) -> None:
    write(tmp_path / "s1.csv", SALES)
    odd = write(tmp_path / "s[1].csv", b"a,b\n1,2\n")
    star = write(tmp_path / "x*.csv", b"a,b\n3,4\n5,6\n")
    report = load_files([odd, star], tmp_path / "db.duckdb")
    assert [(t.table, t.rows) for t in report.tables] == [("s_1", 1), ("x", 2)]


def test_parquet_load(tmp_path: Path) -> None:
    src = tmp_path / "p.parquet"
    table = pa.table({"Region Name": ["EU", "US", "EU"], "amount": [1.5, 2.0, 3.0]})
    pq.write_table(table, src)
    report = load_files([src], tmp_path / "db.duckdb")
    (t,) = report.tables
    assert [(c.name, c.label) for c in t.columns] == [
        ("region_name", "Region Name"),
        ("amount", "amount"),
    ]
    assert t.rows == 3
    con = ro(tmp_path / "db.duckdb")
    assert con.execute("SELECT sum(amount) FROM p WHERE region_name = 'EU'").fetchone() == (4.5,)
    rec = read_catalog(con).loads["p"]
    assert rec.format == "parquet" and rec.delimiter is None
    assert rec.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()


def test_parquet_limits_from_metadata(tmp_path: Path) -> None:
    src = tmp_path / "p.parquet"
    pq.write_table(pa.table({"a": list(range(100)), "b": list(range(100))}), src)
    db = tmp_path / "db.duckdb"
    with pytest.raises(LoadError, match=r"p.parquet: 100 rows, more than .*max_rows=10"):
        load_files([src], db, LoadOptions(max_rows=10))
    with pytest.raises(LoadError, match="max_bytes=100") as err:
        load_files([src], db, LoadOptions(max_bytes=100))
    assert "uncompressed" in err.value.message
    with pytest.raises(LoadError, match="max_columns=1") as err:
        load_files([src], db, LoadOptions(max_columns=1))
    assert err.value.code == "unsupported_file"
    assert not db.exists()


# ------------------------------------------------------------------------------ inputs


def test_directory_load_skips_other_files(tmp_path: Path) -> None:
    root = tmp_path / "in"
    write(root / "b.csv", SALES)
    write(root / "sub" / "a.csv", USERS)
    write(root / "README.txt", b"hello")
    write(root / "notes.xlsx", b"PK\x03\x04")
    report = load_files([root], tmp_path / "db.duckdb")
    assert [t.table for t in report.tables] == ["b", "a"]  # sorted paths: b.csv < sub/a.csv
    assert report.skipped == [str(root / "README.txt"), str(root / "notes.xlsx")]
    assert user_tables(tmp_path / "db.duckdb") == ["a", "b"]


def test_explicit_unsupported_file(tmp_path: Path) -> None:
    src = write(tmp_path / "README.txt", b"a,b\n1,2\n")
    with pytest.raises(LoadError) as err:
        load_files([src], tmp_path / "db.duckdb")
    assert err.value.code == "unsupported_file"
    assert err.value.message.startswith("README.txt: unsupported file type")
    assert not (tmp_path / "db.duckdb").exists()


def test_nonexistent_path(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file or directory"):
        load_files([tmp_path / "missing.csv"], tmp_path / "db.duckdb")


def test_same_table_twice_in_one_call(tmp_path: Path) -> None:
    a = write(tmp_path / "x" / "Sales.csv", SALES)
    b = write(tmp_path / "y" / "sales.csv.gz", gzip.compress(SALES))
    with pytest.raises(LoadError) as err:
        load_files([a, b], tmp_path / "db.duckdb")
    msg = err.value.message
    assert "sales.csv.gz" in msg and str(a) in msg and "table sales" in msg
    assert not (tmp_path / "db.duckdb").exists()


def test_options_are_frozen_and_checked(tmp_path: Path) -> None:
    opts = LoadOptions()
    with pytest.raises(ValidationError):
        opts.max_rows = 5  # type: ignore[misc]
    src = write(tmp_path / "s.csv", SALES)
    with pytest.raises(LoadError, match="unknown encoding") as err:
        load_files([src], tmp_path / "db.duckdb", LoadOptions(encoding="klingon"))
    assert err.value.code == "invalid_arguments"
    with pytest.raises(LoadError, match="delimiter"):
        load_files([src], tmp_path / "db.duckdb", LoadOptions(delimiter='"'))


# ------------------------------------------------------------------------------ statuses


def test_idempotent_reload_is_unchanged(tmp_path: Path) -> None:
    src = write(tmp_path / "sales.csv", SALES)
    db = tmp_path / "db.duckdb"
    load_files([src], db)
    con = ro(db)
    rec1 = read_catalog(con).loads["sales"]
    con.close()
    report = load_files([src], db)
    (t,) = report.tables
    assert (t.status, t.rows) == ("unchanged", 2)
    con = ro(db)
    assert read_catalog(con).loads["sales"] == rec1
    assert con.execute("SELECT count(*) FROM sales").fetchone() == (2,)
    con.close()


def test_changed_file_is_replaced(tmp_path: Path) -> None:
    src = write(tmp_path / "sales.csv", SALES)
    db = tmp_path / "db.duckdb"
    load_files([src], db)
    src.write_bytes(SALES + b"2024-01-03,EU,1\n")
    report = load_files([src], db)
    assert (report.tables[0].status, report.tables[0].rows) == ("replaced", 3)
    con = ro(db)
    assert con.execute("SELECT count(*) FROM sales").fetchone() == (3,)
    assert read_catalog(con).loads["sales"].rows == 3


def test_collision_with_existing_table_from_another_file(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    load_files([write(tmp_path / "a" / "sales.csv", SALES)], db)
    before = digest(db)
    other = write(tmp_path / "b" / "Sales.tsv", b"x\ty\n1\t2\n")
    with pytest.raises(LoadError) as err:
        load_files([other], db)
    msg = err.value.message
    assert msg.startswith("Sales.tsv: table sales already holds sales.csv")
    assert str(tmp_path / "a" / "sales.csv") in msg
    assert digest(db) == before


def test_table_not_created_by_loader(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE sales AS SELECT 1 AS x")
    con.close()
    before = digest(db)
    with pytest.raises(LoadError, match="already exists in the database"):
        load_files([write(tmp_path / "sales.csv", SALES)], db)
    assert digest(db) == before


# ------------------------------------------------------------------------------ atomicity


def test_failure_in_second_file_leaves_no_table_new_db(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", SALES)
    b = write(tmp_path / "b.csv", b"x,y\n1,2\n3\n")
    db = tmp_path / "db.duckdb"
    with pytest.raises(LoadError, match="b.csv line 3"):
        load_files([a, b], db)
    assert not db.exists() and not Path(str(db) + ".wal").exists()


def test_database_in_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="folder .* does not exist") as err:
        load_files([write(tmp_path / "s.csv", SALES)], tmp_path / "nope" / "db.duckdb")
    assert err.value.code == "database_error" and not (tmp_path / "nope").exists()


def test_failure_in_second_file_leaves_existing_db_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    load_files([write(tmp_path / "u.csv", USERS)], db)
    before = digest(db)
    a = write(tmp_path / "a.csv", SALES)
    b = write(tmp_path / "b.parquet", b"not parquet at all")
    with pytest.raises(LoadError, match="b.parquet: not a Parquet file"):
        load_files([a, b], db)
    assert digest(db) == before
    assert user_tables(db) == ["u"]


def test_failure_during_transaction_rolls_back(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "db.duckdb"
    load_files([write(tmp_path / "u.csv", USERS)], db)
    before = digest(db)
    seen: list[list[str]] = []

    def boom(con: duckdb.DuckDBPyConnection, tables: list[str]) -> None:
        seen.append(list(tables))
        assert con.execute("SELECT count(*) FROM main.a").fetchone() == (2,)
        raise duckdb.InvalidInputException("profile exploded")

    monkeypatch.setattr(load_mod, "profile_database", boom)
    with pytest.raises(LoadError, match="nothing was changed") as err:
        load_files([write(tmp_path / "a.csv", SALES), tmp_path / "u.csv"], db)
    assert err.value.code == "database_error"
    assert seen == [["a"]]  # unchanged u is not profiled again
    assert digest(db) == before and user_tables(db) == ["u"]


def test_profile_called_with_loaded_and_replaced_tables(tmp_path: Path, monkeypatch) -> None:
    calls: list[list[str]] = []
    real = load_mod.profile_database

    def spy(con: duckdb.DuckDBPyConnection, tables: list[str]) -> object:
        calls.append(sorted(tables))
        return real(con, tables=tables)

    monkeypatch.setattr(load_mod, "profile_database", spy)
    db = tmp_path / "db.duckdb"
    u = write(tmp_path / "u.csv", USERS)
    s = write(tmp_path / "s.csv", SALES)
    load_files([u, s], db)
    s.write_bytes(SALES + b"2024-01-05,EU,2\n")
    load_files([u, s], db)
    load_files([u, s], db)  # all unchanged: nothing written, no profile run
    assert calls == [["s", "u"], ["s"]]


def test_reconcile_mismatch_is_an_error(tmp_path: Path, monkeypatch) -> None:
    real = load_mod.scan_csv

    def off_by_one(*args: object, **kwargs: object) -> object:
        scan = real(*args, **kwargs)
        scan.rows += 1
        return scan

    monkeypatch.setattr(load_mod, "scan_csv", off_by_one)
    db = tmp_path / "db.duckdb"
    with pytest.raises(LoadError) as err:
        load_files([write(tmp_path / "s.csv", SALES)], db)
    assert err.value.message == (
        "s.csv: DuckDB parsed 2 rows but the file has 3 data lines; nothing was loaded"
    )
    assert not db.exists()


def test_database_in_use_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    load_files([write(tmp_path / "u.csv", USERS)], db)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
            "sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(LoadError) as err:
            load_files([write(tmp_path / "s.csv", SALES)], db)
        assert err.value.message.startswith("database db.duckdb is in use by another process")
    finally:
        holder.communicate("", timeout=30)
    assert user_tables(db) == ["u"]


def test_temp_files_are_removed(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    data = "a,b\né,1\n".encode("utf-16")
    load_files(
        [write(tmp_path / "x.csv", data), write(tmp_path / "y.csv.gz", gzip.compress(SALES))],
        tmp_path / "db.duckdb",
    )
    assert list((tmp_path / "tmp").iterdir()) == []
    with pytest.raises(LoadError):
        load_files([write(tmp_path / "z.csv", b"a,b\n1\n")], tmp_path / "db.duckdb")
    assert list((tmp_path / "tmp").iterdir()) == []
    shutil.rmtree(tmp_path / "tmp")


def test_delimiter_names_are_accepted(tmp_path: Path) -> None:
    src = write(tmp_path / "t.csv", b"a\tb\n1\t2\n")
    report = load_files([src], tmp_path / "db.duckdb", LoadOptions(delimiter="\\t"))
    assert [c.name for c in report.tables[0].columns] == ["a", "b"]


def test_file_changed_during_load(tmp_path: Path, monkeypatch) -> None:
    src = write(tmp_path / "s.csv", SALES)
    real = load_mod.stage_csv

    def touch_then_stage(*args: object, **kwargs: object) -> list[str]:
        src.write_bytes(SALES + b"2024-01-09,EU,1\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(load_mod, "stage_csv", touch_then_stage)
    with pytest.raises(LoadError, match="s.csv: the file changed while it was being loaded"):
        load_files([src], tmp_path / "db.duckdb")
    assert not (tmp_path / "db.duckdb").exists()


# ------------------------------------------------------------------------------ big files, re-reads


def type_change_csv(amount_from: int = 30_000) -> bytes:
    """40,000 rows whose ``code`` and ``amount`` change type after DuckDB's 20,480-row sample."""
    lines = ["id,code,amount"]
    for i in range(40_000):
        code = "ABC" if i == amount_from else str(i)
        amount = f"{i}.25" if i >= amount_from else str(i)
        lines.append(f"{i},{code},{amount}")
    return ("\n".join(lines) + "\n").encode()


def test_large_file_hash_rows_and_row_order(tmp_path: Path) -> None:
    # over 8 MiB: hashed on a second thread while the records are checked
    data = b"id,region,amount\n" + b"".join(
        f"{i},r{i % 7},{i}.5\n".encode() for i in range(650_000)
    )
    assert len(data) > 8 * 1024 * 1024
    src = write(tmp_path / "big.csv", data)
    db = tmp_path / "db.duckdb"
    report = load_files([src], db)
    assert report.tables[0].rows == 650_000
    con = ro(db)
    rec = read_catalog(con).loads["big"]
    assert (rec.sha256, rec.bytes) == (hashlib.sha256(data).hexdigest(), len(data))
    # rows in file order
    assert con.execute("SELECT count(*) FROM big WHERE id <> rowid").fetchone() == (0,)
    con.close()
    assert load_files([src], db).tables[0].status == "unchanged"


def test_normal_load_reads_straight_into_the_database(tmp_path: Path, monkeypatch) -> None:
    def no_staging(*args: object, **kwargs: object) -> None:
        raise AssertionError("staged load used")

    monkeypatch.setattr(load_mod, "_load_staged", no_staging)
    db = tmp_path / "db.duckdb"
    s = write(tmp_path / "s.csv", SALES)
    load_files([s, write(tmp_path / "u.csv", USERS)], db)
    s.write_bytes(SALES + b"2024-01-05,EU,2\n")
    assert load_files([s], db).tables[0].status == "replaced"
    assert user_tables(db) == ["s", "u"]


def test_type_change_rereads_every_file_through_staging(tmp_path: Path, monkeypatch) -> None:
    staged: list[list[str]] = []
    real = load_mod._load_staged

    def spy(con: duckdb.DuckDBPyConnection, items: list, *args: object) -> None:
        staged.append([item.table for item in items])
        real(con, items, *args)

    reads: list[tuple[str, bool | None]] = []  # (target, full_sample to start with)
    real_read = load_mod.stage_csv

    def read_spy(
        con: duckdb.DuckDBPyConnection, scan: object, path: Path, target: str, *args, **kw
    ) -> list[str]:
        reads.append((target, getattr(kw.get("plan"), "full_sample", None)))
        return real_read(con, scan, path, target, *args, **kw)

    monkeypatch.setattr(load_mod, "_load_staged", spy)
    monkeypatch.setattr(load_mod, "stage_csv", read_spy)
    db = tmp_path / "db.duckdb"
    load_files([write(tmp_path / "u.csv", USERS)], db)
    reads.clear()
    a = write(tmp_path / "a.csv", SALES)
    big = write(tmp_path / "big.csv", type_change_csv())
    report = load_files([a, big, tmp_path / "u.csv"], db)  # a is read before big fails
    assert staged == [["a", "big"]]
    # the staged read of big starts where the failed one left off: types from every row
    assert reads == [
        ('main."a"', None),
        ('main."big"', None),
        ('"_drilldown_stage"."a"', None),
        ('"_drilldown_stage"."big"', True),
    ]
    assert [(t.table, t.status) for t in report.tables] == [
        ("a", "loaded"),
        ("big", "loaded"),
        ("u", "unchanged"),
    ]
    warned = {t.table: any("20,480" in w for w in t.warnings) for t in report.tables}
    assert warned == {"a": False, "big": True, "u": False}
    con = ro(db)
    assert con.execute("SELECT count(*) FROM a").fetchone() == (2,)
    assert con.execute("SELECT typeof(code), typeof(amount) FROM big LIMIT 1").fetchone() == (
        "VARCHAR",
        "DOUBLE",
    )
    assert con.execute("SELECT amount FROM big WHERE id = 39999").fetchone() == (39999.25,)
    assert sorted(read_catalog(con).loads) == ["a", "big", "u"]
    con.close()
    big.write_bytes(type_change_csv(25_000))
    report = load_files([a, big], db)
    assert [(t.table, t.status) for t in report.tables] == [("a", "unchanged"), ("big", "replaced")]
    assert staged == [["a", "big"], ["big"]]
    assert ro(db).execute("SELECT amount FROM big WHERE id = 25000").fetchone() == (25000.25,)


def test_failure_after_a_reread_leaves_existing_db_unchanged(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "db.duckdb"
    load_files([write(tmp_path / "u.csv", USERS)], db)
    before = digest(db)

    def boom(con: duckdb.DuckDBPyConnection, tables: list[str]) -> None:
        raise duckdb.InvalidInputException("profile exploded")

    monkeypatch.setattr(load_mod, "profile_database", boom)
    big = write(tmp_path / "big.csv", type_change_csv())
    with pytest.raises(LoadError, match="nothing was changed"):
        load_files([big], db)
    assert digest(db) == before and user_tables(db) == ["u"]

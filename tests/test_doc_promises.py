"""What the docs promise about loading holds: every row of the "What happens to bad input" table
of docs/data.md, and every loading option that docs/data.md lists for `drilldown load` and
docs/investigate.md for `drilldown investigate`, is built here as a file and run through the
real command line, and the promised result (loaded, warning, error text) is checked.

The table and the options are read from the docs: a row or an option added there without a case
here fails, and so does a case whose row or option is gone.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from tests.support.cli import ROOT, drilldown, tool
from tests.support.shapes import (
    comma_thousands,
    dot_thousands_decimal_comma,
    eu_date,
    investigate,
    sales,
    us_date,
)

# Slow end to end (every documented input and option run through the command line):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

DATA_MD = ROOT / "docs" / "data.md"
INVESTIGATE_MD = ROOT / "docs" / "investigate.md"


def table_rows(text: str, after: str) -> list[str]:
    """The first cells of the markdown table that follows the line ``after``."""
    lines = text[text.index(after) :].splitlines()[1:]
    rows: list[str] = []
    for line in lines:
        if not line.strip() and not rows:
            continue
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        first = cells[0].strip()
        if first not in ("input", "---") and not set(first) <= set("-: "):
            rows.append(first)
    return rows


def documented_options(text: str, command: str) -> set[str]:
    """The ``--options`` of ``command``'s synopsis (the ``text`` block lines from ``drilldown
    COMMAND`` up to the next command or the block's end)."""
    block = text[text.index(f"drilldown {command} ") :]
    block = block[: block.index("```")]
    block = re.split(r"\ndrilldown (?!" + command + r" )", block)[0]
    found: set[str] = set()
    for token in re.findall(r"--[a-z][a-z-]*(?:/--[a-z][a-z-]*)?", block):
        found.update(token.split("/"))
    return found


# ------------------------------------------------------------------------------------ helpers


class Load:
    """One ``drilldown load`` of files written in a folder of its own."""

    def __init__(self, tmp_path: Path, name: str = "t") -> None:
        self.dir = tmp_path / name
        self.dir.mkdir()
        self.db = self.dir / "t.duckdb"

    def write(self, name: str, data: bytes | str) -> Path:
        path = self.dir / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def run(self, path: Path, *options: str) -> subprocess.CompletedProcess[str]:
        return drilldown("load", str(path), "--db", str(self.db), *options)

    def ok(self, path: Path, *options: str) -> str:
        proc = self.run(path, *options)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def error(self, path: Path, *options: str) -> str:
        """The one ``error:`` line of a refused load (exit 2, no database written)."""
        proc = self.run(path, *options)
        assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
        assert not self.db.exists(), "a refused load wrote the database"
        return lines[0]

    def query(self, sql: str) -> list[tuple]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            return con.execute(sql).fetchall()

    def types(self, table: str) -> dict[str, str]:
        return {r[0]: r[1] for r in self.query(f'DESCRIBE "{table}"')}


def warned(out: str, *needles: str) -> str:
    """The one warning line holding every needle."""
    lines = [ln for ln in out.splitlines() if "warning:" in ln and all(n in ln for n in needles)]
    assert len(lines) == 1, (needles, out)
    return lines[0]


# -------------------------------------------------------------------------------- the table


def ragged_rows(tmp_path: Path) -> None:
    for seed in range(3):
        rng = random.Random(seed)
        n, fields = rng.randint(5, 40), rng.choice([1, 2, 4, 7])
        lines = ["a,b,c"] + [f"{i},{i},{i}" for i in range(n)]
        at = rng.randint(1, n)
        lines[at] = ",".join(["x"] * fields)
        t = Load(tmp_path, f"t{seed}")
        line = t.error(t.write("r.csv", "\n".join(lines) + "\n"))
        assert f"line {at + 1}" in line and "3" in line and str(fields) in line, line


def blank_line(tmp_path: Path) -> None:
    for seed in range(2):
        n = random.Random(seed).randint(3, 20)
        lines = ["a,b"] + [f"{i},{i}" for i in range(n)]
        lines.insert(n // 2 + 1, "")
        t = Load(tmp_path, f"t{seed}")
        assert f"line {n // 2 + 2}" in t.error(t.write("b.csv", "\n".join(lines) + "\n"))


def no_data_rows(tmp_path: Path) -> None:
    for i, data in enumerate(["", "\n\n\n", "a,b\n"]):
        t = Load(tmp_path, f"t{i}")
        assert "no data rows" in t.error(t.write("e.csv", data))


def delimiters(tmp_path: Path) -> None:
    rng = random.Random(4)
    for i, d in enumerate([",", ";", "\t", "|"]):
        n = rng.randint(2, 30)
        t = Load(tmp_path, f"t{i}")
        rows = "".join(f"{k}{d}x{d}{k}.5\n" for k in range(n))
        src = t.write("d.csv", f"a{d}b{d}c\n{rows}")
        t.ok(src)
        assert t.query("SELECT count(*), sum(c) FROM d") == [(n, sum(k + 0.5 for k in range(n)))]
    t = Load(tmp_path, "forced")  # a ',' inside every field: detection sees 2 fields, ';' is forced
    src = t.write("d.csv", "a;b\n" + "".join(f"{k},x;y\n" for k in range(5)))
    t.ok(src, "--delimiter", ";")
    assert t.query("SELECT a, b FROM d ORDER BY a") == [(f"{k},x", "y") for k in range(5)]


def utf8_bom(tmp_path: Path) -> None:
    t = Load(tmp_path)
    out = t.ok(t.write("b.csv", b"\xef\xbb\xbfname,v\nJos\xc3\xa9,1\n"))
    assert "name" in t.types("b")
    warned(out, "byte-order mark removed")


def utf16(tmp_path: Path) -> None:
    for i, (codec, bom) in enumerate([("utf-16-le", b"\xff\xfe"), ("utf-16-le", b"")]):
        t = Load(tmp_path, f"t{i}")
        out = t.ok(t.write("u.csv", bom + "name,v\nJosé,1\nÅsa,2\n".encode(codec)))
        assert t.query("SELECT name FROM u ORDER BY v") == [("José",), ("Åsa",)]
        warned(out, "UTF-16")


def legacy_encoding(tmp_path: Path) -> None:
    t = Load(tmp_path)
    src = t.write("l.csv", "city,v\nZürich,1\nGenève,2\n".encode("cp1252"))
    line = t.error(src)
    assert "line 2" in line and "--encoding cp1252" in line, line
    t.ok(src, "--encoding", "cp1252")
    assert t.query("SELECT city FROM l ORDER BY v") == [("Zürich",), ("Genève",)]


def binary_files(tmp_path: Path) -> None:
    kinds = {
        "zip": b"PK\x03\x04" + bytes(60),
        "gzip": gzip.compress(b"a,b\n1,2\n"),
        "parquet": b"PAR1" + bytes(30) + b"PAR1",
        "pdf": b"%PDF-1.7\n" + bytes(30),
    }
    for i, (kind, data) in enumerate(kinds.items()):
        t = Load(tmp_path, f"t{i}")
        line = t.error(t.write("x.csv", data))
        assert "looks like" in line.lower() and kind in line.lower(), line
    t = Load(tmp_path, "nul")
    assert "NUL" in t.error(t.write("x.csv", b"a,b\n1,\x002\n"))


def headers_made_unique(tmp_path: Path) -> None:
    t = Load(tmp_path)
    out = t.ok(t.write("h.csv", "revenue,revenue,,Revenue\n1,2,3,4\n"), "--json")
    (table,) = json.loads(out)["tables"]
    names = [(c["name"], c["label"]) for c in table["columns"]]
    assert names == [("revenue", "revenue"), ("revenue_2", "revenue"), ("column_3", ""),
                     ("Revenue_3", "Revenue")]  # fmt: skip
    assert len(table["warnings"]) == 3, table["warnings"]


def headers_normalised(tmp_path: Path) -> None:
    t = Load(tmp_path)
    src = t.write("h.csv", 'Order Date,été,"a""; DROP TABLE t; --"\n2024-03-01,1,2\n')
    out = t.ok(src, "--json")
    (table,) = json.loads(out)["tables"]
    names = [(c["name"], c["label"]) for c in table["columns"]]
    assert names == [("order_date", "Order Date"), ("ete", "été"),
                     ("a_drop_table_t", 'a"; DROP TABLE t; --')]  # fmt: skip


def late_value(tmp_path: Path) -> None:
    rows = "".join(f"{i}\n" for i in range(30_000))
    for late, typ in [("30000.5", "DOUBLE"), ("99999999999999999999", "HUGEINT")]:
        t = Load(tmp_path, typ)
        out = t.ok(t.write("l.csv", f"v\n{rows}{late}\n"))
        assert t.types("l")["v"] == typ
        assert t.query("SELECT v FROM l WHERE v > 29999 ORDER BY v DESC LIMIT 1") == [
            (float(late) if typ == "DOUBLE" else int(late),)
        ]
        warned(out, "20,480", "column v")


def inexact_value(tmp_path: Path) -> None:
    rows = "".join(f"2024-03-01 10:{i % 60:02d}:00\n" for i in range(30_000))
    t = Load(tmp_path)
    line = t.error(t.write("z.csv", f"at\n{rows}2024-03-02 10:00:00+05:00\n"))
    assert "line 30002" in line and "column at" in line and "+05:00" in line, line


def decimal_comma(tmp_path: Path) -> None:
    s = sales(tmp_path / "dc.csv", 1, amount=dot_thousands_decimal_comma, delimiter=";")
    t = Load(tmp_path)
    out = t.ok(s.path)
    assert t.types("dc")["Revenue"] == "DOUBLE"
    assert t.query('SELECT sum("Revenue") FROM dc')[0][0] == pytest.approx(
        sum(v for _, _, v in s.rows)
    )
    warned(out, "column Revenue", "decimal comma")


def thousands(tmp_path: Path) -> None:
    s = sales(tmp_path / "tc.csv", 2, amount=comma_thousands)
    t = Load(tmp_path)
    out = t.ok(s.path)
    assert t.types("tc")["Revenue"] == "DOUBLE"
    warned(out, "column Revenue", "thousands separator")
    t = Load(tmp_path, "ints")
    out = t.ok(t.write("n.csv", 'k,n\n1,"1,234,567"\n2,"12,345"\n'))
    assert t.query("SELECT n FROM n ORDER BY k") == [(1234567,), (12345,)]
    warned(out, "column n", "BIGINT")


def separators_both_ways(tmp_path: Path) -> None:
    t = Load(tmp_path)
    src = t.write("a.csv", 'k,v\n1,"1,234"\n2,"5,678"\n')
    out = t.ok(src)
    assert t.types("a")["v"] == "VARCHAR"
    warned(out, "column v", "--no-decimal-comma", "--decimal-comma")


def comma_both_ways(tmp_path: Path) -> None:
    t = Load(tmp_path)
    out = t.ok(t.write("m.csv", 'k,v\n1,"1,5"\n2,"2,510.00"\n'))
    assert t.types("m")["v"] == "VARCHAR"
    warned(out, "column v", "kept as text")


def day_month_dates(tmp_path: Path) -> None:
    for i, (style, fmt) in enumerate([(us_date, "%m/%d/%Y"), (eu_date, "%d/%m/%Y")]):
        s = sales(tmp_path / f"d{i}.csv", i, day=style)
        t = Load(tmp_path, f"t{i}")
        out = t.ok(s.path)
        assert t.types(f"d{i}")["order_date"] == "DATE"
        warned(out, "column order_date", fmt)
    t = Load(tmp_path, "ts")
    out = t.ok(t.write("v.csv", "at,n\n3/25/2024 2:30 PM,1\n3/5/2024 9:05 AM,2\n"))
    assert t.types("v")["at"] == "TIMESTAMP"
    warned(out, "column at")


def ambiguous_dates(tmp_path: Path) -> None:
    t = Load(tmp_path)
    src = t.write("a.csv", "day,n\n03/05/2024,1\n04/06/2024,2\n12/11/2024,3\n")
    out = t.ok(src)
    assert t.types("a")["day"] == "VARCHAR"
    warned(out, "column day", "--date-format %m/%d/%Y", "--date-format %d/%m/%Y")
    t.ok(src, "--date-format", "%d/%m/%Y")
    assert t.query("SELECT day FROM a ORDER BY n")[0][0].isoformat() == "2024-05-03"


def date_format(tmp_path: Path) -> None:
    t = Load(tmp_path)
    src = t.write("f.csv", "day,n\nMar 25 2024,1\nApr 02 2024,2\n")
    out = t.ok(src, "--date-format", "%b %d %Y")
    assert t.types("f")["day"] == "DATE"
    warned(out, "column day", "%b %d %Y")
    t = Load(tmp_path, "mismatch")
    src = t.write("f.csv", "day,n\n03/25/2024,1\n03/26/2024,2\n25/03/2024,3\n")
    assert "25/03/2024" in t.error(src, "--date-format", "%m/%d/%Y")
    assert "--date-format" in t.error(src, "--date-format", "%Q")


def na_tokens(tmp_path: Path) -> None:
    t = Load(tmp_path)
    out = t.ok(t.write("n.csv", "v,region\n1,EU\nNA,NA\n3,US\n-,N/A\n"))
    assert t.types("n") == {"v": "BIGINT", "region": "VARCHAR"}
    assert t.query("SELECT v, region FROM n ORDER BY rowid")[1] == (None, "NA")
    warned(out, "column v", "2 missing-value marker(s)")


def mixed_columns(tmp_path: Path) -> None:
    t = Load(tmp_path)
    t.ok(t.write("m.csv", "k,v,d\na,1,2024-03-01\nb,three,03/25/2024\nc,3,2024-03-05\n"))
    assert t.types("m") == {"k": "VARCHAR", "v": "VARCHAR", "d": "VARCHAR"}
    code, out = tool(t.db, "describe", {})
    assert code == 0
    notes = {c["name"]: c.get("mixed_note") for c in out["tables"][0]["columns"]}
    assert notes["v"] and notes["d"], notes


def limits(tmp_path: Path) -> None:
    n = random.Random(5).randint(50, 200)
    t = Load(tmp_path)
    src = t.write("big.csv.gz", gzip.compress(("v\n" + "1234567890\n" * 5000).encode()))
    assert "max" in t.error(src, "--max-bytes", "10000").lower()
    t = Load(tmp_path, "rows")
    src = t.write("r.csv", "v\n" + "".join(f"{i}\n" for i in range(n)))
    assert "max" in t.error(src, "--max-rows", str(n - 1)).lower()


def field_and_column_caps(tmp_path: Path) -> None:
    t = Load(tmp_path)
    t.error(t.write("f.csv", "a,b\n1," + "x" * (1024**2 + 10) + "\n"))
    t = Load(tmp_path, "cols")
    header = ",".join(f"c{i}" for i in range(501))
    assert "500" in t.error(t.write("c.csv", header + "\n" + ",".join("1" * 501) + "\n"))


def verbatim_text(tmp_path: Path) -> None:
    t = Load(tmp_path)
    t.ok(t.write("q.csv", 'k,note\n1,"two\nlines"\n2,"=HYPERLINK(""http://x"")"\n'))
    got = t.query("SELECT note FROM q ORDER BY k")
    assert got == [("two\nlines",), ('=HYPERLINK("http://x")',)]


ROWS: dict[str, Callable[[Path], None]] = {
    "row with too many / too few fields, anywhere in the file": ragged_rows,
    "blank line inside the data": blank_line,
    "empty file, blank lines only, header only": no_data_rows,
    "delimiter `,` `;` tab or `\\|`": delimiters,
    "UTF-8 with BOM": utf8_bom,
    "UTF-16 (with BOM or recognisable without)": utf16,
    "other non-UTF-8 bytes (Latin-1, Windows-1252, ...)": legacy_encoding,
    "binary file (NUL bytes, ZIP/XLSX, gzip, Parquet or PDF named `.csv`)": binary_files,
    "duplicate, empty or case-colliding headers": headers_made_unique,
    "headers that are not plain identifiers (`Order Date`, `été`, `a\"; DROP TABLE t; --`)":
        headers_normalised,
    "a value after the first 20,480 rows that the type DuckDB guessed from them cannot hold "
    "exactly (`30000.5` among whole numbers, a time of day among dates, a number beyond BIGINT)":
        late_value,
    "a value that no type inferred over the whole file holds exactly (a time-zone offset among "
    "timestamps without one, `1e400`)": inexact_value,
    "decimal comma (`1,5`, `1.234,5`, `1 234,5`)": decimal_comma,
    "thousands separators (`2,510.00`, `\"1,234,567\"`)": thousands,
    "separators that read both ways (`\"1,234\"` only)": separators_both_ways,
    "`,` as the decimal point in some values and as a thousands separator in others (`1,5` and "
    "`2,510.00`)": comma_both_ways,
    "month/day or day/month dates (`03/25/2024`, `25.03.2024`, `3/25/2024 2:30 PM`)":
        day_month_dates,
    "day/month dates that no value tells apart (every day 12 or less: `03/05/2024`)":
        ambiguous_dates,
    "`--date-format F` (strftime-style)": date_format,
    "`NA`, `N/A`, `null`, `-` in a numeric column": na_tokens,
    "words in a numeric column (`three`), mixed date formats": mixed_columns,
    "`.gz` that decompresses past `--max-bytes`, more rows than `--max-rows`": limits,
    "a field longer than 1 MiB, more than 500 columns": field_and_column_caps,
    "quoted newlines, formula-looking cells (`=HYPERLINK(...)`)": verbatim_text,
}  # fmt: skip

DOC_ROWS = table_rows(DATA_MD.read_text(), "What happens to bad input:")


def test_every_row_of_the_table_has_a_case() -> None:
    assert len(DOC_ROWS) >= 20, DOC_ROWS
    assert not [r for r in DOC_ROWS if r not in ROWS], "rows without a case"
    assert not [r for r in ROWS if r not in DOC_ROWS], "cases of rows no longer in data.md"


@pytest.mark.parametrize("row", DOC_ROWS)
def test_the_row_holds(row: str, tmp_path: Path) -> None:
    case = ROWS.get(row)
    assert case is not None, f"no case for the row {row!r} of docs/data.md"
    case(tmp_path)


# ------------------------------------------------------------------------------ the options


def _reading(tmp_path: Path, command: str, option: str) -> None:
    """A file that needs ``option`` (with its value) to be read as the docs say, run through
    ``command`` with it: read right (``load``), or investigated to its planted cause."""
    scale = 1.0
    if option == "--encoding":
        s = sales(tmp_path / "shop.csv", 3, encoding="cp1252", delimiter=";",
                  amount=dot_thousands_decimal_comma)  # fmt: skip
        args = ["--encoding", "cp1252"]
    elif option == "--delimiter":
        s = sales(tmp_path / "shop.csv", 4, delimiter="|")
        args = ["--delimiter", "|"]
    elif option == "--decimal-comma":  # 2,345 is 2.345, not 2345, only with the option
        s = sales(tmp_path / "shop.csv", 5, delimiter=";",
                  amount=lambda x: f"{x / 1000:.3f}".replace(".", ","))  # fmt: skip
        args, scale = ["--decimal-comma"], 1 / 1000
    elif option == "--no-decimal-comma":  # 2,345 is 2345, not 2.345, only with the option
        s = sales(tmp_path / "shop.csv", 6, amount=lambda x: f"{round(x):,}")
        args = ["--no-decimal-comma"]
    elif option == "--date-format":
        s = sales(tmp_path / "shop.csv", 7, day=lambda d: d.strftime("%d %m %Y"))
        args = ["--date-format", "%d %m %Y"]
    else:
        raise AssertionError(option)
    if command == "load":
        t = Load(tmp_path)
        out = t.ok(s.path, *args)
        types = t.types("shop")
        assert types["order_date"] == "DATE" and types["Revenue"] in ("DOUBLE", "BIGINT"), types
        total = t.query('SELECT sum("Revenue") FROM shop')[0][0]
        assert total == pytest.approx(scale * sum(v for _, _, v in s.rows), rel=1e-3), out
        return
    proc = investigate(s.path, tmp_path / "out", *args)
    assert proc.returncode == 0, proc.stderr
    assert f"root cause: Region={s.dropped}" in proc.stdout, proc.stdout


def _limit(tmp_path: Path, command: str, option: str) -> None:
    s = sales(tmp_path / "shop.csv", 8)
    value = str(len(s.rows) - 1) if option == "--max-rows" else "1000"
    if command == "load":
        line = Load(tmp_path).error(s.path, option, value)
    else:
        proc = investigate(s.path, tmp_path / "out", option, value)
        assert proc.returncode == 2, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "max" in line, line


def _db(tmp_path: Path, command: str, option: str) -> None:
    s = sales(tmp_path / "shop.csv", 9)
    if command == "load":
        Load(tmp_path).ok(s.path)
        return
    db = tmp_path / "elsewhere.duckdb"
    proc = investigate(s.path, tmp_path / "out", "--db", str(db))
    assert proc.returncode == 0 and db.exists(), proc.stderr


def _json(tmp_path: Path, command: str, option: str) -> None:
    s = sales(tmp_path / "shop.csv", 10, amount=comma_thousands)
    t = Load(tmp_path)
    report = json.loads(t.ok(s.path, "--json"))
    (table,) = report["tables"]
    assert table["table"] == "shop" and table["rows"] == len(s.rows)
    assert any("column Revenue" in w for w in table["warnings"])


OPTIONS: dict[str, Callable[[Path, str, str], None]] = {
    "--db": _db,
    "--encoding": _reading,
    "--delimiter": _reading,
    "--decimal-comma": _reading,
    "--no-decimal-comma": _reading,
    "--date-format": _reading,
    "--max-rows": _limit,
    "--max-bytes": _limit,
    "--json": _json,
}
"""The loading options, each run through the command line."""

LOAD_OPTIONS = documented_options(DATA_MD.read_text(), "load")
INVESTIGATE_OPTIONS = documented_options(INVESTIGATE_MD.read_text(), "investigate")


def test_every_load_option_has_a_case_and_investigate_documents_them() -> None:
    assert not LOAD_OPTIONS - set(OPTIONS), "options of load without a case"
    assert not set(OPTIONS) - LOAD_OPTIONS, "cases of options no longer documented for load"
    missing = LOAD_OPTIONS - INVESTIGATE_OPTIONS - {"--json"}
    assert not missing, f"load options investigate.md does not list: {missing}"


def test_every_documented_investigate_option_exists() -> None:
    proc = drilldown("investigate", "--help")
    assert proc.returncode == 0, proc.stderr
    shown = set(re.findall(r"--[a-z][a-z-]*", proc.stdout))
    assert not INVESTIGATE_OPTIONS - shown, INVESTIGATE_OPTIONS - shown


@pytest.mark.parametrize("option", sorted(LOAD_OPTIONS))
def test_the_load_option_works_on_load(option: str, tmp_path: Path) -> None:
    OPTIONS[option](tmp_path, "load", option)


@pytest.mark.parametrize("option", sorted(LOAD_OPTIONS & INVESTIGATE_OPTIONS))
def test_the_load_option_works_on_investigate(option: str, tmp_path: Path) -> None:
    OPTIONS[option](tmp_path, "investigate", option)

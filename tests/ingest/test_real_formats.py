"""Files as real exports write them: month/day or day/month dates, thousands separators,
decimal commas, Windows-1252. Dates load as dates and numbers as numbers when the whole column
tells how they are written, each with a warning naming the column; a column that could be read
two ways stays text with a warning naming the option that decides; and every option of
``drilldown load`` works on ``drilldown investigate`` too.
"""

from __future__ import annotations

import json
import random
import re
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest
import typer

from drilldown.cli import app
from tests.support.cli import drilldown
from tests.support.shapes import (
    comma_thousands,
    dot_thousands_decimal_comma,
    eu_date,
    investigate,
    one_error,
    sales,
    space_thousands_decimal_comma,
    us_date,
)


# Slow end to end (files of real-world formats investigated through the command line):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow


def load(tmp_path: Path, src: Path, *options: str) -> tuple[duckdb.DuckDBPyConnection, str]:
    """``drilldown load`` into a fresh database: the connection and what the command printed."""
    db = tmp_path / f"{src.stem}.duckdb"
    proc = drilldown("load", str(src), "--db", str(db), *options)
    assert proc.returncode == 0, proc.stderr
    return duckdb.connect(str(db), read_only=True), proc.stdout


def column_type(con: duckdb.DuckDBPyConnection, table: str, column: str) -> str:
    return dict((r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall())[column]


def warning_about(output: str, column: str) -> str:
    lines = [ln for ln in output.splitlines() if f"warning: column {column}:" in ln]
    assert len(lines) == 1, output
    return lines[0]


# ------------------------------------------------------------------------------------ dates


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(
    ("style", "order"),
    [
        (us_date, "month/day"),
        (eu_date, "day/month"),
        (lambda d: eu_date(d, "."), "day/month"),
        (lambda d: us_date(d).replace("/", "-"), "month/day"),
    ],
)
def test_day_month_dates_load_as_dates(tmp_path: Path, seed: int, style, order: str) -> None:
    rng = random.Random(seed)
    start = date(2024, rng.randint(1, 11), rng.randint(1, 5))  # two weeks pass a 13th
    s = sales(tmp_path / "orders.csv", seed, day=style, start=start, days=rng.randint(14, 30))
    con, out = load(tmp_path, s.path)
    assert column_type(con, "orders", "order_date") == "DATE"
    got = con.execute("SELECT order_date, count(*) FROM orders GROUP BY 1 ORDER BY 1").fetchall()
    days = sorted({d for d, _, _ in s.rows})
    assert [g[0] for g in got] == days
    assert order in warning_about(out, "order_date")


def test_day_month_dates_with_a_time_of_day_load_as_timestamps(tmp_path: Path) -> None:
    rng = random.Random(7)
    stamps = [
        (date(2024, 3, 10) + timedelta(days=i), rng.randint(0, 23), rng.randint(0, 59))
        for i in range(rng.randint(5, 12))
    ]
    lines = ["seen_at,n"] + [
        f"{d.month}/{d.day}/{d.year} {(h % 12) or 12}:{m:02d} {'PM' if h >= 12 else 'AM'},{i}"
        for i, (d, h, m) in enumerate(stamps)
    ]
    src = tmp_path / "visits.csv"
    src.write_text("\n".join(lines) + "\n")
    con, out = load(tmp_path, src)
    assert column_type(con, "visits", "seen_at") == "TIMESTAMP"
    got = [r[0] for r in con.execute("SELECT seen_at FROM visits ORDER BY n").fetchall()]
    assert [(g.date(), g.hour, g.minute) for g in got] == stamps
    assert "month/day" in warning_about(out, "seen_at")


@pytest.mark.parametrize("fmt", ["%m/%d/%Y", "%d/%m/%Y"])
def test_ambiguous_dates_stay_text_until_the_format_is_given(tmp_path: Path, fmt: str) -> None:
    rng = random.Random(fmt)
    days = sorted({date(2024, rng.randint(1, 12), rng.randint(1, 12)) for _ in range(20)})
    src = tmp_path / "days.csv"
    src.write_text("day,n\n" + "".join(f"{d.strftime(fmt)},{i}\n" for i, d in enumerate(days)))
    con, out = load(tmp_path, src)
    assert column_type(con, "days", "day") == "VARCHAR"
    warning = warning_about(out, "day")
    assert "--date-format %m/%d/%Y" in warning and "--date-format %d/%m/%Y" in warning
    con.close()
    con, out = load(tmp_path, src, "--date-format", fmt)
    assert [r[0] for r in con.execute("SELECT day FROM days ORDER BY n").fetchall()] == days
    assert fmt in warning_about(out, "day")


def test_a_date_format_that_does_not_read_the_column_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "days.csv"
    days = [date(2024, 3, 1) + timedelta(days=i) for i in range(20)]
    src.write_text("day,n\n" + "".join(f"{eu_date(d)},{i}\n" for i, d in enumerate(days)))
    db = tmp_path / "t.duckdb"
    line = one_error(drilldown("load", str(src), "--db", str(db), "--date-format", "%m/%d/%Y"))
    assert "column day" in line and "--date-format %m/%d/%Y" in line and "13/03/2024" in line
    assert not db.exists()
    line = one_error(drilldown("load", str(src), "--db", str(db), "--date-format", "%Q"))
    assert "--date-format" in line


# ------------------------------------------------------------------------------ separators


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize(
    ("amount", "option"),
    [
        (comma_thousands, None),
        (dot_thousands_decimal_comma, None),
        (space_thousands_decimal_comma, "--decimal-comma"),
    ],
)
def test_thousands_separators_load_as_numbers(
    tmp_path: Path, seed: int, amount, option: str | None
) -> None:
    delimiter = ";" if amount is not comma_thousands else random.Random(seed).choice(",;")
    s = sales(tmp_path / "orders.csv", seed, amount=amount, delimiter=delimiter)
    con, out = load(tmp_path, s.path, *([option] if option else []))
    assert column_type(con, "orders", "Revenue") == "DOUBLE"
    total = con.execute('SELECT sum("Revenue") FROM orders').fetchone()[0]
    assert total == pytest.approx(sum(v for _, _, v in s.rows))
    assert "warning: column Revenue:" in out


def test_whole_numbers_with_thousands_separators_load_as_integers(tmp_path: Path) -> None:
    rng = random.Random(5)
    values = [rng.randint(1_000, 10**12) for _ in range(rng.randint(5, 30))]
    src = tmp_path / "counts.csv"
    src.write_text("k,views\n" + "".join(f'{i},"{v:,}"\n' for i, v in enumerate(values)))
    con, out = load(tmp_path, src)
    assert column_type(con, "counts", "views") == "BIGINT"
    assert [r[0] for r in con.execute("SELECT views FROM counts ORDER BY k").fetchall()] == values
    assert "thousands separator" in warning_about(out, "views")


def test_ambiguous_separators_stay_text_until_an_option_decides(tmp_path: Path) -> None:
    rng = random.Random(6)
    values = [rng.randint(1, 999) * 1000 + rng.randint(0, 999) for _ in range(12)]
    src = tmp_path / "amounts.csv"
    src.write_text("k,amount\n" + "".join(f'{i},"{v:,}"\n' for i, v in enumerate(values)))
    con, out = load(tmp_path, src)
    assert column_type(con, "amounts", "amount") == "VARCHAR"
    warning = warning_about(out, "amount")
    assert "ambiguous" in warning and "--no-decimal-comma" in warning
    assert "--decimal-comma" in warning
    con.close()
    con, _ = load(tmp_path, src, "--no-decimal-comma")
    assert [r[0] for r in con.execute("SELECT amount FROM amounts ORDER BY k").fetchall()] == values
    con.close()
    con, _ = load(tmp_path, src, "--decimal-comma")
    got = [r[0] for r in con.execute("SELECT amount FROM amounts ORDER BY k").fetchall()]
    assert got == pytest.approx([v / 1000 for v in values])


# -------------------------------------------------------------------- through investigate


def test_investigate_reads_us_dates_and_thousands(tmp_path: Path) -> None:
    s = sales(tmp_path / "shop.csv", 11, day=us_date)
    proc = investigate(s.path, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert f"root cause: Region={s.dropped}" in proc.stdout
    assert "column Revenue:" in proc.stderr and "column order_date:" in proc.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    expected = s.total(date(2024, 3, 18), date(2024, 3, 24))
    assert result["baseline"]["value"] == pytest.approx(expected)


def test_investigate_takes_the_encoding_its_error_suggests(tmp_path: Path) -> None:
    s = sales(tmp_path / "shop.csv", 12, day=eu_date, amount=dot_thousands_decimal_comma,
              delimiter=";", encoding="cp1252")  # fmt: skip
    line = one_error(investigate(s.path, tmp_path / "out"))
    suggested = re.search(r"--encoding (\S+)", line)
    assert suggested, line
    proc = investigate(s.path, tmp_path / "out", "--encoding", suggested.group(1))
    assert proc.returncode == 0, proc.stderr
    assert f"root cause: Region={s.dropped}" in proc.stdout


def test_investigate_takes_the_date_format(tmp_path: Path) -> None:
    # the first 12 days of a month: no day above 12 tells month/day from day/month
    start = date(2024, 3, 1)
    s = sales(tmp_path / "shop.csv", 13, day=us_date, start=start, days=12)
    out = tmp_path / "out"
    args = ("--baseline", "2024-03-01:2024-03-06", "--comparison", "2024-03-07:2024-03-12")
    proc = drilldown(
        "investigate", str(s.path), "--metric", "sum(revenue)", "--offline", "--no-remember",
        "--out", str(out), *args,
    )  # fmt: skip
    assert proc.returncode == 2 and "--date-format %m/%d/%Y" in proc.stderr, proc.stderr
    proc = drilldown(
        "investigate", str(s.path), "--metric", "sum(revenue)", "--offline", "--no-remember",
        "--out", str(out), *args, "--date-format", "%m/%d/%Y",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["baseline"]["value"] == pytest.approx(s.total(start, date(2024, 3, 6)))


def test_load_options_on_a_database_are_refused(tmp_path: Path) -> None:
    s = sales(tmp_path / "shop.csv", 14)
    con, _ = load(tmp_path, s.path)
    con.close()
    proc = investigate(tmp_path / "shop.duckdb", tmp_path / "out", "--encoding", "cp1252")
    line = one_error(proc)
    assert "--encoding" in line and "shop.duckdb" in line


# ------------------------------------------------------------------------------ the options


def _options(command: str) -> set[str]:
    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}


def test_investigate_accepts_every_load_option() -> None:
    missing = _options("load") - _options("investigate") - {"--db", "--json"}
    assert not missing, missing


def test_every_option_a_load_message_suggests_exists_on_both_commands() -> None:
    """The loader's messages reach users of both commands: an option they name must exist."""
    folder = Path(__file__).resolve().parents[2] / "tasks" / "ingest"
    named = set()
    for src in folder.rglob("*.py"):
        named |= set(re.findall(r"(--[a-z][a-z-]+)", src.read_text()))
    assert "--encoding" in named and "--date-format" in named
    for command in ("load", "investigate"):
        assert not named - _options(command), (command, named - _options(command))

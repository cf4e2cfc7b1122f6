"""Values the arithmetic cannot hold, and tables that are one row repeated.

A metric value near the largest float (or one whose sum over the periods' rows, or its powers up to the
fourth, overflow) is refused before anything is computed, with one line naming the column and how many
rows hold such values; tiny (denormal) values are answered as usual. Five million identical rows
(or a few distinct rows repeated many times) raise the duplicate-load warning.
"""

from __future__ import annotations

import sys
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from sql_tools import ToolContext, ToolInputError
from tasks.engine.answerable import check_answerable
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question
from tasks.engine.quality import check_quality
from tests.support.cli import drilldown

BIG = sys.float_info.max
PERIODS = {"baseline": "2024-01-01:2024-01-07", "comparison": "2024-01-08:2024-01-14"}


def sales_csv(extra: list[float]) -> str:
    """Two weeks of revenue by region (EU falls 60%), plus one comparison row per ``extra``."""
    lines = ["day,region,revenue"]
    for d in range(14):
        day = date(2024, 1, 1) + timedelta(days=d)
        for i, region in enumerate(("EU", "US", "APAC")):
            for k in range(3):
                value = (100 + (d * 7 + i * 13 + k * 5) % 11) * (0.4 if d >= 7 and i == 0 else 1)
                lines.append(f"{day},{region},{value:.2f}")
    lines += [f"2024-01-{10 + i % 4:02d},EU,{v!r}" for i, v in enumerate(extra)]
    return "\n".join(lines) + "\n"


def question(ctx: ToolContext):
    return build_question(
        ctx.schema, metric="sum(revenue)", table="sales", time_column="day", **PERIODS,
        dimensions="region", named_metrics=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "held"),
    [
        ([BIG], 1),
        ([-BIG], 1),
        ([1e155], 1),
        ([1e200, -1e200], 2),
        ([1e100], 1),  # its square squared overflows
        ([1e306] * 40, 40),  # each too large, and their sum overflows
        ([BIG, 1.0, 5e-324], 1),
    ],
)
def test_values_too_large_to_compute_with_are_refused_in_one_line(make_db, extra, held):
    with ToolContext(make_db(sales=sales_csv(extra))) as ctx:
        with pytest.raises(ToolInputError) as err:
            check_answerable(ctx, question(ctx))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"cannot answer: column 'revenue' holds {held} value")
    assert "too large to compute with" in message


def test_values_the_arithmetic_holds_are_answered(make_db):
    """Denormals, and large values that stay well within range, change nothing."""
    with ToolContext(make_db(sales=sales_csv([5e-324, -5e-324, 1e-310, 1e60]))) as ctx:
        q = question(ctx)
        check_answerable(ctx, q)
        e = analyze(ctx, q).explanation
    assert e.baseline.value > 0


@pytest.mark.slow
def test_the_cli_refuses_an_overflowing_value_with_one_line(tmp_path: Path):
    csv = tmp_path / "sales.csv"
    csv.write_text(sales_csv([BIG]), encoding="utf-8")
    proc = drilldown(
        "investigate", str(csv), "--metric", "sum(revenue)", "--time-column", "day",
        "--baseline", PERIODS["baseline"], "--comparison", PERIODS["comparison"], "--offline",
        "--no-remember", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "column 'revenue' holds 1 value too large" in line


# --- one row, or a few, repeated -----------------------------------------------------------------


def repeated_db(path: Path, rows: int, regions: int) -> Path:
    """``rows`` rows over two weeks: per day, ``regions`` distinct rows, each repeated."""
    con = duckdb.connect(str(path))
    con.execute(
        f"CREATE TABLE sales AS SELECT DATE '2024-01-01' + CAST(i % 14 AS INTEGER) AS day, "
        f"'R' || CAST((i // 14) % {regions} AS VARCHAR) AS region, 1.5 AS revenue "
        f"FROM range({rows}) t(i)"
    )
    con.close()
    return path


@pytest.mark.parametrize(
    ("rows", "regions"),
    [
        pytest.param(5_000_000, 1, marks=pytest.mark.slow),
        pytest.param(2_000_000, 5, marks=pytest.mark.slow),
        (300_000, 3),
        (30_000, 1),
    ],
)
def test_a_table_of_rows_repeated_many_times_is_a_duplicate_load(tmp_path, rows, regions):
    db = repeated_db(tmp_path / "same.duckdb", rows, regions)
    with ToolContext(db) as ctx:
        issues = check_quality(ctx, question(ctx), ["region"])
    (issue,) = [i for i in issues if i.kind == "duplicate_rows"]
    d = issue.details
    assert d["exact"] is True
    assert len(d["days"]) == 14
    assert d["baseline_duplicates"] == d["baseline_rows"] - 7 * regions
    assert "Rows loaded more than once in 'sales' on 14 days" in issue.message

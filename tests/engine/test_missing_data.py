"""Missing data decides the answer: days (or months, weeks ...) without rows in the whole table,
judged in the data's own grain.

Each test builds its table in ``tmp_path`` with a seeded random world (sizes, labels, which days
are missing vary with the seed) and checks the answer a user reads: the issue, the even shift
put down to the data, the headline, and the offline planner's verdicts.
"""

from __future__ import annotations

import csv
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from sql_tools import ToolContext
from tasks.agent.run import investigate_one, plan
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question
from tasks.engine.quality.grain import grain_of
from tasks.ingest.load import load_files
from tasks.report.markdown import render

START = date(2024, 3, 4)  # four weeks: the baseline is the third, the comparison the fourth
BASELINE = "2024-03-18:2024-03-24"
COMPARISON = "2024-03-25:2024-03-31"


def load(tmp_path: Path, name: str, header: list[str], rows: list[list[Any]]) -> ToolContext:
    path = tmp_path / f"{name}.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    db = tmp_path / f"{name}.duckdb"
    load_files([path], db)
    return ToolContext(db)


def daily_sales(
    rng: random.Random,
    drop: set[date],
    days: int = 28,
    lift: float = 1.0,
    since: date = date(2024, 3, 25),
) -> list[list[Any]]:
    """Orders per day and segment (about the same every day), times ``lift`` from ``since``
    on for the first platform; no rows at all on the days in ``drop``."""
    platforms = rng.sample(["ios", "android", "web", "tv", "watch"], 3)
    countries = rng.sample(["US", "DE", "IN", "BR", "FR", "JP"], 3)
    rows = []
    for i in range(days):
        day = START + timedelta(days=i)
        if day in drop:
            continue
        for p in platforms:
            for c in countries:
                for _ in range(rng.randint(3, 5)):
                    amount = rng.gammavariate(4.0, 5.0)
                    if p == platforms[0] and day >= since:
                        amount *= lift
                    rows.append([day.isoformat(), f"u{rng.randint(1, 400)}", p, c, round(amount, 2)])
    return rows


HEADER = ["date", "user_id", "platform", "country", "revenue"]


def ask(ctx: ToolContext, metric: str, baseline: str = BASELINE, comparison: str = COMPARISON,
        table: str = "sales", grain: str | None = None):  # fmt: skip
    q = build_question(
        ctx.schema,
        metric=metric,
        table=table,
        time_column="date",
        baseline=baseline,
        comparison=comparison,
        grain=grain,
        named_metrics=False,
    )
    return q, analyze(ctx, q)


def verdicts(ctx: ToolContext, q: Any, a: Any) -> list[tuple[str, str, str]]:
    """The offline planner's hypotheses: (source, status, confidence) each."""
    planned, _, _ = plan(ctx, q, a)
    out = []
    for h, steps in planned:
        o = investigate_one(ctx, q, a, h, steps).outcome
        out.append((h.source, o.status, o.confidence))
    return out


@pytest.mark.parametrize("seed", [3, 7, 11])
@pytest.mark.parametrize("metric", ["sum(revenue)", "count(*)", "count(distinct user_id)"])
def test_a_partly_loaded_baseline_week_is_the_finding(tmp_path, seed, metric):
    """1-3 days of the baseline week were never loaded, nothing else changed: the data problem
    is the answer, confirmed with the rows per day, and no business cause comes before it."""
    rng = random.Random(seed)
    week = [START + timedelta(days=14 + i) for i in range(7)]
    drop = set(rng.sample(week, rng.randint(1, 3)))
    with load(tmp_path, "sales", HEADER, daily_sales(rng, drop)) as ctx:
        q, a = ask(ctx, metric)
        e = a.explanation
        assert e.change.relative > 0.1  # the baseline looks smaller
        (issue,) = [i for i in e.data_quality if i.kind == "missing_days"]
        assert issue.details["days"] == sorted(d.isoformat() for d in drop)
        assert "the period's total is understated" in issue.message
        shift = e.global_shift
        assert shift is not None and shift.effect == "data_quality"
        assert shift.data_quality.days_set_aside["baseline"] == issue.details["days"]
        assert shift.data_quality.move_on_clean_days < 0.5 * shift.data_quality.move
        top = render(e).split("\n## ", 1)[0]
        assert "This rise is a data problem first" in top
        assert all(d.isoformat() in top for d in drop)
        assert e.data_grain == "day"
        got = verdicts(ctx, q, a)
        assert ("data_quality", "confirmed", "high") in got, got
        business = [v for v in got if v[0] != "data_quality" and v[1] == "confirmed"]
        assert all(conf != "high" for _, _, conf in business), got


def test_a_missing_quiet_day_leaves_a_real_cause_named(tmp_path):
    """One day missing in a long period does not wipe out a planted cause: one platform's
    revenue fell by two thirds, and one baseline day of 14 has no rows."""
    rng = random.Random(5)
    drop = {START + timedelta(days=rng.randint(0, 13))}
    rows = daily_sales(rng, drop, lift=1 / 3, since=date(2024, 3, 18))
    lifted = next(r[2] for r in rows if r[0] == "2024-03-18")  # the first platform dropped
    with load(tmp_path, "sales", HEADER, rows) as ctx:
        q, a = ask(ctx, "sum(revenue)", "2024-03-04:2024-03-17", "2024-03-18:2024-03-31")
        e = a.explanation
        assert any(i.kind == "missing_days" for i in e.data_quality)
        assert [c.segment for c in e.root_causes] == [{"platform": lifted}]
        assert e.root_causes[0].effect == "rate"
        assert e.global_shift is None or e.global_shift.effect != "data_quality"
        assert "data problem first" not in render(e)
        (note,) = [n for n in e.notes if "do not account for most of the change" in n]
        assert next(iter(drop)).isoformat() in note
        got = verdicts(ctx, q, a)
        assert ("data_quality", "ruled_out", "medium") in got, got
        assert ("engine", "confirmed", "high") in got, got


def test_a_daily_mean_with_a_missing_day_says_what_it_affects(tmp_path):
    rng = random.Random(2)
    drop = {date(2024, 3, 20)}
    with load(tmp_path, "sales", HEADER, daily_sales(rng, drop)) as ctx:
        _, a = ask(ctx, "sum(revenue)", grain="day")
        (issue,) = [i for i in a.explanation.data_quality if i.kind == "missing_days"]
        assert "mean per day counts them as zero" in issue.message
        _, a = ask(ctx, "avg(revenue)")
        (issue,) = [i for i in a.explanation.data_quality if i.kind == "missing_days"]
        assert "comes from its other days only" in issue.message
        assert "total" not in issue.message


# --- coarser grains --------------------------------------------------------------------------


def _add_months(d: date, n: int) -> date:
    k = d.year * 12 + d.month - 1 + n
    return date(k // 12, k % 12 + 1, 1)


GRAINS = {
    # unit -> (the date of unit i, units per period)
    "week": (lambda i: date(2023, 1, 2) + timedelta(weeks=i), 8),
    "month": (lambda i: _add_months(date(2008, 1, 1), i), 6),
    "quarter": (lambda i: _add_months(date(2001, 1, 1), 3 * i), 4),
    "year": (lambda i: date(1990 + i, 1, 1), 3),
}


def coarse_prices(rng: random.Random, unit: str, skip: int | None = None) -> tuple[list, Any, int]:
    """Prices of a few symbols, one row per symbol and unit over two periods of ``n`` units
    (and a unit before and after them); the unit ``skip`` (an index) has no rows."""
    at, n = GRAINS[unit]
    symbols = rng.sample(["AAPL", "MSFT", "IBM", "AMZN", "GOOG", "ORCL"], rng.randint(3, 5))
    rows = []
    for s in symbols:
        p = rng.uniform(50, 150)
        for i in range(2 * n + 2):
            p *= 1 + rng.gauss(0.01, 0.04)
            if i != skip:
                rows.append([s, at(i).isoformat(), round(p, 2)])
    return rows, at, n


def periods(at: Any, n: int) -> tuple[str, str]:
    """Two periods of ``n`` units each, after the first unit, as day ranges of equal length."""
    b0, c0 = at(1), at(1 + n)
    length = (c0 - b0).days
    b = f"{b0}:{b0 + timedelta(days=length - 1)}"
    c = f"{c0}:{c0 + timedelta(days=length - 1)}"
    return b, c


@pytest.mark.parametrize("unit", list(GRAINS))
@pytest.mark.parametrize("metric", ["avg(price)", "sum(price)"])
def test_coarse_data_without_gaps_misses_nothing(tmp_path, unit, metric):
    rng = random.Random(f"{unit}{metric}")
    rows, at, n = coarse_prices(rng, unit)
    b, c = periods(at, n)
    with load(tmp_path, "prices", ["symbol", "date", "price"], rows) as ctx:
        _, a = ask(ctx, metric, b, c, table="prices")
        e = a.explanation
        kinds = {i.kind for i in e.data_quality}
        assert not kinds & {"missing_days", "partial_period"}, e.data_quality
        assert e.data_grain == unit
        assert f"{n} {unit} pairs" in e.change.method
        assert e.global_shift is None or e.global_shift.effect != "data_quality"


@pytest.mark.parametrize("unit", ["week", "month", "quarter"])
def test_a_missing_unit_inside_the_range_is_named_in_its_grain(tmp_path, unit):
    rng = random.Random(unit)
    _, n = GRAINS[unit]
    skip = 1 + rng.randint(0, n - 1)  # a unit of the baseline period
    rows, at, n = coarse_prices(rng, unit, skip=skip)
    b, c = periods(at, n)
    with load(tmp_path, "prices", ["symbol", "date", "price"], rows) as ctx:
        _, a = ask(ctx, "avg(price)", b, c, table="prices")
        (issue,) = [i for i in a.explanation.data_quality if i.kind == "missing_days"]
        assert issue.details["days"] == [at(skip).isoformat()]
        assert issue.details["grain"] == unit
        assert f"1 of the {n} {unit}s of the baseline period" in issue.message
        assert "total" not in issue.message  # an average has none
        _, a = ask(ctx, "sum(price)", b, c, table="prices")
        (issue,) = [i for i in a.explanation.data_quality if i.kind == "missing_days"]
        assert "the period's total is understated" in issue.message
        shift = a.explanation.global_shift
        assert shift is not None and shift.effect == "data_quality"
        assert "This rise is a data problem first" in render(a.explanation)


@pytest.mark.parametrize("seed", range(4))
def test_grain_of_dates(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 12)
    start = date(2000, 1, 1) + timedelta(days=rng.randint(0, 5000))
    month = start.replace(day=1)
    weekly = [start + timedelta(weeks=i) for i in range(n)]
    monthly = [_add_months(month, i) for i in range(n)]
    month_ends = [_add_months(month, i + 1) - timedelta(days=1) for i in range(n)]
    quarterly = [_add_months(date(start.year, 1, 1), 3 * i) for i in range(n)]
    yearly = [date(start.year + i, 1, 1) for i in range(n)]
    daily = [start + timedelta(days=i) for i in range(3 * n)]
    gappy = [d for d in daily if d not in set(rng.sample(daily, rng.randint(1, 3)))]
    assert grain_of(weekly).unit == "week"
    assert grain_of(rng.sample(monthly, len(monthly))).unit == "month"
    assert grain_of(month_ends).unit == "month" and grain_of(month_ends).month_end
    assert grain_of(quarterly).unit == "quarter"
    assert grain_of(yearly).unit == "year"
    assert grain_of(daily).unit == "day" and grain_of(gappy).unit == "day"


@pytest.mark.parametrize("unit", ["week", "month", "quarter"])
def test_the_last_unit_covers_its_whole_span(tmp_path, unit):
    """Data dated on each unit's first day covers the unit to its end: a comparison period that
    ends with the data's last unit is fully covered."""
    rng = random.Random(f"last {unit}")
    rows, at, n = coarse_prices(rng, unit)
    last = 2 * n + 1  # the data's last unit
    end = at(last + 1) - timedelta(days=1)
    first_c, first_b = at(last + 1 - n), at(last + 1 - 2 * n)
    b = f"{first_b}:{first_b + (end - first_c)}"
    with load(tmp_path, "prices", ["symbol", "date", "price"], rows) as ctx:
        _, a = ask(ctx, "avg(price)", b, f"{first_c}:{end}", table="prices")
        kinds = {i.kind for i in a.explanation.data_quality}
        assert not kinds & {"missing_days", "partial_period"}, a.explanation.data_quality


@pytest.mark.parametrize("metric", ["avg(price)", "sum(price)"])
def test_one_year_against_the_next_in_yearly_data(tmp_path, metric):
    """Two periods of one year hold one date each: the table's other dates tell the grain."""
    rng = random.Random(metric)
    years = rng.randint(4, 8)
    rows = [
        [s, date(2001 + i, 1, 1).isoformat(), round(rng.uniform(50, 150), 2)]
        for s in ("A", "B", "C", "D")
        for i in range(years)
    ]
    with load(tmp_path, "prices", ["symbol", "date", "price"], rows) as ctx:
        _, a = ask(ctx, metric, "2002-01-01:2002-12-31", "2003-01-01:2003-12-31", table="prices")
        e = a.explanation
        assert e.data_grain == "year"
        assert not {i.kind for i in e.data_quality} & {"missing_days", "partial_period"}

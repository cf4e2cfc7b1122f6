"""Questions that cannot mean what they say are refused by `drilldown investigate` in one line,
exit code 2, with nothing written: no report, no result.json, no remembered investigation.

Each case is a mistake a new user makes easily and that used to produce a confident wrong answer
with exit code 0 (a one-day total against a seven-day total, a period outside the data, a quoted
filter value, a misspelled column, a ratio with a zero baseline denominator). The CLI runs as a
user runs it, in a subprocess, on a small CSV.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.support.cli import ROOT

WEEK_1 = "2024-03-18:2024-03-24"
WEEK_2 = "2024-03-25:2024-03-31"


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """28 days x 3 platforms; iOS revenue falls in the last week; ``refunds`` is 0 until then."""
    lines = ["date,platform,country,sessions,purchases,refunds,revenue"]
    start = date(2024, 3, 4)
    for i in range(28):
        day = start + timedelta(days=i)
        for k, platform in enumerate(("ios", "android", "web")):
            revenue = 100 + 7 * k + i % 5 - (40 if platform == "ios" and i >= 21 else 0)
            refunds = 1 + k if i >= 21 else 0
            country = "US" if (i + k) % 2 else "GB"
            lines.append(f"{day},{platform},{country},{20 + k},{3 + i % 3},{refunds},{revenue}")
    path = tmp_path_factory.mktemp("refusals") / "events.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def investigate(
    events: Path, out: Path, *args: str, metric: str = "sum(revenue)"
) -> subprocess.CompletedProcess[str]:
    """`drilldown investigate` offline on ``events``, remembering in a store under ``out``."""
    argv = ["investigate", str(events), "--metric", metric, "--offline", "--out", str(out)]
    env = {
        **os.environ,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DRILLDOWN_STORE_PATH": str(out.parent / f"{out.name}-memory.duckdb"),
    }
    return subprocess.run(
        [sys.executable, "-m", "drilldown.cli", *argv, *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip


def with_option(
    events: Path, out: Path, option: str, value: str
) -> subprocess.CompletedProcess[str]:
    """`drilldown investigate` of the two weeks with ``option`` (``--metric`` included) set."""
    args = ["--baseline", WEEK_1, "--comparison", WEEK_2]
    if option == "--metric":
        return investigate(events, out, *args, metric=value)
    return investigate(events, out, *args, option, value)


def refused(proc: subprocess.CompletedProcess[str], out: Path) -> str:
    """The one-line error of a refused run, after checking that nothing was written."""
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    assert not (out / "report.md").exists() and not (out / "result.json").exists()
    assert not (out.parent / f"{out.name}-memory.duckdb").exists(), "the store was written"
    return errors[0]


def test_a_total_over_periods_of_different_lengths_is_refused(events, tmp_path):
    out = tmp_path / "out"
    line = refused(
        investigate(events, out, "--baseline", "2024-03-18", "--comparison", WEEK_2), out
    )
    assert "baseline has 1 day" in line and "comparison 7 days" in line, line
    assert "equal length" in line and "ratio/average" in line, line


def test_a_ratio_over_periods_of_different_lengths_is_answered(events, tmp_path):
    out = tmp_path / "out"
    proc = investigate(
        events, out, "--baseline", "2024-03-18", "--comparison", WEEK_2, metric="avg(revenue)"
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "result.json").exists()


def test_a_period_without_rows_is_refused_naming_the_data_range(events, tmp_path):
    out = tmp_path / "out"
    proc = investigate(
        events, out, "--baseline", "2023-01-01:2023-01-07", "--comparison", WEEK_2
    )
    line = refused(proc, out)
    assert "baseline 2023-01-01..2023-01-07 has no rows" in line, line
    assert "the data covers 2024-03-04..2024-03-31" in line, line


def test_overlapping_periods_are_refused_naming_the_overlap(events, tmp_path):
    out = tmp_path / "out"
    proc = investigate(
        events, out, "--baseline", WEEK_1, "--comparison", "2024-03-22:2024-03-28"
    )
    line = refused(proc, out)
    assert "overlap on 2024-03-22..2024-03-24" in line, line


def test_a_filter_matching_no_rows_is_refused_naming_the_closest_value(events, tmp_path):
    out = tmp_path / "out"
    proc = investigate(
        events, out, "--baseline", WEEK_1, "--comparison", WEEK_2, "--filter", "platform=iPhone"
    )
    line = refused(proc, out)
    assert "platform=iPhone" in line and "matches no rows" in line, line
    assert "android" in line and "web" in line, line


@pytest.mark.parametrize("quoted", ["platform='ios'", 'platform="ios"'])
def test_a_sql_quoted_filter_value_means_the_value(events, tmp_path, quoted):
    plain, sql = tmp_path / "plain", tmp_path / "sql"
    periods = ("--baseline", WEEK_1, "--comparison", WEEK_2)
    for out, f in ((plain, "platform=ios"), (sql, quoted)):
        proc = investigate(events, out, *periods, "--filter", f)
        assert proc.returncode == 0, proc.stderr
    want = json.loads((plain / "result.json").read_text())
    got = json.loads((sql / "result.json").read_text())
    assert got["metric"]["filters"] == want["metric"]["filters"]
    assert got["change"] == want["change"]
    assert got["change"]["absolute"] < 0  # iOS revenue fell: the filter kept iOS rows


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--metric", "sum(revenu)", "metric"),
        ("--filter", "platfrom=ios", "filters.column"),
        ("--dimensions", "platform,contry", "dimensions"),
        ("--time-column", "dat", "time_column"),
    ],
)
def test_a_misspelled_column_is_refused_naming_the_closest(events, tmp_path, option, value, field):
    out = tmp_path / "out"
    line = refused(with_option(events, out, option, value), out)
    closest = {"metric": "revenue", "filters.column": "platform", "dimensions": "country"}
    assert f"closest: '{closest.get(field, 'date')}'" in line, line
    assert "valid: date, platform, country, sessions" in line, line


def test_a_ratio_with_a_zero_baseline_denominator_is_refused(events, tmp_path):
    out = tmp_path / "out"
    proc = investigate(
        events, out, "--baseline", WEEK_1, "--comparison", WEEK_2,
        metric="sum(revenue) / sum(refunds)",
    )  # fmt: skip
    line = refused(proc, out)
    assert "has no baseline value" in line and "sum(refunds) is 0" in line, line


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--metric", "sum(revenue); drop table events", "at character 13"),
        ("--metric", "no_such_metric", "unknown metric 'no_such_metric'"),
        ("--filter", "platform ios", "expected an operator"),
        ("--grain", "week", "grain"),
    ],
)
def test_a_question_no_data_can_answer_is_refused_before_any_is_loaded(
    events, tmp_path, option, value, says
):
    # the metric's or a filter's syntax, or the grain, is wrong whatever the data holds: the
    # question is refused before the files are loaded, so --out is not even made
    out = tmp_path / "out"
    line = refused(with_option(events, out, option, value), out)
    assert says in line, line
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))


def test_a_question_refused_once_the_data_is_loaded_leaves_nothing_behind(events, tmp_path):
    # a text column summed is known to be wrong only once the files are loaded: the refusal
    # takes back what the run made (its --out folder, with the loaded database in it)
    out = tmp_path / "out"
    line = refused(with_option(events, out, "--metric", "sum(platform)"), out)
    assert "sum needs a numeric column" in line and "'platform' is text" in line, line
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))
    # a database asked for elsewhere (--db) goes too, when this run made it
    db = tmp_path / "elsewhere" / "loaded.duckdb"
    db.parent.mkdir()
    args = ["--baseline", WEEK_1, "--comparison", WEEK_2, "--db", str(db)]
    refused(investigate(events, out, *args, metric="sum(platform)"), out)
    assert not out.exists() and sorted(db.parent.iterdir()) == []


def test_a_refusal_in_a_folder_of_earlier_work_keeps_that_work(events, tmp_path):
    # in a folder that already exists, only what this run made goes: an earlier report stays
    # as it was, and a database it did not find there is not left behind
    kept, fresh = tmp_path / "kept", tmp_path / "fresh"
    args = ["--baseline", WEEK_1, "--comparison", WEEK_2]
    assert investigate(events, kept, *args).returncode == 0
    before = {p.name: p.read_bytes() for p in kept.iterdir() if p.suffix in (".md", ".json")}
    assert {"report.md", "result.json"} <= set(before)
    proc = with_option(events, kept, "--metric", "sum(platform)")
    assert proc.returncode == 2, proc.stderr
    after = {p.name: p.read_bytes() for p in kept.iterdir() if p.suffix in (".md", ".json")}
    assert after == before
    assert (kept / "data.duckdb").exists(), "the earlier investigation's database was removed"
    fresh.mkdir()
    refused(with_option(events, fresh, "--metric", "sum(platform)"), fresh)
    assert sorted(p.name for p in fresh.iterdir()) == []


def test_an_output_folder_that_is_a_file_is_refused_and_the_file_kept(events, tmp_path):
    # --out naming a file, or a path under one, is the caller's mistake: exit 2, the file as it
    # was, nothing loaded
    note = tmp_path / "notes.txt"
    note.write_text("keep me\n", encoding="utf-8")
    args = ["--baseline", WEEK_1, "--comparison", WEEK_2]
    for out, says in ((note, "is not a folder"), (note / "run", f"{note} is a file")):
        proc = investigate(events, out, *args)
        line = refused(proc, out)
        assert f"the output folder {out}" in line and says in line, line
        assert "loaded" not in proc.stderr, proc.stderr
    assert note.read_text(encoding="utf-8") == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("column", "baseline", "want"),
    [
        ("year", "abc", "baseline label 'abc' is not a whole number: period column 'year' is"),
        ("year", "2019.5", "baseline label '2019.5' is not a whole number"),
        ("share", "half", "baseline label 'half' is not a number: period column 'share' is"),
        ("promo", "maybe", "baseline label 'maybe' is not true or false"),
    ],
)
def test_a_period_label_that_cannot_be_the_columns_type_is_refused(
    tmp_path, column, baseline, want
):
    lines = ["year,share,promo,platform,revenue"]
    for i in range(60):
        promo = "true" if i % 2 else "false"
        lines.append(f"{2018 + i % 4},{(i % 3) / 4:.2f},{promo},p{i % 3},{i}")
    data = tmp_path / "labelled.csv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    comparison = {"year": "2020", "share": "0.25", "promo": "true"}[column]
    out = tmp_path / "out"
    proc = investigate(
        data, out, "--period-column", column, "--baseline", baseline, "--comparison", comparison
    )
    line = refused(proc, out)
    assert want in line, line


@pytest.mark.parametrize("year", [2023, 2024])
def test_a_total_over_calendar_months_of_different_lengths_is_answered_with_a_note(
    tmp_path, year
):
    """February against March: the business's own periods, compared as they are, with the
    difference in days said; a range cut short by a day is still refused."""
    lines = ["date,platform,revenue"]
    day = date(year, 2, 1)
    while day < date(year, 4, 1):
        for k, platform in enumerate(("ios", "android", "web")):
            fall = 30 if platform == "web" and day.month == 3 else 0
            lines.append(f"{day},{platform},{100 + 9 * k + day.day % 4 - fall}")
        day += timedelta(days=1)
    data = tmp_path / "months.csv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    feb_days = (date(year, 3, 1) - date(year, 2, 1)).days
    feb = f"{year}-02-01:{year}-02-{feb_days}"
    out = tmp_path / "out"
    proc = investigate(data, out, "--baseline", feb, "--comparison", f"{year}-03-01:{year}-03-31")
    assert proc.returncode == 0, proc.stderr
    notes = json.loads((out / "result.json").read_text())["notes"]
    said = [n for n in notes if "differ in length" in n]
    assert said and f"by {31 - feb_days} days" in said[0], notes
    assert said[0] in (out / "report.md").read_text()
    short = tmp_path / "short"
    proc = investigate(data, short, "--baseline", feb, "--comparison", f"{year}-03-01:{year}-03-30")
    assert "equal length" in refused(proc, short)

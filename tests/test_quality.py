"""Data-quality checks (tasks.engine.quality) on tiny CSVs loaded with the real loader.

Each test plants one defect and checks the issue a user would read: its kind, period, segment,
days and message, and that its evidence re-runs on a plain DuckDB connection.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import duckdb
import pytest

from sql_tools import ToolContext, ToolInputError
from sql_tools._sql import Filter
from tasks.engine import quality
from tasks.engine.quality import check_quality, two_proportion_p
from tasks.engine.result import DataQualityIssue
from tasks.engine.spec import Aggregate, DateRange, Metric, Periods, Question
from tasks.load import load_files

BASELINE = DateRange(start=date(2024, 3, 4), end=date(2024, 3, 10))
COMPARISON = DateRange(start=date(2024, 3, 11), end=date(2024, 3, 17))
REGIONS = ("EU", "US", "APAC")
DEVICES = ("web", "ios", "android")
USERS = "user_id,plan\n1,free\n2,free\n3,pro\n4,pro\n"
DIMS = ["region", "device"]

Row = dict[str, Any]


def day_range(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def events_csv(
    *,
    start: date = BASELINE.start,
    end: date = COMPARISON.end,
    keep: Callable[[Row], bool] = lambda r: True,
    edit: Callable[[Row], Row] = lambda r: r,
    duplicate: Callable[[Row], bool] = lambda r: False,
    extra: tuple[Row, ...] = (),
) -> str:
    """Three rows per region and day (every row distinct), shaped by the hooks."""
    rows: list[Row] = []
    n = 0
    for day in day_range(start, end):
        for region in REGIONS:
            for i in range(3):
                n += 1
                rows.append(
                    {
                        "day": day.isoformat(),
                        "region": region,
                        "device": DEVICES[i],
                        "revenue": f"{10 + n}.5",
                        "user_id": 1 + (n % 4),
                    }
                )
    rows += extra
    out = ["day,region,device,revenue,user_id"]
    for r in rows:
        if not keep(r):
            continue
        r = edit(dict(r))
        line = ",".join("" if r[c] is None else str(r[c]) for c in r)
        out.append(line)
        if duplicate(r):
            out.append(line)
    return "\n".join(out) + "\n"


def keep_unless(region: str | None = None, days: set[str] | frozenset[str] = frozenset(), users=()):
    """A ``keep`` hook dropping the rows of ``region`` (or of ``users``) on ``days``."""

    def keep(r: Row) -> bool:
        hit = (region is None or r["region"] == region) and (not users or r["user_id"] in users)
        return not (hit and r["day"] in days)

    return keep


def _pop_rows() -> tuple[Row, ...]:
    """A sporadic region (2 of 7 baseline days): its vanishing is movement, not a defect."""
    return tuple(
        {"day": d, "region": "POP", "device": "web", "revenue": "1.5", "user_id": 1}
        for d in ("2024-03-05", "2024-03-06")
    )


def _partial_nulls(r: Row) -> Row:
    """Comparison: device NULL on non-web rows outside EU (every device keeps some rows)."""
    hit = r["day"] >= "2024-03-11" and r["device"] != "web" and r["region"] != "EU"
    return r | {"device": None} if hit else r


def _revenue_filled(r: Row) -> Row:
    """Baseline: revenue NULL outside EU; the comparison has it everywhere."""
    return r | {"revenue": None} if r["day"] < "2024-03-11" and r["region"] != "EU" else r


def _planted_in_apac() -> str:
    """APAC alone: two missing comparison days, every row doubled, NULL revenue late."""

    def edit(r: Row) -> Row:
        late_apac = r["region"] == "APAC" and r["day"] >= "2024-03-11"
        return r | {"revenue": None} if late_apac and r["device"] != "web" else r

    return events_csv(
        keep=keep_unless("APAC", {"2024-03-15", "2024-03-16"}),
        edit=edit,
        duplicate=lambda r: r["region"] == "APAC",
    )


def _weekly() -> str:
    lines = ["week,region,device,revenue"]
    for week in ("w1", "w2"):
        for n in range(60):
            device = "" if week == "w2" and n % 2 else DEVICES[n % 3]
            lines.append(f"{week},{REGIONS[n % 3]},{device},{n}.25")
    lines += ["w2,EU,web,0.25"] * 3  # three extra copies of one w2 row
    return "\n".join(lines) + "\n"


def _to_timestamp(r: Row) -> Row:
    return r | {"day": f"{r['day']} {8 + r['user_id']:02d}:30:00"}


JAN = DateRange(start=date(2024, 1, 1), end=date(2024, 1, 14))
JAN_NEXT = DateRange(start=date(2024, 1, 15), end=date(2024, 1, 28))
DATASETS: dict[str, str] = {
    "users": USERS,
    "clean": events_csv(extra=_pop_rows()),
    "ends_early": events_csv(end=date(2024, 3, 15)),
    "gap": events_csv(keep=keep_unless(days={"2024-03-13", "2024-03-14"})),
    "long_gap": events_csv(
        start=JAN.start,
        end=JAN_NEXT.end,
        keep=keep_unless(
            days={d.isoformat() for d in day_range(date(2024, 1, 16), date(2024, 1, 27))}
        ),
    ),
    "ts_gap": events_csv(keep=keep_unless(days={"2024-03-05"}), edit=_to_timestamp),
    "apac_gap": events_csv(keep=keep_unless("APAC", {"2024-03-15", "2024-03-16"})),
    "pro_gap": events_csv(keep=keep_unless(users=(3, 4), days={"2024-03-12", "2024-03-13"})),
    "us_gone": events_csv(keep=lambda r: not (r["region"] == "US" and r["day"] >= "2024-03-11")),
    "device_nulls": events_csv(edit=_partial_nulls),
    "revenue_filled": events_csv(edit=_revenue_filled),
    "dups": events_csv(duplicate=lambda r: r["day"] == "2024-03-12" and r["region"] != "APAC"),
    "late_dups": events_csv(duplicate=lambda r: r["day"] >= "2024-03-11"),
    "apac_defects": _planted_in_apac(),
    "weekly": _weekly(),
}


@dataclass
class Env:
    ctx: ToolContext
    rerun: duckdb.DuckDBPyConnection


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Every dataset as one table of one database, loaded once by the real loader."""
    root = tmp_path_factory.mktemp("quality")
    paths = []
    for name, text in DATASETS.items():
        path = root / f"{name}.csv"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    db = root / "quality.duckdb"
    load_files(paths, db)
    shutil.copy(db, root / "rerun.duckdb")
    rerun = duckdb.connect(str(root / "rerun.duckdb"), read_only=True)
    with ToolContext(db) as ctx:
        yield Env(ctx, rerun)
    rerun.close()


@pytest.fixture
def check(env: Env, monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[DataQualityIssue]]:
    """Run check_quality (counting its queries) and re-run every issue's evidence."""

    def run(q: Question, dims: list[str] = DIMS, *, max_queries: int = 4) -> list[DataQualityIssue]:
        calls: list[str] = []
        real = env.ctx.run

        def spy(sql: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
            calls.append(sql)
            return real(sql, params, **kw)

        monkeypatch.setattr(env.ctx, "run", spy)
        issues = check_quality(env.ctx, q, dims)
        monkeypatch.setattr(env.ctx, "run", real)
        assert len(calls) <= max_queries, calls
        for issue in issues:
            assert_evidence_reruns(env.rerun, issue)
        return issues

    return run


def assert_evidence_reruns(con: duckdb.DuckDBPyConnection, issue: DataQualityIssue) -> None:
    """The evidence names its check, and its SQL with JSON params runs on a plain connection."""
    ev = issue.evidence
    assert ev is not None and ev.tool == "sql" and ev.sql.startswith(("SELECT", "WITH"))
    assert ev.arguments["check"] == issue.kind and ev.arguments["table"]
    assert con.execute(ev.sql, ev.params).fetchall()


def question(
    table: str,
    *,
    baseline: DateRange = BASELINE,
    comparison: DateRange = COMPARISON,
    filters: tuple[Filter, ...] = (),
) -> Question:
    return Question(
        metric=Metric(
            table=table,
            numerator=Aggregate(fn="sum", column="revenue"),
            denominator=Aggregate(fn="count"),
            filters=filters,
        ),
        periods=Periods(time_column="day", baseline=baseline, comparison=comparison),
    )


def kinds(issues: list[DataQualityIssue]) -> list[str]:
    return [i.kind for i in issues]


def only(issues: list[DataQualityIssue], kind: str) -> DataQualityIssue:
    (issue,) = [i for i in issues if i.kind == kind]
    return issue


# --- clean data ---------------------------------------------------------------------------------


def test_clean_dataset_has_no_issues(check):
    assert check(question("clean"), ["region", "device", "users.plan"]) == []


def test_time_column_must_be_a_date(env):
    q = Question(
        metric=Metric(table="clean", numerator=Aggregate(fn="count")),
        periods=Periods(time_column="region", baseline=BASELINE, comparison=COMPARISON),
    )
    with pytest.raises(ToolInputError) as err:
        check_quality(env.ctx, q, DIMS)
    assert err.value.code == "type_mismatch"


# --- partial_period -----------------------------------------------------------------------------


def test_partial_period_comparison_partly_covered(check):
    issues = check(question("ends_early"))
    assert kinds(issues) == ["partial_period"]
    (issue,) = issues
    assert issue.period == "comparison" and issue.severity == "warning"
    assert issue.details["covered_days"] == 5 and issue.details["total_days"] == 7
    assert issue.details["data_last"] == "2024-03-15"
    assert "2024-03-15" in issue.message and "5 of its 7 days" in issue.message
    assert issue.evidence.result["last"] == "2024-03-15"


def test_partial_period_without_any_data_is_an_error(check):
    late = DateRange(start=date(2024, 3, 18), end=date(2024, 3, 24))
    issues = check(question("clean", comparison=late))
    assert kinds(issues) == ["partial_period"]
    assert issues[0].severity == "error" and issues[0].period == "comparison"
    assert issues[0].details["covered_days"] == 0
    assert "no data at all" in issues[0].message


# --- missing_days -------------------------------------------------------------------------------


def test_missing_days_lists_the_empty_days(check):
    issues = check(question("gap"))
    # a whole missing day is not also reported as every segment missing that day
    assert kinds(issues) == ["missing_days"]
    (issue,) = issues
    assert issue.period == "comparison" and issue.severity == "warning"
    assert issue.details["days"] == ["2024-03-13", "2024-03-14"]
    assert "2024-03-13, 2024-03-14" in issue.message and "2 of the 7 days" in issue.message
    # without dimensions the same days query still runs (one grouping set)
    (bare,) = check(question("gap"), [])
    assert bare.model_dump(exclude={"evidence"}) == issue.model_dump(exclude={"evidence"})


def test_missing_days_message_caps_the_list(check):
    issue = only(check(question("long_gap", baseline=JAN, comparison=JAN_NEXT)), "missing_days")
    assert len(issue.details["days"]) == 12
    assert "2024-01-25 and 2 more" in issue.message and "2024-01-26" not in issue.message


def test_missing_days_with_a_timestamp_time_column(check):
    issues = check(question("ts_gap"))
    assert kinds(issues) == ["missing_days"]
    assert issues[0].period == "baseline" and issues[0].details["days"] == ["2024-03-05"]


# --- segment_missing_days -----------------------------------------------------------------------


def test_segment_missing_days_in_one_pass(check):
    issues = check(question("apac_gap"), ["region", "device", "users.plan"])
    assert kinds(issues) == ["segment_missing_days"]
    (issue,) = issues
    assert issue.segment == {"region": "APAC"} and issue.column == "region"
    assert issue.period == "comparison"
    assert issue.details["days"] == ["2024-03-15", "2024-03-16"]
    assert "region = 'APAC'" in issue.message and "2024-03-15, 2024-03-16" in issue.message
    assert "7 of 7 baseline days" in issue.message
    assert issue.evidence.arguments["dimensions"] == ["region", "device", "users.plan"]


def test_segment_missing_days_on_a_joined_column(check):
    issue = only(check(question("pro_gap"), ["region", "users.plan"]), "segment_missing_days")
    assert issue.segment == {"users.plan": "pro"}
    assert issue.details["days"] == ["2024-03-12", "2024-03-13"]


def test_segment_gone_for_the_whole_comparison(check):
    issue = only(check(question("us_gone")), "segment_missing_days")
    assert issue.segment == {"region": "US"} and len(issue.details["days"]) == 7
    assert "no rows at all in the comparison period" in issue.message


# --- null_spike ---------------------------------------------------------------------------------


def test_null_spike_on_a_dimension(check):
    issues = check(question("device_nulls"))
    assert kinds(issues) == ["null_spike"]
    (issue,) = issues
    assert issue.column == "device" and issue.severity == "warning"
    assert issue.details["baseline_null_rate"] == 0
    assert issue.details["comparison_null_rate"] == pytest.approx(4 / 9)
    assert issue.details["p_value"] < 0.001
    assert "'device'" in issue.message and "44.4%" in issue.message and "0.0%" in issue.message


def test_null_drop_on_a_metric_column_is_info(check):
    issue = only(check(question("revenue_filled")), "null_spike")
    assert issue.column == "revenue" and issue.severity == "info"
    assert issue.details["direction"] == "filled"
    assert "started being filled" in issue.message


def test_two_proportion_test():
    assert two_proportion_p(0, 1000, 100, 1000) < 1e-10
    assert two_proportion_p(3, 60, 5, 60) > 0.001
    assert two_proportion_p(0, 0, 1, 10) == 1.0


# --- duplicate_rows -----------------------------------------------------------------------------


def test_duplicate_rows_in_the_comparison(check):
    issues = check(question("dups"))
    assert kinds(issues) == ["duplicate_rows"]
    (issue,) = issues
    assert issue.period == "comparison"
    d = issue.details
    assert (d["comparison_duplicates"], d["comparison_rows"]) == (6, 69)
    assert (d["baseline_duplicates"], d["baseline_rows"]) == (0, 63)
    assert d["exact"] is True
    assert "6 of 69 comparison rows" in issue.message and "inflated" in issue.message


def test_duplicate_rows_on_a_hash_sample(check, monkeypatch):
    monkeypatch.setattr(quality, "DUPLICATE_EXACT_MAX_ROWS", 30)
    d = only(check(question("late_dups")), "duplicate_rows").details
    assert d["exact"] is False and d["sample"] == "1/8"
    assert d["comparison_rows"] == 126 and d["comparison_rate"] == pytest.approx(0.5)
    assert d["comparison_duplicates"] == 63 and d["baseline_duplicates"] == 0


# --- label periods ------------------------------------------------------------------------------


def test_label_periods_get_null_and_duplicate_checks_only(check):
    q = Question(
        metric=Metric(table="weekly", numerator=Aggregate(fn="sum", column="revenue")),
        periods=Periods(period_column="week", baseline="w1", comparison="w2"),
    )
    issues = check(q, DIMS, max_queries=2)
    assert sorted(kinds(issues)) == ["duplicate_rows", "null_spike"]
    spike = only(issues, "null_spike")
    assert spike.column == "device" and spike.evidence.arguments["comparison"] == "w2"
    dup = only(issues, "duplicate_rows")
    assert dup.details["comparison_duplicates"] == 3 and dup.details["comparison_rows"] == 63


# --- filters ------------------------------------------------------------------------------------


def test_filters_exclude_defects_outside_the_metric(check):
    not_apac = (Filter(column="region", op="!=", value="APAC"),)
    assert check(question("apac_defects", filters=not_apac)) == []


def test_filters_apply_to_every_check(check):
    apac = (Filter(column="region", op="=", value="APAC"),)
    issues = check(question("apac_defects", filters=apac))
    assert sorted(kinds(issues)) == ["duplicate_rows", "missing_days", "null_spike"]
    assert only(issues, "missing_days").details["days"] == ["2024-03-15", "2024-03-16"]
    assert only(issues, "null_spike").column == "revenue"
    for issue in issues:
        assert issue.evidence.arguments["filters"] == [
            {"column": "region", "op": "=", "value": "APAC"}
        ]
        assert "APAC" in issue.evidence.params.values()


def test_filter_on_a_joined_column(check):
    pro = (Filter(column="users.plan", op="=", value="pro"),)
    issues = check(question("pro_gap", filters=pro), ["region"])
    assert kinds(issues) == ["missing_days"]
    assert issues[0].details["days"] == ["2024-03-12", "2024-03-13"]

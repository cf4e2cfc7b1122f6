"""Data-quality checks (tasks.engine.quality) on tiny CSVs loaded with the real loader.

Each test plants one defect and checks the issue a user would read: its kind, period, segment,
days and message, and that its evidence re-runs on a plain DuckDB connection.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pytest

from sql_tools import Filter, ToolContext, ToolInputError
from tasks.agent.gate import Gate
from tasks.agent.ledger import Ledger
from tasks.agent.models import Budget, Hypothesis
from tasks.agent.run import investigate_one, plan
from tasks.agent.session import Session
from tasks.engine import quality
from tasks.engine.explain import analyze, compare_arguments
from tasks.engine.parse import build_question
from tasks.engine.quality import check_quality, two_proportion_p
from tasks.engine.result import DataQualityIssue, Explanation
from tasks.engine.spec import Aggregate, DateRange, Metric, Periods, Question
from tasks.ingest.load import load_files
from tasks.report.markdown import render

SCENARIOS = Path(__file__).resolve().parents[2] / "data" / "scenarios"
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
    lines += lines[-12:]  # the last 12 rows of w2 (a file) loaded again
    return "\n".join(lines) + "\n"


def _to_timestamp(r: Row) -> Row:
    return r | {"day": f"{r['day']} {8 + r['user_id']:02d}:30:00"}


def pattern(name: str) -> ModuleType:
    """A scenario generator, ``data/scenarios/pattern_<name>.py``, as a module (its folder on
    the import path, as when it runs as a script: it uses ``generate.py``'s helpers)."""
    if str(SCENARIOS) not in sys.path:
        sys.path.insert(0, str(SCENARIOS))
    spec = importlib.util.spec_from_file_location(
        f"pattern_{name}", SCENARIOS / f"pattern_{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def visits_csv(**variant: Any) -> str:
    """The event_rows scenario's visit log (one row per visit, no id), or a variant of it."""
    gen = pattern("event_rows")
    rows = gen.rows(**variant)
    return "\n".join([",".join(gen.COLUMNS), *(",".join(map(str, r)) for r in rows)]) + "\n"


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
    "nan_revenue": events_csv(
        extra=tuple(
            {"day": day, "region": "EU", "device": "web", "revenue": value, "user_id": 1}
            for day, value in (("2024-03-05", "inf"), ("2024-03-12", "NaN"))
        )
    ),
    "visits": visits_csv(),
    "visits_twice": visits_csv(loaded_twice=[date(2024, 3, 19), date(2024, 3, 27)]),
    "visits_rush": visits_csv(busier=[date(2024, 3, 27)]),
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


def test_duplicate_rows_part_of_a_day_loaded_again(check):
    issues = check(question("dups"))
    assert kinds(issues) == ["duplicate_rows"]
    (issue,) = issues
    assert issue.period == "comparison"
    d = issue.details
    assert d["days"] == ["2024-03-12"] and d["repeated_days"] == {}  # part of the day only
    assert (d["comparison_duplicates"], d["comparison_rows"]) == (6, 69)
    assert (d["baseline_duplicates"], d["baseline_rows"]) == (0, 63)
    assert d["exact"] is True
    assert "2024-03-12 (6 of 15 rows are copies)" in issue.message and "inflated" in issue.message


def test_duplicate_rows_whole_days_on_a_hash_sample(check, monkeypatch):
    monkeypatch.setattr(quality.duplicates, "DUPLICATE_EXACT_MAX_ROWS", 100)
    monkeypatch.setattr(quality.duplicates, "DUPLICATE_EXACT_DISTINCT", 10)
    d = only(check(question("late_dups")), "duplicate_rows").details
    assert d["exact"] is False and d["sample"] == "1/2"
    comparison = [day.isoformat() for day in day_range(COMPARISON.start, COMPARISON.end)]
    assert d["days"] == comparison and d["repeated_days"] == dict.fromkeys(comparison, 2)
    assert d["comparison_rows"] == 126 and d["comparison_rate"] == pytest.approx(0.5)
    assert d["comparison_duplicates"] == 63 and d["baseline_duplicates"] == 0


VISITS = Periods(
    time_column="date",
    baseline=DateRange(start=date(2024, 3, 18), end=date(2024, 3, 24)),
    comparison=DateRange(start=date(2024, 3, 25), end=date(2024, 3, 31)),
)


def visits(table: str) -> Question:
    """sum(purchases) over the visit logs, week of 2024-03-25 against the week before."""
    metric = Metric(table=table, numerator=Aggregate(fn="sum", column="purchases"))
    return Question(metric=metric, periods=VISITS)


def test_identical_events_are_not_duplicates(env, check):
    """One row per visit and no id: nearly every row has an identical twin, every day alike."""
    rows, distinct = env.rerun.execute(
        "SELECT count(*), count(DISTINCT (date, platform, country, purchases)) FROM visits "
        "WHERE date BETWEEN '2024-03-18' AND '2024-03-31'"
    ).fetchone()
    assert distinct < 0.05 * rows  # the data really is mostly identical rows
    assert check(visits("visits"), ["platform", "country"]) == []


def test_a_busier_day_is_not_a_double_load(check):
    """Twice the visits on one day (counts double) is not evidence of rows loaded twice."""
    assert check(visits("visits_rush"), ["platform", "country"]) == []


def test_days_loaded_twice_are_named(check):
    (issue,) = check(visits("visits_twice"), ["platform", "country"])
    assert issue.kind == "duplicate_rows"
    d = issue.details
    assert d["days"] == ["2024-03-19", "2024-03-27"]
    assert d["repeated_days"] == {"2024-03-19": 2, "2024-03-27": 2}
    assert "2024-03-19 (every row twice), 2024-03-27 (every row twice)" in issue.message
    # the extra copies are exactly the second load of each day
    once = pattern("event_rows").rows()
    assert d["baseline_duplicates"] == sum(r[0] == "2024-03-19" for r in once)
    assert d["comparison_duplicates"] == sum(r[0] == "2024-03-27" for r in once)


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
    assert dup.details["periods"] == ["w2"] and dup.details["repeated_days"] == {}
    assert dup.details["comparison_duplicates"] == 12 and dup.details["comparison_rows"] == 72
    assert "w2 (12 of 72 rows are copies)" in dup.message


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


# --- which moves the data explains (tasks.engine.clean_days) ------------------------------------

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "outage": ("segment_outage", {}),
    "outage_and_drop": ("segment_outage", {"web_factor": 0.7}),
    "ends_early": ("segment_outage", {"outage": (), "last_day": date(2024, 3, 29)}),
    "ends_early_growth": (
        "segment_outage",
        {"outage": (), "last_day": date(2024, 3, 29), "growth": 1.6},
    ),
    "ends_early_web_drop": (
        "segment_outage",
        {"outage": (), "last_day": date(2024, 3, 29), "web_factor": 0.6},
    ),
    "loaded_twice": ("event_rows", {"android_factor": 1.0, "loaded_twice": [date(2024, 3, 27)]}),
}
"""Tables built by the scenario generators: table name -> (generator, variant)."""


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolContext]:
    """Every variant as one table of one database."""
    root = tmp_path_factory.mktemp("moved")
    paths = []
    for name, (generator, variant) in VARIANTS.items():
        gen = pattern(generator)
        path = root / f"{name}.csv.gz"
        path.write_bytes(gen.csv_bytes(gen.rows(**variant)))
        paths.append(path)
    db = root / "moved.duckdb"
    load_files(paths, db)
    with ToolContext(db) as ctx:
        yield ctx


def explained(ctx: ToolContext, table: str, metric: str, grain: str | None = None):
    """The question on ``table`` for the scenarios' weeks, and the engine's analysis of it."""
    q = build_question(
        ctx.schema,
        metric=metric,
        table=table,
        time_column="date",
        baseline="2024-03-18:2024-03-24",
        comparison="2024-03-25:2024-03-31",
        grain=grain,
        named_metrics=False,
    )
    return q, analyze(ctx, q)


def headline(e: Explanation) -> str:
    """report.md up to its first section."""
    return render(e).split("\n## ", 1)[0]


def data_problem(ctx: ToolContext, q: Question, analysis: Any) -> str:
    """The offline planner's verdict on "a data problem"."""
    planned, _, _ = plan(ctx, q, analysis)
    ((h, steps),) = [(h, p) for h, p in planned if h.source == "data_quality"]
    return investigate_one(ctx, q, analysis, h, steps).outcome.status


def test_a_segment_outage_is_a_data_problem_for_daily_users(moved):
    q, a = explained(moved, "outage", "count(distinct customer_id)", grain="day")
    e = a.explanation
    assert e.change.significant and e.change.relative < 0
    (cause,) = e.root_causes
    assert cause.segment == {"platform": "web"} and cause.effect == "data_quality"
    note = cause.data_quality
    assert note.explained and note.kinds == ["segment_missing_days"]
    assert note.days_set_aside == {"baseline": [], "comparison": ["2024-03-27"]}
    assert "2024-03-27" in note.message and note.evidence.sql
    top = headline(e)
    assert "This drop is a data problem first" in top and "2024-03-27" in top
    assert data_problem(moved, q, a) == "confirmed"


def test_a_real_drop_with_an_outage_stays_a_business_change(moved):
    """Web revenue really fell by 30%, and web also misses a day: the drop is web's own."""
    q, a = explained(moved, "outage_and_drop", "sum(revenue)")
    e = a.explanation
    (cause,) = e.root_causes
    assert cause.segment == {"platform": "web"} and cause.effect == "rate"
    note = cause.data_quality  # the missing day is still named on it
    assert not note.explained and note.days_set_aside["comparison"] == ["2024-03-27"]
    assert note.move_on_clean_days < -0.2  # still about -30% without the missing day
    assert "data problem first" not in headline(e)
    assert "2024-03-27" in render(e)
    assert data_problem(moved, q, a) == "ruled_out"


def test_a_partial_period_is_a_data_problem(moved):
    """The data ends on 2024-03-29: the comparison week lacks its weekend."""
    q, a = explained(moved, "ends_early", "sum(revenue)")
    e = a.explanation
    assert "partial_period" in [i.kind for i in e.data_quality]
    assert e.change.significant and not e.root_causes
    shift = e.global_shift
    assert shift is not None and shift.effect == "data_quality"
    assert shift.data_quality.days_set_aside["comparison"] == ["2024-03-30", "2024-03-31"]
    assert abs(shift.data_quality.move_on_clean_days) < 0.05 < abs(shift.data_quality.move)
    top = headline(e)
    assert "This drop is a data problem first" in top and "2024-03-30, 2024-03-31" in top
    assert data_problem(moved, q, a) == "confirmed"


def test_growth_seen_through_a_partial_period_is_growth(moved):
    """Sessions grew 60% and the data ends early: the rise is the business's, not the data's."""
    q, a = explained(moved, "ends_early_growth", "sum(revenue)")
    e = a.explanation
    shift = e.global_shift
    assert shift is not None and shift.effect == "rate"
    assert shift.data_quality.move_on_clean_days > 0.4 and not shift.data_quality.explained
    assert "data problem first" not in headline(e)
    assert data_problem(moved, q, a) == "ruled_out"


def test_a_partial_period_and_a_real_drop_are_told_apart(moved):
    """Web revenue fell 40% and the data ends early: web is a business cause, the even shift of
    the rest is the missing weekend, and the headline says both, the data problem first."""
    q, a = explained(moved, "ends_early_web_drop", "sum(revenue)")
    e = a.explanation
    (cause,) = e.root_causes
    assert cause.segment == {"platform": "web"} and cause.effect == "rate"
    shift = e.global_shift
    assert shift is not None and shift.effect == "data_quality"
    assert "outside the root causes" in shift.data_quality.message
    top = headline(e)
    assert "This drop is a data problem first" in top
    assert "The business causes below account for the rest" in top


def test_a_day_loaded_twice_is_a_data_problem(moved):
    """Nothing changed but the second load of 2024-03-27: visits look 12% up."""
    q, a = explained(moved, "loaded_twice", "count(*)")
    e = a.explanation
    assert only(e.data_quality, "duplicate_rows").details["repeated_days"] == {"2024-03-27": 2}
    shift = e.global_shift
    assert shift is not None and shift.effect == "data_quality"
    assert shift.data_quality.days_set_aside["comparison"] == ["2024-03-27"]
    assert "This rise is a data problem first" in headline(e)
    assert "days loaded more than once" in headline(e)
    assert data_problem(moved, q, a) == "confirmed"


@pytest.mark.parametrize(
    ("table", "accepted"),
    [("outage", {"data_quality"}), ("outage_and_drop", {"rate"})],
)
def test_the_gate_takes_web_for_what_the_data_shows(moved, table, accepted):
    """A finding on web with the right numbers holds only in the category the engine found:
    a data problem where the move goes away on the days web has, a rate change where it stays."""
    q, a = explained(moved, table, "sum(revenue)")
    ledger = Ledger()
    web = {"platform": "web"}
    h = Hypothesis(
        id="h1", title="web", story="web moved", expected="web moves", segment=web,
        dimensions=["platform"], category="rate", prior=0.5, source="model",
    )  # fmt: skip
    session = Session(moved, h, ledger, Gate(moved, q, a, ledger), Budget())
    _, payload, entry = session.call(
        "metric_compare_periods", {**compare_arguments(q), "group_by": ["platform"]}
    )
    (row,) = [r for r in payload["rows"] if r["platform"] == "web"]
    verdicts = {}
    for category in ("rate", "data_quality"):
        _, finding, _ = session.call(
            "write_finding",
            {
                "segment": web,
                "category": category,
                "title": "web",
                "summary": "web moved",
                "evidence": [entry.id],
                "baseline_value": row["baseline"],
                "comparison_value": row["comparison"],
            },
        )
        verdicts[category] = finding["status"], finding.get("critique") or ""
    assert {c for c, (status, _) in verdicts.items() if status == "accepted"} == accepted
    if table == "outage":
        assert "data_quality" in verdicts["rate"][1]
    else:
        assert verdicts["data_quality"][1].startswith("no move of this segment is explained")


# --- the checks run beside the search ------------------------------------------------------------


def _missing_day_question(ctx: ToolContext) -> Question:
    import json

    exp = json.loads((SCENARIOS / "missing_day" / "expected.json").read_text())
    return build_question(
        ctx.schema,
        metric=exp["metric"],
        time_column=exp["time_column"],
        baseline=exp["baseline"],
        comparison=exp["comparison"],
    )


@pytest.fixture(scope="module")
def missing_day_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("missing_day") / "data.duckdb"
    load_files([SCENARIOS / "missing_day"], db)
    return db


def _quality_threads() -> list[Any]:
    import threading

    return [t for t in threading.enumerate() if t.name == "drilldown-quality" and t.is_alive()]


def test_checks_on_a_second_connection_give_the_issues_of_a_run_on_their_own(missing_day_db):
    with ToolContext(missing_day_db) as ctx:
        q = _missing_day_question(ctx)
        alone = check_quality(ctx, q, list(analyze(ctx, q).explanation.dimensions))
        expl = analyze(ctx, q).explanation
    assert [i.kind for i in expl.data_quality] == [i.kind for i in alone]
    assert "missing_days" in [i.kind for i in expl.data_quality]
    assert [i.model_dump() for i in expl.data_quality] == [i.model_dump() for i in alone]
    assert not _quality_threads()


def test_a_failing_check_fails_the_explanation_with_its_own_error(missing_day_db, monkeypatch):
    def broken(ctx, question, dimensions, cells=None):
        raise ToolInputError("the checks could not run", code="invalid_arguments")

    monkeypatch.setattr(quality, "check_quality", broken)
    with ToolContext(missing_day_db) as ctx:
        with pytest.raises(ToolInputError, match="the checks could not run"):
            analyze(ctx, _missing_day_question(ctx))
    assert not _quality_threads()


def test_a_failing_search_stops_the_checks_and_leaves_the_connection_usable(
    missing_day_db, monkeypatch
):
    import threading

    from tasks.engine import explain as explain_mod

    started, ended = threading.Event(), []

    def slow(ctx, question, dimensions, cells=None):
        started.set()
        # a query of hours on the second connection: stopped when the search fails
        try:
            return ctx.run("SELECT count(*) FROM events a, events b, events c", max_rows=1)
        except Exception as exc:
            ended.append(exc)
            raise

    def failing_search(*args, **kwargs):
        started.wait(5)
        raise ToolInputError("the search failed", code="invalid_arguments")

    monkeypatch.setattr(quality, "check_quality", slow)
    # the checks start once the source is aggregated: the cube built from it fails
    monkeypatch.setattr(explain_mod, "build_cube", failing_search)
    with ToolContext(missing_day_db) as ctx:
        with pytest.raises(ToolInputError, match="the search failed"):
            analyze(ctx, _missing_day_question(ctx))
        assert not _quality_threads()
        assert len(ended) == 1, "the query was stopped, not left to finish"
        assert ctx.run("SELECT 42", max_rows=1).rows == [(42,)]


# --- one pass for the question's check and the coverage -----------------------------------------


APAC = (Filter(column="region", op="=", value="APAC"),)


@pytest.mark.parametrize(
    ("q", "found", "answered"),
    [
        (
            question("apac_defects", filters=APAC).model_copy(update={"dimensions": DIMS}),
            "null_spike",
            1,
        ),
        (
            Question(
                metric=Metric(table="weekly", numerator=Aggregate(fn="sum", column="revenue")),
                periods=Periods(period_column="week", baseline="w1", comparison="w2"),
                dimensions=DIMS,
            ),
            "null_spike",
            1,
        ),
        (question("nan_revenue").model_copy(update={"dimensions": DIMS}), "non_finite_values", 2),
    ],
    ids=["date_periods", "label_periods", "non_finite"],
)
def test_the_question_check_counts_what_the_row_checks_count(env, q, found, answered):
    """The question's check reads the rows once and counts there what the coverage query (label
    periods: the null check's query) and the NaN and infinity counts count: the checks then
    read the table ``answered`` times less, and their issues are the same, numbers and the SQL
    they show included."""
    from tasks.engine.answerable import check_answerable

    table = q.metric.table
    passes = env.ctx.passes  # the siblings' ledger too

    def read(during: Callable[[ToolContext], Any]) -> tuple[Any, int]:
        twin, before = env.ctx.sibling(), passes.by_table().get(table, 0)
        try:
            return during(twin), passes.by_table()[table] - before
        finally:
            twin.close()

    expected, alone = read(lambda c: check_quality(c, q, DIMS))
    assert found in kinds(expected)
    _, asked = read(lambda c: check_answerable(c, q))
    got, after = read(lambda c: (check_answerable(c, q), check_quality(c, q, DIMS))[1])
    assert after - asked == alone - answered
    assert got == expected

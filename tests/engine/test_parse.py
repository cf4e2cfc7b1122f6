"""What users write (metrics, filters, periods, metrics.yaml) becomes the engine's input models.

Schemas come from real DuckDB files built by the real loader: the bundled demo data (events
joined to users by user_id) and a small ``misc`` database with booleans, timestamps, several
date columns, a table without dates and a high-cardinality text column.
"""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest

from sql_tools import Schema, ToolContext, ToolInputError
from tasks.engine.parse import (
    MetricDef,
    build_question,
    default_dimensions,
    detect_time_column,
    load_metrics,
    parse_filter,
    parse_metric,
    parse_period,
)
from tasks.engine.spec import DateRange

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
WEEK_BEFORE = "2024-03-18:2024-03-24"
LAST_WEEK = "2024-03-25..2024-03-31"
DEMO_DIMS = ["platform", "app_version", "country", "users.plan", "users.signup_channel"]


def _schema(db: Path) -> Schema:
    with ToolContext(db) as ctx:
        return ctx.schema


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    """events (date, user_id, platform, app_version, country, sessions, purchases, revenue)
    joined to users (user_id, plan, signup_channel, signup_date)."""
    from tasks.ingest.load import load_files

    root = tmp_path_factory.mktemp("demo")
    paths = [shutil.copy(DEMO / n, root / n) for n in ("events.csv", "users.csv")]
    load_files([Path(p) for p in paths], root / "demo.duckdb")
    return _schema(root / "demo.duckdb")


@pytest.fixture(scope="module")
def misc(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    """facts (three date/timestamp columns, a boolean), clicks (one timestamp), plain (no dates)."""
    from tasks.ingest.load import load_files

    root = tmp_path_factory.mktemp("misc")
    texts = {
        "facts": "day,seen_at,active,score,label,closed_on\n"
        "2024-01-01,2024-01-01 09:00:00,true,1.5,a,2024-01-02\n"
        "2024-01-02,2024-01-02 10:30:00,false,2.5,b,2024-01-03\n",
        "clicks": "ts,page,clicks\n2024-01-01 09:00:00,home,3\n2024-01-02 09:00:00,cart,4\n",
        "plain": "k,city,tier,const\n"
        + "".join(f"{i},c{i % 1001},t{i % 3},x\n" for i in range(2100)),
    }
    paths = []
    for stem, text in texts.items():
        p = root / f"{stem}.csv"
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    load_files(paths, root / "misc.duckdb")
    return _schema(root / "misc.duckdb")


def _error(call, *args, **kwargs) -> ToolInputError:
    """Run ``call``, expect a ToolInputError with a one-line message, return it."""
    with pytest.raises(ToolInputError) as info:
        call(*args, **kwargs)
    err = info.value
    assert "\n" not in err.message
    return err


# --------------------------------------------------------------------------------------------
# parse_metric
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "table", "numerator", "denominator", "expression"),
    [
        ("sum(revenue)", None, ("sum", "revenue"), None, "sum(revenue)"),
        ("  AVG ( Revenue ) ", None, ("avg", "revenue"), None, "avg(revenue)"),
        ("Count ( * )", "events", ("count", None), None, "count(*)"),
        ("count(user_id)", "events", ("count", "user_id"), None, "count(user_id)"),
        (
            "count(DISTINCT user_id)",
            "events",
            ("count_distinct", "user_id"),
            None,
            "count(distinct user_id)",
        ),
        (
            "sum(purchases)/sum(sessions)",
            None,
            ("sum", "purchases"),
            ("sum", "sessions"),
            "sum(purchases) / sum(sessions)",
        ),
        (
            "sum(revenue) / count(distinct users.plan)",
            None,
            ("sum", "revenue"),
            ("count_distinct", "users.plan"),
            "sum(revenue) / count(distinct users.plan)",
        ),
        (
            "count(distinct USERS . Plan)",
            "Events",
            ("count_distinct", "users.plan"),
            None,
            "count(distinct users.plan)",
        ),
        ("sum(events.revenue)", None, ("sum", "revenue"), None, "sum(revenue)"),
        ('sum("revenue")', None, ("sum", "revenue"), None, "sum(revenue)"),
        ('sum("events"."revenue")', None, ("sum", "revenue"), None, "sum(revenue)"),
    ],
)
def test_metric_forms(demo, text, table, numerator, denominator, expression):
    m = parse_metric(text, demo, table)
    assert m.table == "events"
    assert (m.numerator.fn, m.numerator.column) == numerator
    if denominator is None:
        assert m.denominator is None
    else:
        assert (m.denominator.fn, m.denominator.column) == denominator
    assert m.expression == expression


def test_metric_kinds_grain_filters_and_name(demo):
    f = parse_filter("platform=ios", demo, "events")
    m = parse_metric("sum(revenue)", demo, grain="Day", filters=[f], name="rev")
    assert (m.grain, m.filters, m.name, m.kind) == ("day", (f,), "rev", "additive")
    assert parse_metric("sum(purchases) / sum(sessions)", demo).kind == "ratio"
    assert parse_metric("avg(revenue)", demo).kind == "ratio"
    assert parse_metric("count(distinct user_id)", demo, "events").kind == "distinct"


def test_metric_table_inferred_from_its_columns(demo):
    assert parse_metric("count(distinct plan)", demo).table == "users"
    assert parse_metric("sum(sessions)", demo).table == "events"


def test_metric_on_several_tables_asks_for_table(demo):
    err = _error(parse_metric, "count(*)", demo)
    assert err.code == "invalid_arguments"
    assert "--table" in err.message
    assert err.details["valid_values"] == ["events", "users"]


def test_metric_column_in_no_table_names_the_closest_and_its_columns(demo):
    err = _error(parse_metric, "sum(revnue)", demo)
    assert err.code == "unknown_column"
    assert "'revnue'" in err.message and "closest: 'revenue' in table 'events'" in err.message
    assert "revenue" in err.details["valid_values"] and "events" not in err.details["valid_values"]


def test_metric_column_like_no_column_lists_tables(demo):
    err = _error(parse_metric, "sum(xyzzy)", demo)
    assert err.code == "unknown_column"
    assert err.details["valid_values"] == ["events", "users"]


def test_metric_unknown_column_lists_valid_columns(demo):
    err = _error(parse_metric, "sum(revnue)", demo, "events")
    assert err.code == "unknown_column"
    assert "'revnue'" in err.message
    assert {"revenue", "sessions", "users.plan"} <= set(err.details["valid_values"])
    assert "revenue" in err.message


def test_metric_unknown_table(demo):
    err = _error(parse_metric, "sum(revenue)", demo, "evnts")
    assert err.code == "unknown_table"
    assert "'evnts'" in err.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("sum(revenue) + 1", "at character 14: expected '/' or the end, found '+'"),
        ("sum(revenue); drop table events", "at character 13: expected '/' or the end, found ';'"),
        ("sum(revenue) -- comment", "found '-'"),
        ("sum(case when revenue > 0 then 1 end)", "at character 10: expected ')', found 'when'"),
        ("sum(revenue * 2)", "found '*'"),
        ("median(revenue)", "unknown function 'median'; expected sum, avg or count"),
        ("count(distinct *)", "expected a column after distinct, found '*'"),
        ("sum(*)", "expected a column name, found '*'"),
        ("sum(1)", "found number 1"),
        ("sum(sum(revenue))", "nested function 'sum'"),
        ("sum(revenue", "expected ')', found the end of the text"),
        ("sum(revenue))", "found ')'"),
        ("(sum(revenue)", "found '('"),
        ("sum(purchases) / sum(sessions) / count(*)", "one '/' at most"),
        ("revenue", "expected an aggregate"),
        ('sum("rev', "unterminated quoted name"),
        ('sum("")', "empty column name"),
        ("", "metric is empty"),
        ("   ", "metric is empty"),
    ],
)
def test_metric_syntax_errors_name_position_and_expectation(demo, text, fragment):
    err = _error(parse_metric, text, demo, "events")
    assert err.code == "invalid_arguments"
    assert err.details["field"] == "metric"
    assert fragment in err.message


@pytest.mark.parametrize(
    ("text", "column"),
    [("sum(platform)", "'platform' is text"), ("avg(signup_channel)", "'signup_channel' is text")],
)
def test_sum_and_avg_need_numbers(demo, text, column):
    err = _error(parse_metric, text, demo)
    assert err.code == "type_mismatch"
    assert column in err.message and "numeric" in err.message


def test_quoted_name_escape_reaches_the_lookup(demo):
    err = _error(parse_metric, 'sum("a""b")', demo, "events")
    assert err.code == "unknown_column"
    assert "'a\"b'" in err.message


def test_grain_other_than_day_is_refused(demo):
    err = _error(parse_metric, "sum(revenue)", demo, grain="week")
    assert err.details["field"] == "grain"
    assert "'week'" in err.message


# --------------------------------------------------------------------------------------------
# parse_filter
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "column", "op", "value"),
    [
        ("platform=ios", "platform", "=", "ios"),
        ("PLATFORM = ios ", "platform", "=", "ios"),
        ("events.platform=ios", "platform", "=", "ios"),
        ('platform != "ios"', "platform", "!=", "ios"),
        ("platform<>ios", "platform", "!=", "ios"),
        ("sessions<3", "sessions", "<", 3),
        ("sessions <= 2", "sessions", "<=", 2),
        ("revenue>0", "revenue", ">", 0),
        ("revenue >= 1.5", "revenue", ">=", 1.5),
        ("revenue>=-2e3", "revenue", ">=", -2000.0),
        ("country in US, GB,IN", "country", "in", ["US", "GB", "IN"]),
        ("country NOT IN US", "country", "not_in", ["US"]),
        ("sessions between 1,3", "sessions", "between", [1, 3]),
        ("date between 2024-03-01, 2024-03-07", "date", "between", ["2024-03-01", "2024-03-07"]),
        ("date>=2024-03-01", "date", ">=", "2024-03-01"),
        ("users.plan=pro", "users.plan", "=", "pro"),
        ("users.plan is null", "users.plan", "is_null", None),
        ("users.plan IS NOT NULL", "users.plan", "not_null", None),
        ("users.plan not null", "users.plan", "not_null", None),
        ("platform contains io", "platform", "contains", "io"),
        ('country = "United, States "', "country", "=", "United, States "),
        ('country in "a,b", c', "country", "in", ["a,b", "c"]),
        ('"platform"="say ""hi"""', "platform", "=", 'say "hi"'),
    ],
)
def test_filter_forms_with_typed_values(demo, text, column, op, value):
    f = parse_filter(text, demo, "events")
    assert (f.column, f.op, f.value) == (column, op, value)
    assert type(f.value) is type(value)


@pytest.mark.parametrize(
    ("text", "column", "op", "value"),
    [
        ("active=TRUE", "active", "=", True),
        ("active != false", "active", "!=", False),
        ("seen_at>=2024-01-01 10:00:00", "seen_at", ">=", "2024-01-01 10:00:00"),
        ("seen_at<2024-01-02", "seen_at", "<", "2024-01-02"),
    ],
)
def test_filter_booleans_and_timestamps(misc, text, column, op, value):
    f = parse_filter(text, misc, "facts")
    assert (f.column, f.op, f.value) == (column, op, value)


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("platform ios", "invalid_operator", "expected an operator after 'platform'"),
        ("= ios", "invalid_value", "expected a column name"),
        ("", "invalid_value", "filter is empty"),
        ("platform=", "invalid_value", "'=' needs a value"),
        ("country in", "invalid_value", "'in' needs a value"),
        ("platform=ios,android", "invalid_value", "use 'in' for a list"),
        ("country in US,,GB", "invalid_value", "empty value"),
        ('platform="ios', "invalid_value", "unterminated quoted value"),
        ('platform="ios"x', "invalid_value", "text after a quoted value"),
        ("sessions between 1", "invalid_value", "between takes two values"),
        ("platform is null now", "invalid_value", "'is null' takes no value"),
        ("revenue=1e999", "invalid_value", "not a finite number"),
        ("sessions=abc", "type_mismatch", "'abc' is not a number"),
        ("sessions in 1,x", "type_mismatch", "'x' is not a number"),
        ("date>2024-13-01", "type_mismatch", "'2024-13-01' is not an ISO date"),
        ("revenue contains 1", "type_mismatch", "contains needs a text column"),
    ],
)
def test_bad_filters_say_what_is_wrong(demo, text, code, fragment):
    err = _error(parse_filter, text, demo, "events")
    assert err.code == code
    assert fragment in err.message


def test_filter_boolean_needs_true_or_false(misc):
    err = _error(parse_filter, "active=yes", misc, "facts")
    assert err.code == "type_mismatch"
    assert "true or false" in err.message


def test_filter_unknown_column_lists_valid_ones(demo):
    err = _error(parse_filter, "plaform=ios", demo, "events")
    assert err.code == "unknown_column"
    assert "'plaform'" in err.message
    assert "platform" in err.details["valid_values"]


# --------------------------------------------------------------------------------------------
# parse_period and detect_time_column
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("2024-03-18:2024-03-24", date(2024, 3, 18), date(2024, 3, 24)),
        ("2024-03-18..2024-03-24", date(2024, 3, 18), date(2024, 3, 24)),
        (" 2024-03-18 .. 2024-03-24 ", date(2024, 3, 18), date(2024, 3, 24)),
        ("2024-02-29", date(2024, 2, 29), date(2024, 2, 29)),
    ],
)
def test_period_date_ranges_are_inclusive(text, start, end):
    p = parse_period(text)
    assert p == DateRange(start=start, end=end)
    assert p.days == (end - start).days + 1


@pytest.mark.parametrize(
    ("text", "label"), [(" week 12 ", "week 12"), ("2024-W12", "2024-W12"), ("2024-03", "2024-03")]
)
def test_period_labels(text, label):
    assert parse_period(text) == label


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2024-13-01:2024-13-07", "'2024-13-01' is not a valid date"),
        ("2023-02-29", "'2023-02-29' is not a valid date"),
        ("2024-03-07:2024-03-01", "ends (2024-03-01) before it starts (2024-03-07)"),
        ("2024-03-01 2024-03-07", "expected YYYY-MM-DD"),
        ("2024-3-1", "expected YYYY-MM-DD"),
        ("", "period is empty"),
        ("x" * 201, "at most 200 characters"),
    ],
)
def test_bad_periods(text, fragment):
    err = _error(parse_period, text)
    assert err.code == "invalid_period"
    assert fragment in err.message


def test_detect_time_column(demo, misc):
    assert detect_time_column(demo, "events") == "date"
    assert detect_time_column(demo, "USERS") == "signup_date"
    assert detect_time_column(misc, "clicks") == "ts"


def test_detect_time_column_several(misc):
    err = _error(detect_time_column, misc, "facts")
    assert "--time-column" in err.message
    assert err.details["valid_values"] == ["day", "seen_at", "closed_on"]


def test_detect_time_column_none(misc):
    err = _error(detect_time_column, misc, "plain")
    assert err.message == "table 'plain' has no date column; pass --time-column or --period-column"


# --------------------------------------------------------------------------------------------
# default_dimensions
# --------------------------------------------------------------------------------------------


def test_default_dimensions_on_demo(demo):
    # user_id is the join key, sessions/purchases/revenue are measures, dates are time columns
    assert default_dimensions(demo, "events", exclude=["revenue", "date"]) == DEMO_DIMS
    assert default_dimensions(demo, "events", exclude=["PLATFORM", "users.plan"]) == [
        "app_version",
        "country",
        "users.signup_channel",
    ]
    assert default_dimensions(demo, "users", exclude=[]) == ["plan", "signup_channel"]


def test_default_dimensions_skip_high_cardinality_and_constants(misc):
    # city: 1,001 distinct values; const: one value; k: an identifier
    assert default_dimensions(misc, "plain", exclude=[]) == ["tier"]
    assert default_dimensions(misc, "facts", exclude=[]) == ["active", "label"]


# --------------------------------------------------------------------------------------------
# build_question
# --------------------------------------------------------------------------------------------


def _ask(schema: Schema, **kwargs):
    args = {"metric": "sum(revenue)", "baseline": WEEK_BEFORE, "comparison": LAST_WEEK}
    return build_question(schema, **{**args, **kwargs})


def test_question_defaults(demo):
    q = _ask(demo)
    assert q.metric.table == "events" and q.metric.expression == "sum(revenue)"
    assert q.periods.time_column == "date"
    assert q.periods.baseline == DateRange(start=date(2024, 3, 18), end=date(2024, 3, 24))
    assert q.periods.comparison == DateRange(start=date(2024, 3, 25), end=date(2024, 3, 31))
    assert q.dimensions == tuple(DEMO_DIMS)
    assert (q.max_depth, q.min_support) == (None, 0.001)  # None: the engine's own depth


def test_question_dimensions_filters_and_knobs(demo):
    q = _ask(
        demo,
        metric="sum(purchases) / sum(sessions)",
        dimensions="platform, USERS.plan,events.country, platform",
        filters=["country in US,GB"],
        grain="day",
        max_depth=2,
        min_support=0.01,
    )
    assert q.dimensions == ("platform", "users.plan", "country")
    assert [(f.column, f.op, f.value) for f in q.metric.filters] == [
        ("country", "in", ["US", "GB"])
    ]
    assert (q.metric.grain, q.max_depth, q.min_support) == ("day", 2, 0.01)
    assert _ask(demo, dimensions=["app_version"]).dimensions == ("app_version",)


def test_question_default_dimensions_skip_pinned_filter_columns(demo):
    q = _ask(demo, filters=["platform=ios"])
    assert q.dimensions == ("app_version", "country", "users.plan", "users.signup_channel")


def test_question_with_period_labels(demo):
    q = _ask(demo, period_column="Country", baseline=" US ", comparison="GB")
    assert (q.periods.period_column, q.periods.time_column) == ("country", None)
    assert (q.periods.baseline, q.periods.comparison) == ("US", "GB")
    assert "country" not in q.dimensions


def test_question_with_explicit_timestamp_column(misc):
    q = build_question(
        misc,
        metric="sum(score)",
        time_column="seen_at",
        baseline="2024-01-01",
        comparison="2024-01-02",
    )
    assert q.periods.time_column == "seen_at"
    assert q.periods.baseline.days == 1


@pytest.mark.parametrize(
    ("kwargs", "code", "fragment"),
    [
        (
            {"comparison": "2024-03-20..2024-03-31"},
            "invalid_period",
            "baseline 2024-03-18..2024-03-24, comparison 2024-03-20..2024-03-31): "
            "baseline and comparison periods overlap",
        ),
        ({"baseline": "last week"}, "invalid_period", "pass --period-column"),
        (
            {"period_column": "country", "baseline": "US", "comparison": "US"},
            "invalid_period",
            "same label",
        ),
        ({"time_column": "date", "period_column": "country"}, "invalid_arguments", "not both"),
        ({"time_column": "platform"}, "type_mismatch", "'platform' is text"),
        ({"max_depth": 9}, "invalid_arguments", "max_depth"),
        ({"min_support": 1.5}, "invalid_arguments", "min_support"),
        ({"dimensions": "platform,plan"}, "unknown_column", "'plan'"),
        ({"dimensions": "platform,,country"}, "invalid_arguments", "separated by commas"),
        ({"dimensions": []}, "invalid_arguments", "separated by commas"),
        ({"dimensions": "date"}, "invalid_arguments", "defines the periods"),
        ({"filters": ["platform ios"]}, "invalid_operator", "operator"),
        ({"metric": "sum(revenue) + 1"}, "invalid_arguments", "character 14"),
        ({"grain": "week"}, "invalid_arguments", "grain"),
    ],
)
def test_question_errors_are_one_line(demo, kwargs, code, fragment):
    err = _error(_ask, demo, **kwargs)
    assert err.code == code
    assert fragment in err.message


def test_question_without_a_date_column(misc):
    err = _error(
        build_question, misc, metric="count(*)", table="plain", baseline="a", comparison="b"
    )
    assert "no date column" in err.message


# --------------------------------------------------------------------------------------------
# metrics.yaml
# --------------------------------------------------------------------------------------------

METRICS_YAML = """\
metrics:
  revenue:
    expression: sum(revenue)
    table: events
    time_column: date
    grain: day
    filters: ["platform=ios"]
    dimensions: [platform, app_version, users.plan]
    description: Gross revenue
  conversion:
    expression: sum(purchases) / sum(sessions)
"""


@pytest.fixture
def metrics_file(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.yaml"
    path.write_text(METRICS_YAML, encoding="utf-8")
    return path


def test_load_metrics(metrics_file):
    defs = load_metrics(metrics_file)
    assert list(defs) == ["revenue", "conversion"]
    assert defs["revenue"] == MetricDef(
        expression="sum(revenue)",
        table="events",
        time_column="date",
        grain="day",
        filters=["platform=ios"],
        dimensions=["platform", "app_version", "users.plan"],
        description="Gross revenue",
    )
    assert defs["conversion"].table is None and defs["conversion"].dimensions is None


def test_question_from_named_metric(demo, metrics_file):
    q = _ask(demo, metric="revenue", metrics_file=metrics_file, filters=["country=US"])
    assert (q.metric.name, q.metric.expression, q.metric.grain) == (
        "revenue",
        "sum(revenue)",
        "day",
    )
    assert [(f.column, f.value) for f in q.metric.filters] == [
        ("platform", "ios"),
        ("country", "US"),
    ]
    assert q.periods.time_column == "date"
    assert q.dimensions == ("platform", "app_version", "users.plan")
    # explicit arguments win over the definition
    q2 = _ask(demo, metric="revenue", metrics_file=metrics_file, dimensions="country")
    assert q2.dimensions == ("country",)
    # an inferred table and default dimensions for a bare definition
    q3 = _ask(demo, metric="conversion", metrics_file=metrics_file)
    assert (q3.metric.name, q3.metric.table, q3.dimensions) == (
        "conversion",
        "events",
        tuple(DEMO_DIMS),
    )


def test_named_metric_from_metrics_yaml_in_current_directory(demo, metrics_file, monkeypatch):
    monkeypatch.chdir(metrics_file.parent)
    assert _ask(demo, metric="conversion").metric.name == "conversion"


def test_bare_name_without_metrics_file(demo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _error(_ask, demo, metric="revenue")
    assert "no metrics.yaml" in err.message and "sum(revenue)" in err.message


def test_unknown_metric_name_lists_names(demo, metrics_file):
    err = _error(_ask, demo, metric="revenu", metrics_file=metrics_file)
    assert "unknown metric 'revenu'" in err.message
    assert err.details["valid_values"] == ["revenue", "conversion"]


def test_named_metric_table_conflict_and_bad_columns(demo, metrics_file, tmp_path):
    err = _error(_ask, demo, metric="revenue", metrics_file=metrics_file, table="users")
    assert "differs from the metric's table 'events'" in err.message
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics:\n  m:\n    expression: sum(revenue)\n    filters: [plan=pro]\n")
    err = _error(_ask, demo, metric="m", metrics_file=bad)
    assert err.code == "unknown_column" and "'plan'" in err.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("metrics: [unclosed\n", "invalid YAML at line 2"),
        ("", "expected a mapping with a 'metrics' key (and optionally 'review')"),
        ("- revenue\n", "expected a mapping with a 'metrics' key (and optionally 'review')"),
        (
            "metrics: {}\nextra: 1\n",
            "expected a mapping with a 'metrics' key (and optionally 'review')",
        ),
        ("metrics: [a, b]\n", "'metrics' must be a non-empty mapping"),
        ("metrics:\n  rev: sum(revenue)\n", "metric 'rev' must be a mapping"),
        ("metrics:\n  my rev:\n    expression: sum(revenue)\n", "metric name 'my rev'"),
        (
            "metrics:\n  rev:\n    expresion: sum(revenue)\n",
            "metric 'rev': unknown key 'expresion'",
        ),
        (
            "metrics:\n  rev:\n    expression: sum(revenue)\n    colour: red\n",
            "metric 'rev': unknown key 'colour'",
        ),
        ("metrics:\n  rev:\n    table: events\n", "metric 'rev': missing key 'expression'"),
        (
            "metrics:\n  rev:\n    expression: sum(revenue)\n    grain: week\n",
            "metric 'rev': grain",
        ),
        (
            "metrics:\n  rev:\n    expression: sum(revenue)\n    filters: platform=ios\n",
            "metric 'rev': filters",
        ),
        (
            "metrics:\n  rev:\n    expression: sum(revenue) + 1\n",
            "metric 'rev': invalid metric 'sum(revenue) + 1' at character 14",
        ),
        (
            "metrics:\n  rev:\n    expression: sum(revenue)\n    filters: [platform ios]\n",
            "metric 'rev': invalid filter 'platform ios'",
        ),
    ],
)
def test_bad_metrics_files(tmp_path, text, fragment):
    path = tmp_path / "metrics.yaml"
    path.write_text(text, encoding="utf-8")
    err = _error(load_metrics, path)
    assert str(path) in err.message
    assert fragment in err.message


def test_missing_and_unreadable_metrics_files(tmp_path):
    err = _error(load_metrics, tmp_path / "nope.yaml")
    assert "nope.yaml" in err.message and "not found" in err.message
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("metrics:\n  caf\xe9: {}\n".encode("latin-1"))
    err = _error(load_metrics, latin)
    assert "latin.yaml" in err.message and "cannot read" in err.message


def test_metrics_file_may_carry_the_weekly_review_section(tmp_path):
    from tasks.engine.parse import load_metrics

    f = tmp_path / "metrics.yaml"
    f.write_text("metrics:\n  revenue:\n    expression: sum(revenue)\nreview:\n  data: [x.csv]\n")
    assert list(load_metrics(f)) == ["revenue"]


# --------------------------------------------------------------------------------------------
# period lengths
# --------------------------------------------------------------------------------------------


def _month_end(year: int, month: int) -> date:
    return date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)


def _calendar(year: int, month: int, months: int) -> str:
    """``months`` whole calendar months from ``month`` of ``year``."""
    last = month + months - 1
    return f"{date(year, month, 1)}:{_month_end(year + (last - 1) // 12, (last - 1) % 12 + 1)}"


@pytest.mark.parametrize("seed", range(6))
def test_totals_over_calendar_periods_of_natural_lengths_are_compared_with_a_note(demo, seed):
    import random

    from tasks.engine.answerable import _check_lengths
    from tasks.engine.lengths import length_notes

    rng = random.Random(seed)
    months = rng.choice([1, 3, 12])  # months, quarters, years
    year = rng.randint(2001, 2030)
    first = rng.choice([1, 4, 7, 10]) if months == 3 else rng.randint(1, 12)
    nxt = first + months
    baseline = _calendar(year, first, months)
    comparison = _calendar(year + (nxt - 1) // 12, (nxt - 1) % 12 + 1, months)
    q = _ask(demo, baseline=baseline, comparison=comparison)
    b, c = q.periods.baseline, q.periods.comparison
    _check_lengths(q)  # never refused
    notes = length_notes(q)
    if b.days == c.days:
        assert notes == []
        return
    diff = abs(b.days - c.days)
    assert len(notes) == 1 and f"differ in length by {diff} day" in notes[0], notes
    assert "--grain day" in notes[0]
    assert length_notes(_ask(demo, baseline=baseline, comparison=comparison, grain="day")) == []


def test_february_against_march_and_leap_years(demo):
    from tasks.engine.lengths import length_notes

    for year in (2015, 2016, 2023, 2024):
        q = _ask(demo, baseline=_calendar(year, 2, 1), comparison=_calendar(year, 3, 1))
        diff = 31 - _month_end(year, 2).day
        assert f"by {diff} days" in length_notes(q)[0]
    q = _ask(demo, baseline="2015-01-01:2015-12-31", comparison="2016-01-01:2016-12-31")
    assert "by 1 day (baseline 365 days, comparison 366 days)" in length_notes(q)[0]


@pytest.mark.parametrize("seed", range(6))
def test_totals_over_other_periods_of_unequal_lengths_are_refused(demo, seed):
    import random

    from tasks.engine.answerable import _check_lengths

    rng = random.Random(seed)
    year, month = rng.randint(2001, 2030), rng.randint(1, 10)
    start = date(year, month, 1) + timedelta(days=rng.randint(0, 1))
    b_end = start + timedelta(days=rng.randint(5, 40))
    c_start = b_end + timedelta(days=1)
    c_end = c_start + timedelta(days=(b_end - start).days + rng.choice([-3, -1, 1, 2, 9]))
    short_end = _month_end(year, month + 1) - timedelta(days=1)
    shapes = [
        (f"{start}:{b_end}", f"{c_start}:{c_end}"),  # arbitrary ranges
        # whole months against whole months of another count
        (_calendar(year, month, 1), _calendar(year, month + 1, 2)),
        # a month against the month after it, cut short by a day
        (_calendar(year, month, 1), f"{date(year, month + 1, 1)}:{short_end}"),
    ]
    for baseline, comparison in shapes:
        q = _ask(demo, baseline=baseline, comparison=comparison)
        if q.periods.baseline.days == q.periods.comparison.days:
            continue
        with pytest.raises(ToolInputError, match="equal length"):
            _check_lengths(q)
        ratio = _ask(demo, metric="sum(revenue) / sum(sessions)", baseline=baseline,
                     comparison=comparison)  # fmt: skip
        _check_lengths(ratio)

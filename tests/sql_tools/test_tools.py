"""Behaviour of the four SQL tools on a real loaded database (sales + customers + visits)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import duckdb
import pytest

from sql_tools import ToolContext
from tasks.tools import dispatch

WEEK1 = {"start": "2024-01-01", "end": "2024-01-07"}
WEEK2 = {"start": "2024-01-08", "end": "2024-01-14"}


def ok(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    is_error, payload = dispatch(ctx, name, args)
    assert not is_error, payload
    return payload


def err(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    is_error, payload = dispatch(ctx, name, args)
    assert is_error, payload
    assert set(payload) == {"error"}
    assert len(payload["error"]["message"]) <= 500
    return payload["error"]


def rerun(db, result: dict[str, Any]) -> list[tuple]:
    """Evidence is re-runnable: the reported SQL + JSON params on a plain connection to a copy."""
    copy = db.parent / f"rerun-{db.name}"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy), read_only=True)
    try:
        return con.execute(result["sql"], result["params"]).fetchall()
    finally:
        con.close()


# --- describe -------------------------------------------------------------------------------


def test_describe_lists_tables_columns_roles_and_join(ctx):
    out = ok(ctx, "metric_describe", {"response_format": "detailed"})
    tables = {t["name"]: t for t in out["tables"]}
    assert set(tables) == {"sales", "customers", "visits"}
    sales = tables["sales"]
    assert sales["row_count"] == 6
    cols = {c["name"]: c for c in sales["columns"]}
    assert list(cols) == ["day", "region", "product", "revenue", "orders", "customer_id"]
    assert cols["day"]["type"] == "DATE" and cols["day"]["role"] == "time"
    assert cols["region"]["role"] == "dimension"
    assert cols["revenue"]["role"] == "measure"
    assert cols["region"]["distinct_count"] == 4
    assert "EU" in cols["region"]["samples"]
    assert "customers.tier" in sales["joinable_columns"]
    assert {
        (k["from_table"], k["from_column"], k["to_table"], k["to_column"]) for k in out["join_keys"]
    } >= {("sales", "customer_id", "customers", "customer_id")}
    assert out["sql"] and out["elapsed_ms"] >= 0


def test_describe_one_table_concise_and_unknown_table(ctx):
    out = ok(ctx, "metric_describe", {"table": "CUSTOMERS"})
    assert [t["name"] for t in out["tables"]] == ["customers"]
    assert "samples" not in out["tables"][0]["columns"][0]
    e = err(ctx, "metric_describe", {"table": "nope"})
    assert e["code"] == "unknown_table"
    assert "customers, sales, visits" in e["message"]


# --- sample ---------------------------------------------------------------------------------


def test_sample_first_rows_in_file_order_with_counts(ctx, shop_db):
    out = ok(ctx, "metric_sample", {"table": "sales", "n": 2})
    assert [r["region"] for r in out["rows"]] == ["EU", "US"]
    assert out["matched_count"] == 6 and out["truncated"] is True
    assert "LIMIT 3" in out["sql"]
    assert len(rerun(shop_db, out)) == 3


def test_sample_seeded_is_reproducible_and_filters_apply(ctx):
    args = {
        "table": "sales",
        "n": 3,
        "seed": 7,
        "filters": [{"column": "revenue", "op": ">=", "value": 50}],
    }
    a, b = ok(ctx, "metric_sample", args), ok(ctx, "metric_sample", args)
    assert a["rows"] == b["rows"]
    assert all(r["revenue"] >= 50 for r in a["rows"])
    assert a["matched_count"] == 4 and a["truncated"] is True
    assert a["params"]["p1"] == 50


def test_sample_columns_including_joined_column(ctx):
    out = ok(
        ctx, "metric_sample", {"table": "sales", "n": 10, "columns": ["region", "customers.tier"]}
    )
    assert out["columns"] == ["region", "customers.tier"]
    assert {"region": "EU", "customers.tier": "gold"} in out["rows"]
    assert out["truncated"] is False and out["matched_count"] == 6


def test_sample_hard_cap_and_bad_n(ctx):
    assert err(ctx, "metric_sample", {"table": "sales", "n": 1001})["code"] == "limit_exceeded"
    assert err(ctx, "metric_sample", {"table": "sales", "n": 0})["code"] == "invalid_value"


# --- aggregate ------------------------------------------------------------------------------


def test_aggregate_sum_by_region_sorted_desc(ctx, shop_db):
    out = ok(
        ctx,
        "metric_aggregate",
        {
            "table": "sales",
            "measures": [{"agg": "sum", "column": "revenue"}, {"agg": "count"}],
            "group_by": ["region"],
        },
    )
    assert out["columns"] == ["region", "sum_revenue", "count"]
    assert [(r["region"], r["sum_revenue"], r["count"]) for r in out["rows"]] == [
        ("US", 170.0, 2),
        ("EU", 150.0, 2),
        ("APAC", 30.0, 1),
        ("LATAM", 20.0, 1),
    ]
    assert out["matched_count"] == 4 and not out["truncated"]
    assert [r[:3] for r in rerun(shop_db, out)] == [
        ("US", 170.0, 2),
        ("EU", 150.0, 2),
        ("APAC", 30.0, 1),
        ("LATAM", 20.0, 1),
    ]


def test_aggregate_by_joined_column_and_count_distinct(ctx):
    out = ok(
        ctx,
        "metric_aggregate",
        {
            "table": "sales",
            "group_by": ["customers.tier"],
            "measures": [
                {"agg": "sum", "column": "revenue"},
                {"agg": "count_distinct", "column": "region"},
            ],
            "order_by": {"by": "customers.tier", "direction": "asc"},
        },
    )
    assert [
        (r["customers.tier"], r["sum_revenue"], r["count_distinct_region"]) for r in out["rows"]
    ] == [("bronze", 20.0, 1), ("gold", 150.0, 1), ("silver", 200.0, 2)]
    assert any("not additive" in n for n in out["notes"])


def test_aggregate_limit_truncates_but_counts_all_groups(ctx):
    out = ok(
        ctx,
        "metric_aggregate",
        {
            "table": "sales",
            "measures": [{"agg": "sum", "column": "orders"}],
            "group_by": ["region"],
            "limit": 1,
        },
    )
    assert len(out["rows"]) == 1 and out["rows"][0]["region"] == "US"
    assert out["matched_count"] == 4 and out["truncated"] is True


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"column": "region", "op": "=", "value": "EU"}, 2),
        ({"column": "region", "op": "!=", "value": "EU"}, 4),
        ({"column": "revenue", "op": "<", "value": 50}, 2),
        ({"column": "revenue", "op": "<=", "value": 50}, 3),
        ({"column": "revenue", "op": ">", "value": 80}, 2),
        ({"column": "revenue", "op": ">=", "value": 80}, 3),
        ({"column": "region", "op": "in", "value": ["EU", "APAC"]}, 3),
        ({"column": "region", "op": "not_in", "value": ["EU", "APAC"]}, 3),
        ({"column": "day", "op": "between", "value": ["2024-01-02", "2024-01-08"]}, 3),
        ({"column": "product", "op": "contains", "value": "dg"}, 4),
        ({"column": "product", "op": "contains", "value": "%"}, 1),
        ({"column": "product", "op": "contains", "value": "_"}, 1),
        ({"column": "customers.tier", "op": "=", "value": "silver"}, 3),
    ],
)
def test_filter_operators(ctx, flt, expected):
    out = ok(
        ctx,
        "metric_aggregate",
        {"table": "sales", "measures": [{"agg": "count"}], "filters": [flt]},
    )
    assert out["rows"][0]["count"] == expected


def test_null_filters(ctx):
    def count(op):
        out = ok(
            ctx,
            "metric_aggregate",
            {
                "table": "visits",
                "measures": [{"agg": "count"}],
                "filters": [{"column": "note", "op": op}],
            },
        )
        return out["rows"][0]["count"]

    assert (count("is_null"), count("not_null")) == (3, 2)


def test_case_insensitive_names_resolve_to_canonical(ctx):
    out = ok(
        ctx,
        "metric_aggregate",
        {
            "table": "SALES",
            "measures": [{"agg": "sum", "column": "REVENUE"}],
            "group_by": ["Region"],
        },
    )
    assert out["table"] == "sales" and out["columns"] == ["region", "sum_revenue"]


def test_type_mismatches_are_named(ctx):
    e = err(
        ctx,
        "metric_aggregate",
        {"table": "sales", "measures": [{"agg": "sum", "column": "region"}]},
    )
    assert e["code"] == "type_mismatch" and "'region' is text" in e["message"]
    e = err(
        ctx,
        "metric_aggregate",
        {
            "table": "sales",
            "measures": [{"agg": "count"}],
            "filters": [{"column": "revenue", "op": ">", "value": "abc"}],
        },
    )
    assert e["code"] == "type_mismatch" and "revenue" in e["message"]
    e = err(
        ctx,
        "metric_aggregate",
        {
            "table": "sales",
            "measures": [{"agg": "count"}],
            "filters": [{"column": "region", "op": "=", "value": 1}],
        },
    )
    assert e["code"] == "type_mismatch" and "region" in e["message"]


# --- compare_periods ------------------------------------------------------------------------


def test_compare_periods_per_segment(ctx, shop_db):
    out = ok(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": WEEK2,
            "group_by": ["region"],
        },
    )
    assert out["total"] == {
        "baseline": 200.0,
        "comparison": 170.0,
        "delta": -30.0,
        "relative_delta": -0.15,
    }
    rows = [
        (r["region"], r["baseline"], r["comparison"], r["delta"], r["status"]) for r in out["rows"]
    ]
    assert rows == [
        ("EU", 100.0, 50.0, -50.0, "both"),
        ("APAC", None, 30.0, 30.0, "new"),
        ("LATAM", 20.0, None, -20.0, "gone"),
        ("US", 80.0, 90.0, 10.0, "both"),
    ]
    eu = out["rows"][0]
    assert eu["relative_delta"] == -0.5
    assert eu["share_of_delta"] == pytest.approx(50 / 30)
    assert sum(r["share_of_delta"] for r in out["rows"]) == pytest.approx(1.0)
    assert out["additive"] is True
    assert [r[:4] for r in rerun(shop_db, out)] == [
        ("EU", 100.0, 50.0, -50.0),
        ("APAC", None, 30.0, 30.0),
        ("LATAM", 20.0, None, -20.0),
        ("US", 80.0, 90.0, 10.0),
    ]


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ({"agg": "sum", "column": "revenue"}, (60.0, 31.0)),
        ({"agg": "count", "column": "revenue"}, (3, 2)),
        ({"agg": "count"}, (4, 4)),
    ],
)
def test_compare_periods_totals_cover_every_segment(tmp_path, metric, expected):
    """The totals of an additive metric are over every row that passes the filters: rows
    whose segment is null, segments with only null values and segments past the limit too."""
    from tasks.ingest.load import load_files

    csv = tmp_path / "orders.csv"
    csv.write_text(
        "day,region,channel,revenue\n"
        "2024-01-01,EU,web,10\n2024-01-02,,web,20\n2024-01-03,US,web,\n2024-01-03,US,web,30\n"
        "2024-01-01,EU,shop,1000\n"
        "2024-01-08,EU,web,5\n2024-01-09,,web,\n2024-01-10,APAC,web,\n2024-01-10,US,web,26\n"
        "2024-01-20,EU,web,7000\n"
    )
    load_files([csv], tmp_path / "orders.duckdb")
    with ToolContext(tmp_path / "orders.duckdb") as c:
        out = ok(
            c,
            "metric_compare_periods",
            {
                "table": "orders",
                "metric": metric,
                "time_column": "day",
                "baseline": WEEK1,
                "comparison": WEEK2,
                "group_by": ["region"],
                "filters": [{"column": "channel", "op": "=", "value": "web"}],
                "limit": 1,
            },
        )
    assert (out["total"]["baseline"], out["total"]["comparison"]) == expected
    assert len(out["rows"]) == 1 and out["truncated"] and out["matched_count"] == 4


def test_compare_periods_joined_segment_and_filter(ctx):
    out = ok(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": WEEK2,
            "group_by": ["customers.tier"],
            "filters": [{"column": "region", "op": "!=", "value": "LATAM"}],
        },
    )
    assert [(r["customers.tier"], r["delta"]) for r in out["rows"]] == [
        ("gold", -50.0),
        ("silver", 40.0),
    ]
    assert out["total"]["delta"] == -10.0


def test_compare_periods_timestamp_end_day_is_inclusive(ctx):
    out = ok(
        ctx,
        "metric_compare_periods",
        {
            "table": "visits",
            "metric": {"agg": "sum", "column": "visits"},
            "time_column": "ts",
            "baseline": WEEK1,
            "comparison": WEEK2,
        },
    )
    assert out["total"]["baseline"] == 8 and out["total"]["comparison"] == 13


def test_compare_periods_by_period_labels(ctx):
    out = ok(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "count"},
            "period_column": "product",
            "baseline": {"label": "Widget"},
            "comparison": {"label": "Gadget"},
            "group_by": ["region"],
        },
    )
    assert out["baseline_period"] == "Widget"
    assert {(r["region"], r["status"]) for r in out["rows"]} == {("EU", "gone"), ("US", "new")}


def test_compare_periods_non_additive_metric_is_stated(ctx):
    out = ok(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "avg", "column": "revenue"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": WEEK2,
            "group_by": ["region"],
        },
    )
    assert out["additive"] is False
    assert any("not additive" in n for n in out["notes"])
    assert out["total"]["baseline"] == pytest.approx(200 / 3)


def test_compare_periods_reports_uncovered_period(ctx):
    out = ok(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "day",
            "baseline": WEEK1,
            "comparison": {"start": "2024-01-08", "end": "2024-02-29"},
        },
    )
    assert any("not fully covered" in n for n in out["notes"])


@pytest.mark.parametrize(
    ("base", "comp", "fragment"),
    [
        ({"start": "2024-13-45", "end": "2024-01-07"}, WEEK2, "ISO dates"),
        (WEEK1, {"start": "2024-01-14", "end": "2024-01-08"}, "after end"),
        ({"start": "2024-01-01", "end": "2024-01-10"}, WEEK2, "overlap"),
        ({"label": "x"}, WEEK2, "start and end"),
    ],
)
def test_compare_periods_invalid_periods(ctx, base, comp, fragment):
    e = err(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "day",
            "baseline": base,
            "comparison": comp,
        },
    )
    assert e["code"] == "invalid_period" and fragment in e["message"]


def test_compare_periods_time_column_must_be_a_date(ctx):
    e = err(
        ctx,
        "metric_compare_periods",
        {
            "table": "sales",
            "metric": {"agg": "sum", "column": "revenue"},
            "time_column": "region",
            "baseline": WEEK1,
            "comparison": WEEK2,
        },
    )
    assert e["code"] == "type_mismatch" and "'region'" in e["message"]


def test_every_result_is_self_describing(ctx):
    for name, args in [
        ("metric_describe", {}),
        ("metric_sample", {"table": "sales"}),
        ("metric_aggregate", {"table": "sales", "measures": [{"agg": "count"}]}),
        (
            "metric_compare_periods",
            {
                "table": "sales",
                "metric": {"agg": "count"},
                "time_column": "day",
                "baseline": WEEK1,
                "comparison": WEEK2,
            },
        ),
    ]:
        out = ok(ctx, name, args)
        for key in ("sql", "params", "elapsed_ms", "matched_count", "truncated"):
            assert key in out, (name, key)
        assert out["sql"].lstrip().upper().startswith(("SELECT", "WITH"))


def test_one_context_serves_many_threads(ctx):
    """Hypotheses investigated at once share a context: concurrent calls all answer, none is
    refused because the connection was busy."""
    import concurrent.futures as cf

    args = {"table": "sales", "measures": [{"agg": "sum", "column": "revenue"}],
            "group_by": ["region"]}  # fmt: skip
    with cf.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: dispatch(ctx, "metric_aggregate", args), range(64)))
    assert all(not is_error for is_error, _ in results), [p for e, p in results if e][:1]
    assert len({json.dumps(p["rows"]) for _, p in results}) == 1

"""Columns named like what the SQL computes (``baseline``, ``delta``, ``sum_revenue``, ``n``, a
common table expression's name, the private prefix itself) are read as the columns they are.

Every output of a tool's SQL has a private name (``sql_tools._names``); the rows map back to the
public fields. A cause planted on such a column is found by the engine and confirmed by the
offline planner exactly as on a plain name, and the tools answer over it, on DuckDB and Postgres.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from sql_tools import SQL_TOOLS, ToolContext
from tasks.agent.run import investigate_one, plan
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question

NAMES = [
    "baseline", "comparison", "delta", "relative_delta", "share_of_delta", "share",
    "sum_revenue", "count", "n", "value", "period", "segment", "metric", "date", "status",
    "baseline_rows", "seg", "tot", "__matched", "__dd_seg", "__dd_g0", "__dd_baseline",
    "per_row", "unit", "copies", "rows", "d0", "__day", "t0",
]  # fmt: skip
WEEKS = {
    "time_column": "day",
    "baseline": {"start": "2024-01-01", "end": "2024-01-07"},
    "comparison": {"start": "2024-01-08", "end": "2024-01-14"},
}


def sales_csv(column: str) -> str:
    """Two weeks of revenue by ``column`` (values A..D); B's revenue falls 60% in week two."""
    lines = [f'day,"{column}",revenue']
    for d in range(14):
        day = date(2024, 1, 1) + timedelta(days=d)
        for i, v in enumerate("ABCD"):
            for k in range(3):
                value = 100 + (d * 7 + i * 13 + k * 5) % 11
                lines.append(f"{day},{v},{value * (0.4 if d >= 7 and v == 'B' else 1):.2f}")
    return "\n".join(lines) + "\n"


def confirmed(ctx: ToolContext, column: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The engine's root causes and the offline planner's verdicts, revenue week over week."""
    q = build_question(
        ctx.schema, metric="sum(revenue)", table="sales", time_column="day",
        baseline="2024-01-01:2024-01-07", comparison="2024-01-08:2024-01-14",
        named_metrics=False,
    )  # fmt: skip
    analysis = analyze(ctx, q)
    planned, _, _ = plan(ctx, q, analysis)
    verdicts = [investigate_one(ctx, q, analysis, h, p).outcome.status for h, p in planned]
    return [c.segment for c in analysis.explanation.root_causes], verdicts


@pytest.mark.slow
@pytest.mark.parametrize("column", NAMES)
def test_a_cause_on_a_column_named_like_an_output_is_confirmed(make_db, column):
    with ToolContext(make_db(sales=sales_csv(column))) as ctx:
        causes, verdicts = confirmed(ctx, column)
    assert causes == [{column: "B"}]
    assert verdicts[0] == "confirmed"


def call_tool(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return SQL_TOOLS.dispatch(ctx, name, args)[1]


def compare(ctx: ToolContext, column: str, **extra: Any) -> Any:
    metric = {"agg": "sum", "column": "revenue"}
    args = {"table": "sales", "metric": metric, "group_by": [column], **WEEKS, **extra}
    return call_tool(ctx, "metric_compare_periods", args)


@pytest.mark.parametrize("column", ["baseline", "delta", "status", "__dd_g0", "__dd_matched"])
def test_tools_answer_over_a_column_named_like_an_output(make_db, column):
    with ToolContext(make_db(sales=sales_csv(column))) as ctx:
        out = compare(ctx, column)
        assert "error" not in out, out
        field = column in ("baseline", "delta", "status")
        key = f"sales.{column}" if field else column
        assert out["group_by"] == [key]
        top = out["rows"][0]
        assert top[key] == "B" and top["status"] == "both"
        assert top["baseline"] > top["comparison"] and top["delta"] < 0
        # the key written back is the column: the model can filter on what it read
        again = compare(ctx, key, filters=[{"column": key, "op": "=", "value": "B"}])
        assert [r[key] for r in again["rows"]] == ["B"]
        agg = call_tool(ctx, "metric_aggregate", {
            "table": "sales", "group_by": [column],
            "measures": [{"agg": "sum", "column": "revenue"}, {"agg": "count"}],
        })  # fmt: skip
        assert "error" not in agg, agg
        assert {r[column] for r in agg["rows"]} == set("ABCD")
        sample = call_tool(ctx, "metric_sample", {"table": "sales", "n": 3})
        assert sample["columns"] == ["day", column, "revenue"]


def test_a_column_named_like_a_measure_is_kept_apart_from_it(make_db):
    """``sum_revenue`` beside the measure sum(revenue): both are in every row, under two keys."""
    with ToolContext(make_db(sales=sales_csv("sum_revenue"))) as ctx:
        out = call_tool(ctx, "metric_aggregate", {
            "table": "sales", "group_by": ["sum_revenue"],
            "measures": [{"agg": "sum", "column": "revenue"}], "order_by": {"by": "sum_revenue"},
        })  # fmt: skip
        assert "error" not in out, out
        assert out["group_by"] == ["sales.sum_revenue"] and out["measures"] == ["sum_revenue"]
        rows = out["rows"]
        assert {r["sales.sum_revenue"] for r in rows} == set("ABCD")
        assert rows[0]["sum_revenue"] >= rows[-1]["sum_revenue"]  # ordered by the measure


def test_a_segment_with_a_zero_baseline_says_why_its_relative_delta_is_null(make_db):
    text = sales_csv("region")
    text += "2024-01-03,NEW,0\n2024-01-09,NEW,50\n2024-01-04,ZERO,0\n2024-01-10,ZERO,0\n"
    with ToolContext(make_db(sales=text)) as ctx:
        out = compare(ctx, "region")
        new = next(r for r in out["rows"] if r["region"] == "NEW")
        assert new["baseline"] == 0 and new["relative_delta"] is None
        assert (
            "relative_delta is null in 2 rows whose baseline is 0: a change from 0 has no "
            "relative size"
        ) in out["notes"]
        only = compare(ctx, "region", filters=[{"column": "region", "op": "=", "value": "NEW"}])
        assert only["total"]["relative_delta"] is None
        assert (
            "total relative_delta is null: the baseline is 0, so the change has no relative size"
        ) in only["notes"]
        plain = compare(ctx, "region", filters=[{"column": "region", "op": "=", "value": "B"}])
        assert not any("relative_delta is null" in n for n in plain["notes"])

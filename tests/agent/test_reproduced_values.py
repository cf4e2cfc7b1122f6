"""The gate re-runs a finding's evidence and compares the result as the data's values: a NaN the
data held then and holds now reproduces (so does ``-0.0`` against ``0.0``), and a changed value
does not."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sql_tools import ToolContext
from tasks.agent.gate import Gate, WriteFindingInput
from tasks.agent.ledger import Ledger, same_result, same_value
from tasks.engine.explain import analyze
from tasks.engine.parse import build_question
from tasks.tools import dispatch

NAN, INF = float("nan"), float("inf")
WEEK1 = {"start": "2024-03-01", "end": "2024-03-07"}
WEEK2 = {"start": "2024-03-08", "end": "2024-03-14"}
# revenue falls in the south; score is NaN in every east row (an average of it is NaN), and
# zero as -0.0 in the west's comparison rows
SHOP = """
CREATE TABLE sales AS
SELECT DATE '2024-03-01' + d::INTEGER AS day, region, channel,
       (100 + (hash(d, region, channel) % 7)::INTEGER)::DOUBLE
         * CASE WHEN d >= 7 AND region = 'south' THEN 0.3 ELSE 1 END AS revenue,
       CASE WHEN region = 'east' THEN 'NaN'::DOUBLE
            WHEN region = 'west' AND d >= 7 THEN -0.0 ELSE 1.0 + d END AS score
FROM range(14) AS r(d), (VALUES ('north'), ('south'), ('east'), ('west')) AS g(region),
     (VALUES ('web'), ('app')) AS c(channel)
"""


def compare(metric: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "table": "sales", "metric": metric, "time_column": "day",
        "baseline": WEEK1, "comparison": WEEK2, "group_by": ["region"], **extra,
    }  # fmt: skip


# evidence whose results hold a NaN: an average over NaN rows (the whole table's, and the east's
# alone), a maximum over them, and a sum over the west, whose comparison is -0.0
NAN_EVIDENCE = {
    "avg_total": ("metric_compare_periods", compare({"agg": "avg", "column": "score"})),
    "max_total": ("metric_compare_periods", compare({"agg": "max", "column": "score"})),
    "avg_east": (
        "metric_compare_periods",
        compare(
            {"agg": "avg", "column": "score"},
            filters=[{"column": "region", "op": "in", "value": ["east", "south"]}],
        ),
    ),
    "negative_zero": (
        "metric_compare_periods",
        compare(
            {"agg": "sum", "column": "score"},
            filters=[{"column": "region", "op": "in", "value": ["west", "south"]}],
        ),
    ),
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("nan") / "shop.duckdb"
    con = duckdb.connect(str(db))
    con.execute(SHOP)
    con.close()
    return db


def holds_nan(value: Any) -> bool:
    if isinstance(value, dict):
        return any(holds_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_nan(v) for v in value)
    return isinstance(value, float) and math.isnan(value)


def judged(recorded_on: Path, judged_on: Path, evidence: str) -> tuple[str, str | None]:
    """A finding on the south's revenue citing ``evidence`` run on ``recorded_on``, judged by
    a gate re-running it on ``judged_on``: (its status, its critique)."""
    ledger = Ledger()
    tool, args = NAN_EVIDENCE[evidence]
    with ToolContext(recorded_on) as ctx:
        is_error, payload = dispatch(ctx, tool, args)
        assert not is_error
        if evidence != "negative_zero":
            assert holds_nan(payload), "the evidence must hold a NaN"
        ledger.record("h1", tool, args, is_error, payload, 1.0)
        sums = compare({"agg": "sum", "column": "revenue"})
        _, revenue = dispatch(ctx, "metric_compare_periods", sums)
        ledger.record("h1", "metric_compare_periods", sums, False, revenue, 1.0)
    south = next(r for r in revenue["rows"] if r["region"] == "south")
    with ToolContext(judged_on) as ctx:
        q = build_question(
            ctx.schema, metric="sum(revenue)", table="sales", time_column="day",
            baseline="2024-03-01:2024-03-07", comparison="2024-03-08:2024-03-14",
            dimensions=["region", "channel"],
        )  # fmt: skip
        analysis = analyze(ctx, q)
        causes = analysis.explanation.root_causes
        [cause] = [c for c in causes if c.segment == {"region": "south"}]
        finding = Gate(ctx, q, analysis, ledger).submit(
            "h1",
            WriteFindingInput(
                segment={"region": "south"},
                category=cause.effect,
                title="The south's revenue fell",
                summary="Revenue in the south fell to a third.",
                evidence=["q-1", "q-2"],
                baseline_value=south["baseline"],
                comparison_value=south["comparison"],
            ),
        )
    return finding.status, finding.critique


@pytest.mark.parametrize("evidence", sorted(NAN_EVIDENCE))
def test_evidence_holding_a_nan_reproduces_on_unchanged_data(shop, evidence):
    assert judged(shop, shop, evidence) == ("accepted", None)


@pytest.mark.parametrize(
    ("evidence", "change"),
    [
        ("avg_total", "UPDATE sales SET score = 1 WHERE region = 'east'"),
        ("avg_east", "UPDATE sales SET score = 2 WHERE region = 'east' AND day = '2024-03-09'"),
        ("max_total", "UPDATE sales SET score = score + 1 WHERE region = 'north'"),
        ("negative_zero", "UPDATE sales SET score = 0.5 WHERE region = 'west' AND score = 0"),
    ],
)
def test_evidence_holding_a_nan_does_not_reproduce_on_changed_data(
    shop, tmp_path, evidence, change
):
    changed = tmp_path / "changed.duckdb"
    shutil.copy(shop, changed)
    con = duckdb.connect(str(changed))
    con.execute(change)
    con.close()
    status, critique = judged(shop, changed, evidence)
    assert status == "dismissed"
    assert critique == "evidence q-1 did not reproduce: re-running it gave a different result"


def test_values_are_compared_as_the_datas_values():
    assert same_value(NAN, NAN) and same_value(-0.0, 0.0) and same_value(None, None)
    assert same_value(INF, INF) and not same_value(INF, -INF)
    assert same_value(1.0, 1.0 + 1e-12) and not same_value(1.0, 1.001)
    assert not same_value(NAN, None) and not same_value(NAN, 0.0) and not same_value(None, 0.0)
    assert not same_value(NAN, "NaN") and not same_value(NAN, INF)
    assert same_value(2, 2.0) and not same_value(10**20, 10**20 + 1)
    assert not same_value(10**400, 1.0) and same_value(10**400, 10**400)
    assert same_result(
        {"total": {"baseline": NAN, "delta": -0.0}, "rows": [[NAN, None, "a"]], "elapsed_ms": 1},
        {"total": {"baseline": NAN, "delta": 0.0}, "rows": [[NAN, None, "a"]], "elapsed_ms": 2},
    )
    assert not same_result({"rows": [[NAN, 1.0]]}, {"rows": [[NAN, 2.0]]})
    assert not same_result({"rows": [[NAN]]}, {"rows": [[NAN, NAN]]})

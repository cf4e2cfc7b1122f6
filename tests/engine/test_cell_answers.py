"""Tool calls answered from the stored cells: the hypotheses' calls, the gate's re-run of a cited
call and the report's per-day numbers read no source table, and give what their SQL gives on the
source (the same rows, numbers to 1e-9, the same SQL shown).

On planted scenarios loaded by the real loader, through a real :class:`~tasks.run.Run` (whose
tools answer from its analysis's cells) beside a context of its own on the same file (the
source, every call counted). The same checks on real Postgres 16 are in
``tests/flows/test_postgres_source.py``.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from sql_tools import ToolContext
from tasks import tools as registry
from tasks.engine.explain import compare_arguments
from tasks.ingest.load import load_files
from tasks.request import Request
from tasks.run import Run
from tests.engine.test_scenarios import SCENARIOS
from tests.support.cell_calls import (
    NOT_COMPARED,
    answered_from_cells,
    charts_from_cells,
    gate_from_cells,
    planner_calls,
    qargs,
)
from tests.support.pg_source import differences
from tests.support.provenance import source_beside

# Slow end to end (planted scenarios investigated and their tool calls re-run):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

# a cause in a joined column; two causes; a missing day; a ratio of integer sums; integer sums
NAMES = ["pricing_join", "two_causes", "missing_day", "mix_shift", "uneven_drop"]


def scenario_db(tmp_path: Path, name: str) -> Path:
    db = tmp_path / "data.duckdb"
    files = sorted(p for p in (SCENARIOS / name).iterdir() if p.name != "expected.json")
    load_files(files, db)
    return db


def _source(run: Run) -> AbstractContextManager[ToolContext]:
    """The source beside the run: a second connection to its file, without its cells."""
    return source_beside(run.ctx)


@pytest.fixture(scope="module", params=NAMES)
def scenario(request, tmp_path_factory) -> tuple[str, Path]:
    name = request.param
    return name, scenario_db(tmp_path_factory.mktemp(name), name)


def test_hypotheses_calls_from_the_cells_are_what_their_sql_gives_on_the_source(scenario):
    name, db = scenario
    with Run(db, qargs(name)) as run, _source(run) as source:
        answered_from_cells(run, source, planner_calls(run))


@pytest.mark.parametrize("name", [n for n in NAMES if n != "missing_day"])  # root causes
def test_the_gate_reruns_a_cited_call_from_the_cells(tmp_path, name):
    db = scenario_db(tmp_path, name)
    with Run(db, qargs(name)) as run, _source(run) as source:
        gate_from_cells(run, source)


def test_the_report_per_day_numbers_come_from_the_cells(scenario):
    name, db = scenario
    with Run(db, qargs(name)) as run, _source(run) as source:
        charts_from_cells(run, source)


def _sales(tmp_path: Path) -> Path:
    """Two weeks of sales at eight times a day in twelve regions, with a week label; north's
    revenue rises in the second week."""
    rows = ["ts,week,region,revenue"]
    for day in range(14):
        for i, region in enumerate(["north", *(f"region_{k}" for k in range(11))]):
            for hour in range(1, 24, 3):
                revenue = 10 + i + (day + hour) % 3 + (40 if region == "north" and day >= 7 else 0)
                week = "w1" if day < 7 else "w2"
                rows.append(f"2024-03-{18 + day:02d} {hour:02d}:30:00,{week},{region},{revenue}")
    csv = tmp_path / "sales.csv"
    csv.write_text("\n".join(rows) + "\n")
    db = tmp_path / "sales.duckdb"
    load_files([csv], db)
    return db


@pytest.mark.parametrize(
    "periods",
    [
        {"time_column": "ts", "baseline": "2024-03-18:2024-03-24",
         "comparison": "2024-03-25:2024-03-31"},
        {"period_column": "week", "baseline": "w1", "comparison": "w2"},
    ],
    ids=["timestamp", "labels"],
)  # fmt: skip
def test_a_timestamp_and_period_labels_are_answered_from_the_cells(tmp_path, periods):
    """Periods of a TIMESTAMP column (a day is its rows from midnight to midnight) and of
    labels: the same calls, charts and gate, read from the cells."""
    db = _sales(tmp_path)
    args = Request(data=["-"], metric="sum(revenue)", table="sales", **periods).question()
    with Run(db, args) as run, _source(run) as source:
        assert run.ctx.schema.column("sales", "ts").kind == "timestamp"
        assert run.analysis.explanation.root_causes
        answered_from_cells(run, source, planner_calls(run))
        charts_from_cells(run, source)
        gate_from_cells(run, source)


def test_calls_the_cells_cannot_answer_read_the_source_with_the_same_answer(tmp_path):
    """Other periods, a minimum, a column outside the search, the time column's rows outside
    the periods: each reads the source, counted, as before."""
    db = scenario_db(tmp_path, "pricing_join")
    with Run(db, qargs("pricing_join")) as run, _source(run) as source:
        q = run.question
        base = compare_arguments(q)
        other = {**base, "baseline": {"start": "2024-03-11", "end": "2024-03-17"}}
        least = {**base, "metric": {"agg": "min", "column": "revenue"}}
        outside = {**base, "group_by": ["user_id"]}
        whole = {"table": "events", "measures": [{"agg": "count"}], "group_by": ["date"]}
        calls = [
            ("metric_compare_periods", other),
            ("metric_compare_periods", least),
            ("metric_compare_periods", outside),
            ("metric_aggregate", whole),
        ]
        for name, args in calls:
            before = sum(run.ctx.passes.by_table().values())
            got = registry.call(run.ctx, name, args).model_dump(mode="json")
            assert sum(run.ctx.passes.by_table().values()) > before, args
            want = registry.call(source, name, args).model_dump(mode="json")
            assert differences(got, want, skip=NOT_COMPARED) == [], args


def test_a_ratio_investigation_reads_no_table_after_the_engine(tmp_path):
    """The offline planner measures a ratio's segment with its numerator's and denominator's
    splits (``metric_compare_periods``), which the cells answer, instead of running the engine
    again on the segment: after the engine, the investigation reads no source table, and its
    cause is confirmed with the splits' numbers."""
    from tasks.investigation import investigation

    db = scenario_db(tmp_path, "mix_shift")
    out = tmp_path / "out"
    question = {k: v for k, v in qargs("mix_shift").items() if v is not None}
    question.pop("filters", None)
    summary = investigation(
        Request(data=[str(db)], out=str(out), offline=True, remember=False, **question)
    )
    assert set(summary["passes"]["steps"]) == {"open", "engine"}, summary["passes"]
    assert "confirmed" in summary["hypotheses"].values()
    evidence = [json.loads(line) for line in (out / "evidence.jsonl").read_text().splitlines()]
    tools = {e["tool"] for e in evidence}
    assert "metric_explain_change" not in tools and "metric_compare_periods" in tools

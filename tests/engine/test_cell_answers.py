"""Tool calls answered from the stored cells: the hypotheses' calls, the gate's re-run of a cited
call and the report's per-day numbers read no source table, and give what their SQL gives on the
source (the same rows, numbers to 1e-9, the same SQL shown).

On planted scenarios loaded by the real loader, through a real :class:`~tasks.run.Run` (whose
tools answer from its analysis's cells) beside a context of its own on the same file (the
source, every call counted). The same checks on real Postgres 16 are in
``tests/flows/test_postgres_source.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flows.investigation import Request
from sql_tools._context import ToolContext
from tasks import tools as registry
from tasks.agent.gate import Gate, WriteFindingInput
from tasks.agent.ledger import Ledger
from tasks.engine.explain import compare_arguments
from tasks.engine.spec import Question
from tasks.ingest.load import load_files
from tasks.report.charts import daily_series
from tasks.run import Run
from tests.engine.test_scenarios import SCENARIOS, expected_of
from tests.flows.test_postgres_source import _question
from tests.support.pg_source import differences

# a cause in a joined column; two causes; a missing day; a ratio of integer sums; integer sums
NAMES = ["pricing_join", "two_causes", "missing_day", "mix_shift", "uneven_drop"]
NOT_COMPARED = frozenset({"elapsed_ms"})


def scenario_db(tmp_path: Path, name: str) -> Path:
    db = tmp_path / "data.duckdb"
    files = sorted(p for p in (SCENARIOS / name).iterdir() if p.name != "expected.json")
    load_files(files, db)
    return db


def qargs(name: str) -> dict[str, Any]:
    """The scenario's question, as the investigation's run takes it."""
    return Request(data=["-"], **_question(expected_of(name))).question()


def split_arguments(q: Question, segment: dict[str, Any]) -> dict[str, Any]:
    """The offline planner's call for a segment: its parent's rows, by its last column."""
    cols = list(segment)
    args = compare_arguments(q, {k: segment[k] for k in cols[:-1]})
    return {**args, "group_by": cols[-1:], "limit": 1000}


def planner_calls(run: Run) -> list[tuple[str, dict[str, Any]]]:
    """What the hypotheses ask the tools: the offline planner's calls (totals, each root
    cause's and driver's split, rows per day) and calls Claude makes of the same kind."""
    q, e = run.question, run.analysis.explanation
    calls = [("metric_compare_periods", compare_arguments(q))]
    for s in [*e.root_causes, *e.drivers[:3]]:
        calls.append(("metric_compare_periods", split_arguments(q, s.segment)))
    if q.periods.by_dates:
        per_day = {**compare_arguments(q), "metric": {"agg": "count"}}
        calls.append(("metric_compare_periods", {**per_day, "group_by": [q.periods.time_column]}))
    dims = e.stats["search_dimensions"]
    calls.append(("metric_compare_periods", {**compare_arguments(q), "group_by": dims[:2]}))
    n = q.metric.numerator
    measures = [{"agg": "count"}, {"agg": n.fn, "column": n.column}]
    if q.metric.denominator is not None:
        d = q.metric.denominator
        measures.append({"agg": d.fn, "column": d.column})
    if q.periods.by_dates:
        b = q.periods.baseline
        span = {"column": q.periods.time_column, "op": "between"}
        span["value"] = [b.start.isoformat(), b.end.isoformat()]  # type: ignore[union-attr]
        filters = [*compare_arguments(q).get("filters", []), span]
        calls.append(
            ("metric_aggregate", {"table": q.metric.table, "measures": measures,
                                  "group_by": dims[:1], "filters": filters})
        )  # fmt: skip
    return calls


def answered_from_cells(run: Run, source: Any, calls: list[tuple[str, dict[str, Any]]]) -> None:
    """Each call on the run's context reads no source table and gives what it gives on
    ``source`` (a context of its own, no cells): the same SQL, parameters, rows and notes."""
    ctx = run.ctx
    for name, args in calls:
        before = ctx.passes.by_table()
        got = registry.call(ctx, name, args).model_dump(mode="json")
        assert ctx.passes.by_table() == before, (name, args)
        want = registry.call(source, name, args).model_dump(mode="json")
        assert got["sql"] == want["sql"] and got["params"] == want["params"]
        assert differences(got, want, skip=NOT_COMPARED) == [], (name, args)


def charts_from_cells(run: Run, source: Any) -> None:
    """The report's per-day numbers read no source table, and are the source's."""
    result = run.analysis.explanation.model_dump(mode="json")
    before = run.ctx.passes.by_table()
    got = daily_series(result, run.db, ctx=run.ctx)
    assert run.ctx.passes.by_table() == before
    want = daily_series(result, run.db, ctx=source)
    assert got and [s.label for s in got] == [s.label for s in want]
    for a, b in zip(got, want, strict=True):
        for which in ("baseline", "comparison"):
            x, y = getattr(a, which), getattr(b, which)
            assert x.days == y.days and x.present == y.present
            mine, theirs = [x.numerator, x.denominator], [y.numerator, y.denominator]
            assert differences(mine, theirs) == [], (a.label, which)


def gate_from_cells(run: Run, source: Any) -> None:
    """The gate re-runs a finding's cited call (made on the source) from the cells: it comes
    back the same, the finding is accepted, and no source table is read."""
    q, e = run.question, run.analysis.explanation
    cause = e.root_causes[0]
    args = split_arguments(q, cause.segment)
    payload = registry.call(source, "metric_compare_periods", args).model_dump(mode="json")
    ledger = Ledger()
    entry = ledger.record("h1", "metric_compare_periods", args, False, payload, 0.0)
    gate = Gate(run.ctx, q, run.analysis, ledger)
    before = run.ctx.passes.by_table()
    finding = gate.submit(
        "h1",
        WriteFindingInput(
            segment=cause.segment,
            category=cause.effect,
            title="the cause",
            summary="the cause moved",
            evidence=[entry.id],
            baseline_value=cause.baseline,
            comparison_value=cause.comparison,
        ),
    )
    assert finding.status == "accepted", finding.critique
    assert run.ctx.passes.by_table() == before


@contextmanager
def _source(run: Run) -> Iterator[ToolContext]:
    """The source beside the run: a second connection to its file, without its cells (one
    process opens a file's database once)."""
    twin = run.ctx.sibling()
    try:
        yield twin
    finally:
        twin.close()


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

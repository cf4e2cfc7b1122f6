"""What an investigation's hypotheses, gate and report ask the SQL tools, and the checks that
such calls, answered from the stored cells on a run's context, read no source table and give
what they give on the source (:mod:`tasks.engine.cell_answers`). Shared by the DuckDB tests
(``tests/engine/test_cell_answers.py``) and the Postgres ones
(``tests/flows/test_postgres_source.py``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tasks.request import Request
from tasks import tools as registry
from tasks.agent.gate import Gate, WriteFindingInput
from tasks.agent.ledger import Ledger
from tasks.engine.explain import compare_arguments
from tasks.engine.spec import DateRange, Question
from tasks.report.charts import daily_series, question_shape
from tasks.run import Run
from tests.engine.test_scenarios import expected_of
from tests.support.pg_source import differences

NOT_COMPARED = frozenset({"elapsed_ms"})
QUESTION = ("metric", "table", "time_column", "baseline", "comparison", "grain", "dimensions")


def qargs(name: str) -> dict[str, Any]:
    """The scenario's question, as the investigation's run takes it."""
    exp = expected_of(name)
    return Request(data=["-"], **{k: exp.get(k) for k in QUESTION}).question()


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
    time = run.ctx.schema.column(q.metric.table, q.periods.time_column or q.periods.period_column)
    if q.periods.by_dates and time.kind == "date":  # rows per day (a timestamp's are not days)
        per_day = {**compare_arguments(q), "metric": {"agg": "count"}}
        calls.append(("metric_compare_periods", {**per_day, "group_by": [time.ref]}))
    dims = e.stats["search_dimensions"]
    calls.append(("metric_compare_periods", {**compare_arguments(q), "group_by": dims[:2]}))
    n = q.metric.numerator
    measures = [{"agg": "count"}, {"agg": n.fn, "column": n.column}]
    if q.metric.denominator is not None:
        d = q.metric.denominator
        measures.append({"agg": d.fn, "column": d.column})
    if q.periods.by_dates:
        b = q.periods.baseline
        assert isinstance(b, DateRange)
        span = [  # the baseline's days, as a TIMESTAMP's rows are kept by day
            {"column": time.ref, "op": ">=", "value": b.start.isoformat()},
            {"column": time.ref, "op": "<", "value": (b.end + timedelta(days=1)).isoformat()},
        ]
        filters = [*compare_arguments(q).get("filters", []), *span]
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
        diff = differences(got, want, skip=NOT_COMPARED)
        assert diff == [], (name, args, diff)


def charts_from_cells(run: Run, source: Any) -> None:
    """The report's per-day numbers read no source table, and are the source's."""
    result = run.analysis.explanation.model_dump(mode="json")
    before = run.ctx.passes.by_table()
    got = daily_series(result, run.db, ctx=run.ctx)
    assert run.ctx.passes.by_table() == before
    want = daily_series(result, run.db, ctx=source)
    assert bool(got) == (question_shape(result) is not None)
    assert [s.label for s in got] == [s.label for s in want]
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

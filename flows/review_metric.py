"""The ``review-metric`` flow: one metric of the weekly review, in its own flow run.

The weekly review (:mod:`flows.weekly_review`) starts one run of this flow per metric, as a
child of its own run: through the review's ``metric_deployment`` (``review-metric/default``) when
the Prefect server has it, so that the workers of its pool share the metrics, in the review's
process otherwise. A run reads the database the
review loaded, finds the last day with data among the metric's rows, measures the metric in
the two periods and, when the move is significant and large enough, runs the ``investigate``
flow as its own subflow into ``out``. It returns the metric's row of the review's summary.

The run ends Completed with the row; Failed with the row when the metric was measured but its
investigation failed; Failed with the error when the metric could not be measured (an unknown
column, a data error). Its result is persisted (JSON), so that a review on another machine can
read it from the result storage they share.
"""

import threading
from datetime import date
from typing import Any, NamedTuple

from prefect import flow
from prefect.states import Failed, State
from pydantic import BaseModel, ConfigDict, Field

from flows import steps
from sql_tools import ToolContext
from sql_tools.catalog import jsonable
from tasks.request import Request
from tasks.run import Run, question_of


class Thresholds(BaseModel):
    """When a metric's move is worth an investigation (``metrics.yaml``'s review section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_relative_change: float = Field(default=0.05, ge=0.0)
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)


@flow(
    name="review-metric",
    flow_run_name="{request.metric}",
    persist_result=True,
    result_serializer="json",
)
def review_metric(
    request: Request, db: str, thresholds: Thresholds | None = None
) -> dict[str, Any] | State[Any]:
    """Review one metric: ``request`` is the investigation of its move (a named metric, its
    periods ``baseline`` and ``comparison``, the review's files as ``data``, its ``out``
    folder and ``source`` name), ``db`` the database the review loaded from those files; a move
    beyond ``thresholds`` is investigated."""
    row = measure(request, db, thresholds or Thresholds())
    if not row["moved"]:
        return row
    row["investigation"] = _investigate(request)
    if "error" in row["investigation"]:
        return Failed(message=f"investigation failed: {row['investigation']['error']}", data=row)
    return row


# The flow's body names only module-level functions and classes: `flow.serve()` pickles the
# body by value (the module's name `review_metric` is the flow, not the function) with every
# global it names, and the lock below cannot be pickled.
# Its parameters' annotations are the classes themselves (this module does not postpone
# annotations): a name in a string would not travel with the pickled body.


def measure(request: Request, db: str, thresholds: Thresholds) -> dict[str, Any]:
    """The metric's row: its last day with data and, when the data reaches the end of the
    comparison period, its move measured by the engine and whether that move is worth an
    investigation."""
    end = date.fromisoformat(request.comparison.split(":")[1])
    with _READING, Run(db, request.question()) as run:
        latest = latest_date(run.ctx, request)
        row: dict[str, Any] = {"metric": request.metric, "latest_date": jsonable(latest.day)}
        if latest.day is None or latest.day < end:
            return {**row, "moved": False, "reason": f"no data through {end}"}
        explanation = steps.decompose(run)
    return {**row, **measurement(explanation, thresholds)}


_READING = threading.Lock()
"""One metric at a time reads the review's database in a process: two read-only connections to
one file in one process must have the same configuration, and each tool context has a temporary
folder of its own. Runs in separate processes (workers) read it at once; the investigations,
the long part, each read their own copy."""


class Latest(NamedTuple):
    """The last day with data for a metric, and whether only its filters' rows counted."""

    day: date | None
    filtered: bool


def latest_date(ctx: ToolContext, request: Request) -> Latest:
    """The last day with data for the question's metric: in its table, on its time column, among
    the rows its filters keep (``country=US`` has no new data when only other countries
    arrived)."""
    from sql_tools import SQL_TOOLS

    q = question_of(ctx, request.question(), answerable=False)  # the week may not have arrived
    args = {
        "table": q.metric.table,
        "measures": [{"agg": "max", "column": q.periods.time_column}],
        "filters": [f.model_dump(mode="json") for f in q.metric.filters],
    }
    res = SQL_TOOLS.call(ctx, "metric_aggregate", args)
    value = next(iter(res.rows[0].values()), None) if res.rows else None  # type: ignore[attr-defined]
    day = None if value is None else date.fromisoformat(str(value)[:10])
    return Latest(day, bool(q.metric.filters))


def measurement(explanation: dict[str, Any], thresholds: Thresholds) -> dict[str, Any]:
    """The metric's move and whether it is worth an investigation."""
    change = explanation["change"]
    p, rel = change["p_value"], change["relative"]
    if p is None or not p < thresholds.alpha:
        moved, reason = False, "within the noise"
    elif rel is not None and abs(rel) < thresholds.min_relative_change:
        moved, reason = False, f"significant but under {thresholds.min_relative_change:.0%}"
    else:
        moved, reason = True, "significant and beyond the threshold"
    return {
        "expression": explanation["metric"]["expression"],
        "baseline": explanation["baseline"]["value"],
        "comparison": explanation["comparison"]["value"],
        "change": {k: change[k] for k in ("absolute", "relative", "significant", "p_value")},
        "moved": moved,
        "reason": reason,
    }


def _investigate(request: Request) -> dict[str, Any]:
    """Run the ``investigate`` flow as a subflow on the files the review measured (already
    downloaded when they came from Supabase Storage); its folder, run id, link and answer."""
    from prefect.utilities.urls import url_for

    from flows.investigate import investigate

    # its tasks persist what they choose to, not everything this flow's persisted result would
    # make them persist
    state = investigate.with_options(persist_result=False)(request, return_state=True)
    run_id = str(state.state_details.flow_run_id)
    found: dict[str, Any] = {
        "out": request.out,
        "flow_run_id": run_id,
        "flow_run_url": url_for("flow-run", obj_id=run_id),
        "state": state.type.value,
    }
    if not state.is_completed():
        found["error"] = failure_reason(state)
        return found
    result = state.result()
    found["root_causes"] = result["root_causes"]
    found["run_id"] = result["run_id"]
    return found


def failure_reason(state: State[Any]) -> str:
    """Why a run did not complete, on one line: its state's message (the exception, for a run
    that raised one)."""
    message = str(state.message or state.name or state.type.value)
    return " ".join(message.removeprefix("Flow run encountered an exception: ").split())

"""How the weekly review runs its metrics: one ``review-metric`` flow run each, a child of the
review's run, at most ``concurrency`` at once, each started and waited for in a thread of the
review's process.

- Through a deployment (:func:`child_deployment` finds it): ``run_deployment(...,
  as_subflow=True)``, so that the workers of the deployment's pool run the metrics, on as many
  machines as the pool has. The review waits for each run and reads the row it returned from
  the result storage they share. A run still unfinished after the timeout, queued or running,
  is cancelled.
- In-process otherwise (no deployment, no Prefect server configured): the run is created as a
  subflow of the review and run in the thread.

Each run's final state becomes the metric's row of the summary (:func:`child_row`), with the
run's id and link; a run that did not complete (failed, crashed, cancelled, given up on) makes a
failed row with a one-line reason, and never stops the others.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID, uuid4

from prefect.states import State

from flows.review_metric import failure_reason, review_metric
from sql_tools import one_line

METRIC_DEPLOYMENT = "review-metric/default"
POLL_SECONDS = 2.0
ERROR_CHARS = 300


def child_deployment(name: str | None) -> str | None:
    """The deployment the metrics' runs go through, or None to run them in this process: when
    ``name`` is empty, when no Prefect server is configured (a temporary server started for one
    process has no workers), or when the server has no deployment ``name``.

    Raises:
        ValueError: ``name`` is not ``flow/deployment``, or its deployment runs another flow.
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    if not name or not PREFECT_API_URL.value():
        return None
    if name.count("/") != 1 or not all(name.split("/")):
        raise ValueError(f"metric_deployment must be 'flow/deployment', got {name!r}")
    with get_client(sync_client=True) as client:
        try:
            deployment = client.read_deployment_by_name(name)
        except ObjectNotFound:
            return None
        runs = client.read_flow(deployment.flow_id).name
    if runs != review_metric.name:
        raise ValueError(
            f"the deployment {name!r} runs the flow {runs!r}; the review's metrics need a "
            f"deployment of {review_metric.name!r}"
        )
    return name


def review_metrics(
    children: dict[str, dict[str, Any]], deployment: str | None, concurrency: int, timeout: float
) -> list[dict[str, Any]]:
    """Each metric's run (``children``: metric -> ``review-metric`` parameters), at most
    ``concurrency`` at once, each started and waited for in a thread of its own; their rows, in
    the metrics' order."""
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="review-metric") as pool:
        futures = {
            name: pool.submit(
                contextvars.copy_context().run, review_one, name, params, deployment, timeout
            )
            for name, params in children.items()
        }
        rows = []
        for name, future in futures.items():
            try:
                rows.append(future.result())
            except Exception as exc:  # no run to report (the server unreachable, ...)
                rows.append(_failed_row(name, f"{type(exc).__name__}: {exc}"))
    return rows


def review_one(
    metric: str, parameters: dict[str, Any], deployment: str | None, timeout: float
) -> dict[str, Any]:
    """Run the metric's ``review-metric`` flow run, through ``deployment`` or in this process,
    and make its summary row."""
    if deployment is None:
        return child_row(metric, _in_process(metric, parameters))
    return child_row(metric, *_through_deployment(deployment, metric, parameters, timeout))


def _in_process(metric: str, parameters: dict[str, Any]) -> State[Any]:
    """Run the metric's run in this thread, as a subflow of the review; its final state.

    The run is created here, under a task run named after the metric, as calling the flow would
    create it; calling the flow from several threads at once would not do: the engine numbers a
    parent's subflows with a counter that is not safe across threads, and two runs given the
    same number become one.
    """
    from prefect import Task
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext
    from prefect.flow_engine import run_flow
    from prefect.states import Pending

    parent = FlowRunContext.get()
    assert parent is not None and parent.flow_run is not None, "runs inside the review's run"
    with get_client(sync_client=True) as client:
        tracking = client.create_task_run(
            task=Task(name=review_metric.name, fn=review_metric.fn),
            flow_run_id=parent.flow_run.id, dynamic_key=metric, name=metric, state=Pending(),
        )  # fmt: skip
        run = create_child_run(client, metric, parameters, tracking.id)
    state = run_flow(review_metric, flow_run=run, parameters=parameters, return_type="state")
    return state  # type: ignore[return-value]


def create_child_run(
    client: Any, metric: str, parameters: dict[str, Any], parent_task_run_id: UUID | None
) -> Any:
    """Create the metric's ``review-metric`` run, Pending, under ``parent_task_run_id``; the run.

    The request carries a key of its own (:func:`_request_key`), which
    ``client.create_flow_run`` cannot send.
    """
    from prefect.client.schemas.actions import FlowRunCreate
    from prefect.client.schemas.objects import FlowRun, FlowRunPolicy
    from prefect.states import Pending, to_state_create

    request = FlowRunCreate(
        flow_id=client.create_flow(review_metric),
        flow_version=review_metric.version,
        name=metric,
        parameters=review_metric.serialize_parameters(parameters),
        parent_task_run_id=parent_task_run_id,
        state=to_state_create(Pending()),
        empirical_policy=FlowRunPolicy(
            retries=review_metric.retries,
            retry_delay=int(review_metric.retry_delay_seconds or 0),
        ),
        idempotency_key=_request_key(metric),
    )
    body = request.model_dump(mode="json", exclude_unset=True)
    response = client.request("POST", "/flow_runs/", json=body)
    run = FlowRun.model_validate(response.json())
    run.parameters = parameters
    return run


def _request_key(metric: str) -> str:
    """A key of one start of the metric's run: the client sends a request again when the
    server's answer times out, and a server slow enough to time out has often made the run
    already. Given the key, it answers the second request with that run, where a request without
    one leaves a second run of the same name, never run, beside the one that is."""
    return f"{metric}/{uuid4()}"


_STARTING = threading.Lock()
"""run_deployment numbers the task runs that stand for its flow runs in the parent with the
engine's counter, which is not safe across threads: runs are started one at a time (each start
is a few requests), then waited for concurrently."""


def _through_deployment(
    deployment: str, metric: str, parameters: dict[str, Any], timeout: float
) -> tuple[State[Any], str | None]:
    """Start the metric's run through ``deployment`` and wait for it: its last state, and why it
    was given up on (None when it ended). A run still unfinished after ``timeout`` seconds,
    queued or running, is cancelled."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.deployments import run_deployment

    with _STARTING:
        run = run_deployment(
            deployment,
            parameters=parameters,
            flow_run_name=metric,
            timeout=0,
            as_subflow=True,
            idempotency_key=_request_key(metric),
        )
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while run.state is None or not run.state.is_final():
            left = deadline - time.monotonic()
            if left <= 0:
                where = run.state.name if run.state else "not started"
                why = f"not finished after {timeout:g} s (still {where}); cancelled"
                client.set_flow_run_state(run.id, State(type=StateType.CANCELLING, message=why))
                run = client.read_flow_run(run.id)
                return run.state, why  # type: ignore[return-value]
            time.sleep(min(POLL_SECONDS, left))
            run = client.read_flow_run(run.id)
    return run.state, None


def child_row(metric: str, state: State[Any], gave_up: str | None = None) -> dict[str, Any]:
    """The metric's summary row from its run's last state: the row the run returned, with the
    run's id, link and state type; and ``error``, one line, when the run did not complete
    (``gave_up`` says why when the review stopped waiting) or its row cannot be read here."""
    from prefect.utilities.urls import url_for

    data: Any = None
    unreadable = "no result was persisted"
    if gave_up is None:
        try:
            data = state.result(raise_on_failure=False)
        except Exception as exc:  # its result storage is not reachable from here
            unreadable = f"{type(exc).__name__}: {exc}"
    if gave_up is not None:
        error: str | None = gave_up
    elif not state.is_completed():
        error = failure_reason(state)
    elif not isinstance(data, dict):
        error = (
            f"its run completed, but its row cannot be read where the review runs ({unreadable}); "
            "the review and its workers need one result storage"
        )
    else:
        error = None
    row = dict(data) if isinstance(data, dict) else _failed_row(metric, error or "")
    run_id = state.state_details.flow_run_id
    row["flow_run_id"] = None if run_id is None else str(run_id)
    row["flow_run_url"] = None if run_id is None else url_for("flow-run", obj_id=run_id)
    row["state"] = state.type.value
    if error is not None:
        row["error"] = one_line(error, ERROR_CHARS)
    return row


def _failed_row(metric: str, error: str) -> dict[str, Any]:
    """The row of a metric whose run returned none: nothing measured."""
    return {
        "metric": metric, "latest_date": None, "moved": None, "reason": "failed",
        "error": one_line(error, ERROR_CHARS),
    }  # fmt: skip

"""The weekly review's metrics, one flow run each: in the review's process when no deployment of
``review-metric`` exists, through the deployment when one is served; a metric that fails is
reported with its reason while the others complete, and the review ends Failed.

Flow runs go through a temporary Prefect server (``prefect_harness``); the served deployment
runs in a separate process against the same server, as ``flow.serve()`` runs on a user's
machine."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prefect_runs import child_runs, markdown_artifact, most_at_once, served

# Slow end to end (flow runs through a Prefect server, one per metric):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "metrics.yaml"
IOS_52 = {"platform": "ios", "app_version": "5.2"}
WEEK = date(2024, 4, 1)


def _metrics_file(folder: Path, metrics: list[str]) -> Path:
    """The example metrics.yaml with revenue twice (``gross``) and two metrics the demo data cannot
    answer, reviewing ``metrics``."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metrics"]["gross"] = {**doc["metrics"]["revenue"], "description": "revenue again"}
    doc["metrics"]["refunds"] = {"expression": "sum(refund_amount)", "table": "events"}
    doc["metrics"]["tickets"] = {"expression": "count(*)", "table": "support_tickets"}
    doc["review"]["data"] = [str(ROOT / "data/demo/events.csv"), str(ROOT / "data/demo/users.csv")]
    doc["review"]["metrics"] = metrics
    path = folder / "metrics.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _review(**kwargs: Any) -> Any:
    from flows.weekly_review import weekly_review

    return weekly_review(as_of=WEEK, offline=True, return_state=True, **kwargs)


def test_a_failing_metric_is_reported_and_the_others_complete(prefect_harness, tmp_path):
    metrics = _metrics_file(tmp_path, ["revenue", "refunds", "gross", "sessions", "tickets"])
    out = tmp_path / "runs"
    state = _review(metrics_file=str(metrics), out=str(out), concurrency=2)

    # the review ends Failed, saying how many failed and why, with the summary as its data
    assert state.is_failed()
    assert state.message.startswith("2 of 5 metrics failed: refunds (")
    assert "'refund_amount'" in state.message and "tickets (" in state.message
    assert "'support_tickets'" in state.message
    assert state.message.endswith("the week of 2024-03-25 stays open for a rerun.")
    summary = state.result(raise_on_failure=False)
    assert summary["status"] == "reviewed"
    assert summary["failed"] == ["refunds", "tickets"]
    assert summary["moved"] == ["revenue", "gross"]
    rows = {r["metric"]: r for r in summary["metrics"]}
    assert list(rows) == ["revenue", "refunds", "gross", "sessions", "tickets"]

    # the others completed with their answers (two investigations, in this process)
    for name in ("revenue", "gross"):
        assert rows[name]["state"] == "COMPLETED" and "error" not in rows[name]
        assert rows[name]["investigation"]["root_causes"] == [IOS_52]
        result = json.loads((out / name / "2024-03-25" / "result.json").read_text())
        assert [c["segment"] for c in result["root_causes"]] == [IOS_52]
        assert (out / name / "2024-03-25" / "charts" / "waterfall.png").stat().st_size > 0
    assert rows["sessions"]["state"] == "COMPLETED" and rows["sessions"]["moved"] is False
    from tasks.store import store_from_config

    with store_from_config() as store:
        for name in ("revenue", "gross"):
            assert store.get_investigation(rows[name]["investigation"]["run_id"]) is not None

    # the failed ones: nothing measured, a one-line reason, a link to their run
    for name, missing in (("refunds", "refund_amount"), ("tickets", "support_tickets")):
        row = rows[name]
        assert row["state"] == "FAILED" and row["moved"] is None and row["reason"] == "failed"
        assert f"'{missing}'" in row["error"] and "\n" not in row["error"]
        assert row["latest_date"] is None and "change" not in row

    # one child run per metric, the review as their parent, two at a time at most
    runs = child_runs(state.state_details.flow_run_id)
    assert sorted(r.name for r in runs) == ["gross", "refunds", "revenue", "sessions", "tickets"]
    children = {r.name: r for r in runs}
    for name, run in children.items():
        assert rows[name]["flow_run_id"] == str(run.id)
        assert run.state.type.value == rows[name]["state"]
    assert most_at_once(list(children.values())) <= 2

    md = markdown_artifact(state.state_details.flow_run_id, "weekly-review")
    assert "**2 of 5 metrics failed: refunds, tickets.**" in md
    assert f"[failed]({rows['refunds']['flow_run_url']})" in md
    assert "**refunds** failed: " in md and "**tickets** failed: " in md
    assert "| refunds | n/a | n/a | n/a | n/a | failed |  | [failed](" in md
    assert f"[completed]({rows['sessions']['flow_run_url']})" in md
    assert not (out / "weekly-review-state.json").exists()


def test_a_child_run_whose_request_is_sent_again_is_made_once(prefect_harness):
    # the client sends a request again when the answer times out; the server had made the run
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    from flows.metric_runs import create_child_run

    parameters = {"request": {"metric": "twice", "data": [], "out": "runs"}, "db": "w.duckdb"}
    with get_client(sync_client=True) as client:
        send, answers = client.request, []

        def sent_twice(method: str, path: str, **kwargs: Any) -> Any:
            if (method, path) == ("POST", "/flow_runs/"):
                answers.append(send(method, path, **kwargs))  # the answer that timed out
            return send(method, path, **kwargs)

        client.request = sent_twice  # type: ignore[method-assign]
        run = create_child_run(client, "twice", parameters, None)
        client.request = send  # type: ignore[method-assign]
        named = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["twice"]))
        )
    assert len(answers) == 1 and answers[0].json()["id"] == str(run.id)
    assert [r.id for r in named] == [run.id]
    assert run.parameters == parameters and run.state.is_pending()


def test_one_metric_at_a_time(prefect_harness, tmp_path):
    metrics = _metrics_file(tmp_path, ["sessions", "active_users", "refunds"])
    state = _review(metrics_file=str(metrics), out=str(tmp_path / "runs"), concurrency=1)
    assert state.is_failed() and state.message.startswith("1 of 3 metrics failed: refunds")
    children = child_runs(state.state_details.flow_run_id)
    assert len(children) == 3 and most_at_once(children) == 1


def test_metrics_run_through_the_deployment_a_runner_serves(prefect_harness, tmp_path):
    from prefect.settings import PREFECT_API_URL, PREFECT_LOCAL_STORAGE_PATH

    env = {
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        # the review reads its children's results from the storage they share
        "PREFECT_LOCAL_STORAGE_PATH": str(PREFECT_LOCAL_STORAGE_PATH.value()),
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    metrics = _metrics_file(tmp_path, ["revenue", "sessions", "refunds"])
    out = tmp_path / "runs"
    runner_log = tmp_path / "runner.log"
    with served("flows.review_metric:review_metric", "weekly-test", env, runner_log) as deployment:
        assert deployment == "review-metric/weekly-test"
        state = _review(metrics_file=str(metrics), out=str(out), metric_deployment=deployment)

    assert state.is_failed() and state.message.startswith("1 of 3 metrics failed: refunds (")
    assert "'refund_amount'" in state.message
    summary = state.result(raise_on_failure=False)
    assert summary["metric_deployment"] == "review-metric/weekly-test"
    rows = {r["metric"]: r for r in summary["metrics"]}
    assert rows["revenue"]["state"] == "COMPLETED"
    assert rows["revenue"]["investigation"]["root_causes"] == [IOS_52]
    assert rows["revenue"]["change"]["relative"] == pytest.approx(-0.215, abs=0.001)
    assert rows["sessions"]["state"] == "COMPLETED" and rows["sessions"]["moved"] is False
    assert rows["refunds"]["state"] == "FAILED" and "'refund_amount'" in rows["refunds"]["error"]
    result = json.loads((out / "revenue" / "2024-03-25" / "result.json").read_text())
    assert [c["segment"] for c in result["root_causes"]] == [IOS_52]

    # the children are runs of the deployment, started as subflows of the review
    children = {r.name: r for r in child_runs(state.state_details.flow_run_id)}
    assert sorted(children) == ["refunds", "revenue", "sessions"]
    assert len({r.deployment_id for r in children.values()}) == 1
    assert None not in {r.deployment_id for r in children.values()}
    for name, run in children.items():
        assert rows[name]["flow_run_id"] == str(run.id)
    assert children["revenue"].state.is_completed() and children["refunds"].state.is_failed()
    [investigation] = child_runs(children["revenue"].id)
    assert investigation.state.is_completed()
    md = markdown_artifact(state.state_details.flow_run_id, "weekly-review")
    assert "through the deployment `review-metric/weekly-test`" in md


def test_a_deployment_nobody_serves_is_given_up_on(prefect_harness, tmp_path):
    from prefect.client.orchestration import get_client

    from flows.review_metric import review_metric
    from tests.support.prefect_runs import forget_deployment

    deployment_id = review_metric.to_deployment(name="unserved").apply()
    try:
        metrics = _metrics_file(tmp_path, ["sessions"])
        state = _review(
            metrics_file=str(metrics), out=str(tmp_path / "runs"),
            metric_deployment="review-metric/unserved", metric_timeout=3,
        )  # fmt: skip
    finally:
        forget_deployment(deployment_id)
    assert state.is_failed()
    [row] = state.result(raise_on_failure=False)["metrics"]
    assert row["error"] == "not finished after 3 s (still Scheduled); cancelled"
    [child] = child_runs(state.state_details.flow_run_id)
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(child.id).state.type.value in ("CANCELLING", "CANCELLED")


def test_which_deployment_the_metrics_run_through(prefect_harness):
    from flows.investigate import investigate
    from flows.metric_runs import child_deployment
    from tests.support.prefect_runs import forget_deployment

    assert child_deployment(None) is None and child_deployment("") is None
    assert child_deployment("review-metric/absent") is None  # in this process, then
    with pytest.raises(ValueError, match="must be 'flow/deployment'"):
        child_deployment("review-metric")
    deployment_id = investigate.to_deployment(name="not-a-metric").apply()
    try:
        with pytest.raises(ValueError, match="runs the flow 'investigate'"):
            child_deployment("investigate/not-a-metric")
    finally:
        forget_deployment(deployment_id)


@pytest.mark.parametrize(
    ("state", "error"),
    [
        ("crashed", "Flow run infrastructure exited with non-zero status code -9."),
        ("failed", "KeyError: 'x'"),
        ("completed without a row", "its run completed, but its row cannot be read where the "
         "review runs (MissingResult: State data is missing."),
    ],
)  # fmt: skip
def test_a_run_that_ends_without_its_row_is_a_failed_metric(state, error):
    from prefect.states import Completed, Crashed, Failed

    from flows.metric_runs import child_row

    final = {
        "crashed": Crashed(message="Flow run infrastructure exited with non-zero status code -9."),
        "failed": Failed(message="Flow run encountered an exception: KeyError: 'x'"),
        "completed without a row": Completed(data=None),  # a worker with its own result storage
    }[state]
    row = child_row("revenue", final)
    assert row["error"].startswith(error) and len(row["error"]) <= 300
    assert (row["metric"], row["moved"], row["reason"]) == ("revenue", None, "failed")
    assert row["state"] == final.type.value


def test_the_failed_reviews_message_names_every_failed_metric_and_the_first_reasons():
    from flows.weekly_review import failure_message

    rows = [{"metric": f"m{i}", "error": f"reason {i} " + "x" * 400} for i in range(7)]
    rows.append({"metric": "fine", "moved": False})
    message = failure_message({"week": "2024-03-25", "metrics": rows})
    assert message.startswith("7 of 8 metrics failed: m0 (reason 0 xxx")
    assert "m4 (reason 4" in message and "reason 5" not in message
    assert "; and m5, m6. The others were reviewed" in message
    assert len(message) < 1200

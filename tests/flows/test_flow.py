"""The `investigate` flow end to end on the demo data under Prefect's test harness: a completed
run with its artifacts and outputs, every tool call in the run log, and a run that crashed after
its hypotheses resumes from the cache instead of redoing them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Slow end to end (the investigate flow on a Prefect server):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
QUESTION = dict(
    data=[str(DEMO / "events.csv"), str(DEMO / "users.csv")],
    metric="sum(revenue)",
    baseline="2024-03-18:2024-03-24",
    comparison="2024-03-25:2024-03-31",
    table="events",
    time_column="date",
    offline=True,
)


def _task_states(flow_run_id) -> dict[str, list[str]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    out: dict[str, list[str]] = {}
    for r in runs:
        out.setdefault(r.name.rsplit("-", 1)[0], []).append(r.state.name)
    return out


def _run_logs(flow_run_id) -> list[str]:
    """The messages the run sent to the Prefect API (what the UI shows)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return [log.message for log in logs]


def test_flow_run_completes_with_artifacts(prefect_harness, tmp_path):
    from prefect.client.orchestration import get_client

    from flows.investigate import investigate

    out = tmp_path / "out"
    state = investigate(**QUESTION, out=str(out), return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()
    assert summary["root_causes"] == [{"platform": "ios", "app_version": "5.2"}]
    assert summary["hypotheses"]["h1"] == "confirmed"
    result = json.loads((out / "result.json").read_text())
    assert [h["status"] for h in result["hypotheses"]].count("confirmed") == 1
    assert (out / "report.md").is_file() and (out / "evidence.jsonl").is_file()
    with get_client(sync_client=True) as client:
        keys = {a.key: a.type for a in client.read_artifacts()}
    assert keys.get("investigation-report") == "markdown"
    assert keys.get("investigation-findings") == "table"
    assert keys.get("investigation-progress") == "progress"
    states = _task_states(state.state_details.flow_run_id)
    assert len(states["investigate-hypothesis"]) == len(summary["hypotheses"])
    logged = _run_logs(state.state_details.flow_run_id)
    assert any("h1 q-1 metric_compare_periods" in m for m in logged), "tool calls are logged"
    # every step's cache key is computable (a Run stands for its identity): no error lines
    assert not [m for m in logged if "computing cache key" in m]


def test_crashed_run_resumes_from_the_cache(prefect_harness, tmp_path, monkeypatch):
    import tasks.report.write
    from flows.investigate import investigate

    out = tmp_path / "out"

    def boom(*args, **kwargs):
        raise RuntimeError("disk full while rendering")

    monkeypatch.setattr(tasks.report.write, "render", boom)
    crashed = investigate(**QUESTION, out=str(out), remember=False, return_state=True)
    assert crashed.is_failed()
    first = _task_states(crashed.state_details.flow_run_id)
    assert set(first["investigate-hypothesis"]) <= {"Completed", "Cached"}
    assert not (out / "result.json").exists()
    monkeypatch.undo()
    again = investigate(**QUESTION, out=str(out), remember=False, return_state=True)
    assert again.is_completed(), again.message
    second = _task_states(again.state_details.flow_run_id)
    assert set(second["investigate-hypothesis"]) == {"Cached"}
    assert second["decompose"] == ["Cached"] and second["hypothesize"] == ["Cached"]
    assert (out / "result.json").is_file()


def test_a_hypothesis_that_cannot_be_investigated_does_not_stop_the_others(monkeypatch, tmp_path):
    """Plain mode (what the CLI runs): a hypothesis whose model stays unreachable is recorded
    inconclusive with the reason; the others' results are kept."""
    import flows.investigation as composition
    import tasks.agent.steps as agent_steps
    from tasks.run import Run

    def fake(run, item, offline, model):
        done = agent_steps.unavailable(item, "stand-in")  # a finished run, shape-wise
        if item["hypothesis"]["id"] == "h2":
            done["outcome"]["stop_reason"] = "error: Anthropic API overloaded (529)"
        return done

    monkeypatch.setattr(agent_steps, "investigate_hypothesis", fake)
    items = [
        {"hypothesis": {"id": f"h{i}", "title": f"t{i}", "story": "s", "expected": "e"},
         "plan": {}}
        for i in (1, 2, 3)
    ]  # fmt: skip
    seen = []
    with Run(
        tmp_path / "db.duckdb", {}, "hash", progress=lambda n, t, r: seen.append((n, t))
    ) as run:
        runs = composition._map_hypotheses(run, items, True, None)
    assert [r["outcome"]["hypothesis"]["id"] for r in runs] == ["h1", "h2", "h3"]
    assert (
        "HypothesisUnavailable: h2: error: Anthropic API overloaded (529)"
        in (runs[1]["outcome"]["stop_reason"])
    )
    assert runs[1]["outcome"]["status"] == "inconclusive"
    assert runs[0]["outcome"]["summary"] == "not investigated: stand-in"
    assert seen == [(1, 3), (2, 3), (3, 3)], "the run's progress hears of every hypothesis"


def test_the_load_task_loads_strictly(tmp_path):
    """The flow's load step is a Prefect task named load, without retries (a bad file stays
    bad); its plain function loads all rows."""
    from flows.steps import load

    assert load.name == "load" and load.retries == 0
    csv = tmp_path / "s.csv"
    csv.write_text("day,amount\n2024-01-01,3\n2024-01-02,4\n", encoding="utf-8")
    report = load.fn([str(csv)], str(tmp_path / "db.duckdb"))
    assert [(t.table, t.status, t.rows) for t in report.tables] == [("s", "loaded", 2)]


def test_each_task_is_its_steps_plain_function():
    """A flow run calls a step's task, an in-process run its plain function: the task of the
    same name wraps that very function, so both run one body."""
    import inspect

    from flows import step_functions, steps
    from flows.investigation import _task

    plain = [
        f for name, f in inspect.getmembers(step_functions, inspect.isfunction)
        if f.__module__ == step_functions.__name__ and not name.startswith("_")
    ]  # fmt: skip
    assert {f.__name__ for f in plain} == {
        "load", "decompose", "recall_history", "hypothesize", "investigate_hypothesis",
        "verify_findings", "write_report", "remember",
    }  # fmt: skip
    for f in plain:
        task = _task(f)
        assert task is getattr(steps, f.__name__) and task.fn is f
        assert task.name == f.__name__.replace("_", "-")


def test_the_flow_and_the_in_process_request_take_the_same_parameters():
    """``drilldown investigate`` builds a Request whether it runs the flow through Prefect or
    in-process; a parameter one side lacks would be dropped on the other path."""
    import inspect

    from flows.investigate import Request, investigate

    assert list(inspect.signature(investigate.fn).parameters) == list(Request.model_fields)

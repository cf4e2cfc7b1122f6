"""The `investigate` flow end to end on the demo data under Prefect's test harness: a completed
run with its artifacts and outputs, every tool call in the run log, and a run that crashed after
its hypotheses resumes from the cache instead of redoing them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.request import Request

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
    state = investigate(Request(**QUESTION, out=str(out)), return_state=True)
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
    crashed = investigate(Request(**QUESTION, out=str(out), remember=False), return_state=True)
    assert crashed.is_failed()
    first = _task_states(crashed.state_details.flow_run_id)
    assert set(first["investigate-hypothesis"]) <= {"Completed", "Cached"}
    assert not (out / "result.json").exists()
    monkeypatch.undo()
    again = investigate(Request(**QUESTION, out=str(out), remember=False), return_state=True)
    assert again.is_completed(), again.message
    second = _task_states(again.state_details.flow_run_id)
    assert set(second["investigate-hypothesis"]) == {"Cached"}
    assert second["decompose"] == ["Cached"] and second["hypothesize"] == ["Cached"]
    assert (out / "result.json").is_file()


def test_a_hypothesis_that_cannot_be_investigated_does_not_stop_the_others(monkeypatch, tmp_path):
    """In-process (what the CLI runs): a hypothesis whose model stays unreachable is recorded
    inconclusive with the reason; the others' results are kept."""
    import tasks.agent.steps as agent_steps
    from tasks.investigation import IN_PROCESS, map_hypotheses
    from tasks.run import Run

    def fake(run, item, offline, model):
        done = agent_steps.unavailable(item, "stand-in")  # a finished run, shape-wise
        if item["hypothesis"]["id"] == "h2":
            raise agent_steps.HypothesisUnavailable("h2: error: Anthropic API overloaded (529)")
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
        runs = map_hypotheses(IN_PROCESS, run, items, True, None)
    assert [r["outcome"]["hypothesis"]["id"] for r in runs] == ["h1", "h2", "h3"]
    assert (
        "HypothesisUnavailable: h2: error: Anthropic API overloaded (529)"
        in (runs[1]["outcome"]["stop_reason"])
    )
    assert runs[1]["outcome"]["status"] == "inconclusive"
    assert runs[0]["outcome"]["summary"] == "not investigated: stand-in"
    assert seen == [(1, 3), (2, 3), (3, 3)], "the run's progress hears of every hypothesis"


def test_an_unreachable_model_is_a_transient_error():
    """A hypothesis the model could not finish is raised as HypothesisUnavailable, which the
    tasks retry: transient errors are types, judged with isinstance."""
    import anthropic
    import httpx

    from flows.steps import is_transient
    from tasks.agent.steps import HypothesisUnavailable
    from tasks.ingest.storage import StorageUnavailable
    from tasks.store import StoreUnavailable

    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    assert is_transient(HypothesisUnavailable("h1: error: rate limited", {"entries": []}))
    assert is_transient(anthropic.APIConnectionError(request=request))
    assert is_transient(StoreUnavailable("store unreachable"))
    assert is_transient(StorageUnavailable("storage unreachable"))
    assert is_transient(TimeoutError()) and is_transient(ConnectionResetError())

    class RateLimitError(Exception):  # a name alone is not a type
        pass

    assert not is_transient(RateLimitError()) and not is_transient(ValueError("bad column"))


def test_the_load_task_loads_strictly(tmp_path):
    """The flow's load step is a Prefect task named load, without retries (a bad file stays
    bad); its plain function loads all rows."""
    from flows.steps import load

    assert load.name == "load" and load.retries == 0
    csv = tmp_path / "s.csv"
    csv.write_text("day,amount\n2024-01-01,3\n2024-01-02,4\n", encoding="utf-8")
    report = load.fn([str(csv)], str(tmp_path / "db.duckdb"))
    assert [(t.table, t.status, t.rows) for t in report.tables] == [("s", "loaded", 2)]


def test_both_roads_run_the_same_steps():
    """The flow's road runs, for each step of the in-process road, a Prefect task named after
    it that calls that very step."""
    import dataclasses

    from flows.investigate import FLOW_ROAD
    from tasks import steps
    from tasks.investigation import IN_PROCESS

    names = [f.name for f in dataclasses.fields(IN_PROCESS)]
    assert names == [
        "load", "decompose", "recall_history", "hypothesize", "investigate_hypothesis",
        "verify_findings", "write_report", "remember",
    ]  # fmt: skip
    for name in names:
        plain, task = getattr(IN_PROCESS, name), getattr(FLOW_ROAD, name)
        assert plain is getattr(steps, name)
        assert task.name == name.replace("_", "-")
        assert task.fn is plain or name == "investigate_hypothesis"  # that one logs its calls


def test_the_flow_takes_one_request():
    """The flow's one parameter is the Request the command line and the weekly review build."""
    import inspect

    from flows.investigate import investigate

    [param] = inspect.signature(investigate.fn).parameters.values()
    assert param.name == "request" and param.annotation in (Request, "Request")

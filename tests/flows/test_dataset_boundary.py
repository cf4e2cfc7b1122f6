"""Each investigation sees only the data it was given.

With the default ``--out``, a second dataset is loaded into the same ``data.duckdb`` as the first.
The first dataset's table stays in that file (nothing is lost), but the second investigation
neither offers it to the model (tool definitions, prompts, tool results) nor writes it to the
report or the memory store, and its tools refuse it when asked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tasks.investigation import investigation
from tasks.request import Request
from sql_tools import QueryRejected, ToolInputError
from tasks.agent.config import AgentConfig
from tasks.run import Run
from tasks.tools import call as call_tool
from tests.agent.test_agent import Scripted, _proposal, call, results, turn
from tests.support.records import store_text
from tests.test_hostile_values import weeks_csv

# Slow end to end (flow runs on datasets of their own):
# left to `make test-slow`, which CI runs.
pytestmark = pytest.mark.slow

MARKER = "ZEBRA-7781-Quartz"  # a value only the first dataset holds
FIRST = ("payroll", "employee", "salary")  # its table and columns
WEEKS = {"baseline": "2024-01-01:2024-01-07", "comparison": "2024-01-08:2024-01-14"}


def _datasets(root: Path) -> tuple[Path, Path]:
    """Dataset A (payroll: employee, salary) and dataset B (orders: country, revenue)."""
    a = root / "a" / "payroll.csv"
    a.parent.mkdir()
    text = weeks_csv("employee", [MARKER, "Other"], falling=[MARKER])
    a.write_text(text.replace("units,revenue", "units,salary", 1), encoding="utf-8")
    b = root / "b" / "orders.csv"
    b.parent.mkdir()
    b.write_text(weeks_csv("country", ["DE", "FR", "IT"], falling=["FR"]), encoding="utf-8")
    return a, b


def _leaks(text: str) -> list[str]:
    return [word for word in (MARKER, *FIRST) if word in text]


@pytest.fixture
def second_investigation(tmp_path, monkeypatch) -> dict[str, Any]:
    """Dataset A investigated offline, then dataset B with a scripted model, both with the
    default ``--out`` from the same folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DRILLDOWN_STORE_PATH", str(tmp_path / "memory.duckdb"))
    a, b = _datasets(tmp_path)
    first = Request(
        data=[str(a)], metric="sum(salary)", time_column="day", offline=True, remember=False,
        **WEEKS,
    )  # fmt: skip
    investigation(first)

    def model(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("tool_choice", {}).get("type") == "tool":
            return _proposal({"country": "FR"})
        if turn(body) == 0:
            return call("metric_sample", {"table": "orders", "n": 50})
        [(is_error, payload)] = results(body)
        assert not is_error
        summary = {"status": "ruled_out", "confidence": "low", "summary": "s", "evidence": ["q-1"]}
        return call("conclude", summary)

    scripted = Scripted(model)
    second = Request(data=[str(b)], metric="sum(revenue)", time_column="day", **WEEKS)
    investigation(second, client=scripted.client(), config=AgentConfig(concurrency=1))
    out = tmp_path / Request.model_fields["out"].default
    return {"out": out, "requests": scripted.requests, "store": tmp_path / "memory.duckdb"}


def test_the_model_is_given_nothing_of_the_previous_dataset(second_investigation):
    requests = second_investigation["requests"]
    assert len(requests) > 2
    for body in requests:
        names = {t["name"] for t in body["tools"]}
        assert _leaks(json.dumps(body["tools"])) == [], names
        assert _leaks(json.dumps(body["system"])) == []
        assert _leaks(json.dumps(body["messages"])) == []


def test_the_report_and_the_memory_hold_nothing_of_the_previous_dataset(second_investigation):
    out = second_investigation["out"]
    written = [p for p in out.rglob("*") if p.is_file() and p.name != "data.duckdb"]
    assert {p.name for p in written} >= {"report.md", "report.html", "result.json"}
    for path in written:
        assert _leaks(path.read_bytes().decode("utf-8", "replace")) == [], path.name
    assert _leaks(store_text(second_investigation["store"])) == []
    with duckdb.connect(str(out / "data.duckdb"), read_only=True) as con:  # nothing was lost
        assert con.execute("SELECT count(*) FROM payroll").fetchone()[0] > 0


def test_the_tools_refuse_the_previous_dataset(second_investigation):
    """The investigation's tool context knows only this load's tables: a tool call naming the
    first dataset's table, and a query over it, are refused."""
    db = second_investigation["out"] / "data.duckdb"
    question = {"metric": "sum(revenue)", "time_column": "day", **WEEKS}
    with Run(db, question, tables=["orders"]) as run:
        assert run.ctx.schema.table_names == ["orders"]
        assert set(run.fingerprint) == {"orders"}
        with pytest.raises(ToolInputError) as refused:
            call_tool(run.ctx, "metric_sample", {"table": "payroll"})
        assert refused.value.code == "unknown_table"
        with pytest.raises(QueryRejected):
            run.ctx.run('SELECT * FROM "payroll"', max_rows=1)

"""The ``investigate`` flow: load -> decompose -> recall -> hypothesize -> investigate each
hypothesis (concurrently) -> gate -> report -> remember.

Run as a Prefect flow (``prefect deployment run investigate/default``, or ``drilldown investigate
--prefect``) every step is a task with its retry and cache policy, runs show up in the UI with a
progress artifact, the report as a markdown artifact and the findings as a table artifact.
Called as a plain function (``investigate.fn(...)``, what ``drilldown investigate`` does without
a Prefect server) the same steps run in-process without Prefect's engine.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from prefect import flow

from sql_tools.output import printable
from tasks import (
    decompose,
    gate,
    hypothesize,
    load,
    persist,
    report,
    storage,
)
from tasks import (
    investigate as investigate_mod,
)

Progress = Callable[[int, int, dict[str, Any]], None]
_PROGRESS: dict[str, Progress] = {}


@flow(name="investigate")
def investigate(
    data: list[str],
    metric: str,
    baseline: str,
    comparison: str,
    table: str | None = None,
    time_column: str | None = None,
    period_column: str | None = None,
    grain: str | None = None,
    dimensions: list[str] | None = None,
    filters: list[str] | None = None,
    out: str = "drilldown-out",
    db: str | None = None,
    offline: bool = False,
    model: str | None = None,
    remember: bool = True,
    max_depth: int | None = None,
    min_support: float | None = None,
    metrics_file: str | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Explain why ``metric`` moved from ``baseline`` to ``comparison`` (date ranges
    ``YYYY-MM-DD:YYYY-MM-DD`` on ``time_column``, or labels of ``period_column``) and write
    result.json, report.md and the evidence ledger into ``out``. Without ANTHROPIC_API_KEY, or
    with ``offline``, the offline planner investigates. ``source`` names where the data comes
    from, so that investigations of its later versions share memory with this one."""
    offline = offline or not os.environ.get("ANTHROPIC_API_KEY")
    source = _source_name(source)
    db = _load(data, db, out)
    qargs = {
        "metric": metric, "table": table, "time_column": time_column,
        "period_column": period_column, "baseline": baseline, "comparison": comparison,
        "grain": grain, "dimensions": dimensions, "filters": filters or [],
        "max_depth": max_depth, "min_support": min_support, "metrics_file": metrics_file,
    }  # fmt: skip
    try:
        h = decompose.data_hash(db)
        if metrics_file:  # a named metric's definition is part of what is cached on
            h = decompose.fingerprint_hash({"data": h, "metrics": _file_hash(metrics_file)})
        explanation = _step(decompose, "decompose", db, qargs, h)
        history = (
            _step(persist, "recall_history", db, qargs, explanation, source) if remember else None
        )
        if history and history.get("warning"):
            _say(f"warning: {history['warning']}")
        elif history and history["similar"]:
            _say(f"{len(history['similar'])} similar past investigation(s) found")
        planned = _step(hypothesize, "hypothesize", db, qargs, h, offline, model, history)
        _say(f"investigating {len(planned['planned'])} hypotheses ({_who(planned, model)})")
        runs = _map_hypotheses(db, qargs, h, planned["planned"], offline, model)
        result = _assemble(explanation, planned, runs, history, model)
        result["findings"] = _step(gate, "verify_findings", db, qargs, result["findings"])
        entries = [e for r in runs for e in r["entries"]]
        written = _step(report, "write_report", out, db, result, entries)
        _artifacts(written["report_md"], result)
        saved = None
        if remember:
            saved = _step(
                persist, "remember", db, qargs, result, entries, written["report_md"], source
            )
            if saved.get("warning"):
                _say(f"warning: {saved['warning']}")
    finally:
        decompose.release(db)
    return {
        "out": out,
        "db": db,
        "run_id": saved["run_id"] if saved else None,
        "change": result["change"],
        "root_causes": [c["segment"] for c in result["root_causes"]],
        "hypotheses": {x["id"]: x["status"] for x in result["hypotheses"]},
        "paths": written["paths"],
    }


def _say(message: str) -> None:
    """A progress line (hidden characters escaped): the run logger in a flow run, standard
    error otherwise."""
    message = printable(message)
    if _in_flow():
        from prefect.logging import get_run_logger

        get_run_logger().info(message)
    else:
        print(message, file=sys.stderr)


def _source_name(source: str | None) -> str | None:
    """The data source's name, spaces collapsed; None when not given."""
    if source is None:
        return None
    name = " ".join(source.split())
    if not 1 <= len(name) <= 1000:
        raise ValueError(f"a source name has 1 to 1000 characters, got {source[:80]!r}")
    return name


def _file_hash(path: str) -> str:
    import hashlib

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"  # build_question reports the file itself


def _who(planned: dict[str, Any], model: str | None) -> str:
    if planned["mode"] == "offline":
        return "offline planner"
    from tasks.agent.config import AgentConfig

    return AgentConfig.from_env(model=model).model


def _in_flow() -> bool:
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


def _step(module: ModuleType, name: str, *args: Any) -> Any:
    """A unit of work: its Prefect task inside a flow run, its plain function otherwise."""
    if _in_flow():
        return getattr(module, f"{name}_task")(*args)
    return getattr(module, name)(*args)


def _load(data: list[str], db: str | None, out: str) -> str:
    Path(out).mkdir(parents=True, exist_ok=True)
    local = storage.local_paths(data, Path(out) / "uploads", say=_say)
    if len(local) == 1 and local[0].endswith(".duckdb") and db is None:
        return local[0]
    target = db or str(Path(out) / "data.duckdb")
    loaded = load.load(local, target) if _in_flow() else load.load_files(local, target)
    for t in loaded.tables:
        _say(f"{t.status:9} {t.table}: {t.rows:,} rows")
    return target


def _map_hypotheses(
    db: str, qargs: dict[str, Any], h: str, items: list[dict[str, Any]], offline: bool,
    model: str | None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every hypothesis investigated, concurrently; progress reported as each one completes."""
    tracker = _Tracker(len(items))
    if _in_flow():
        from prefect.futures import as_completed
        from prefect.utilities.annotations import unmapped

        task = investigate_mod.investigate_hypothesis_task
        futures = task.map(
            unmapped(db), unmapped(qargs), unmapped(h), items, unmapped(offline), unmapped(model)
        )
        return _collect(futures, as_completed(futures), items, tracker)
    with cf.ThreadPoolExecutor(max_workers=1 if offline else 4) as pool:
        futures = [
            pool.submit(investigate_mod.investigate_hypothesis, db, qargs, h, it, offline, model)
            for it in items
        ]
        return _collect(futures, cf.as_completed(futures), items, tracker)


def _collect(
    futures: list[Any], completed: Any, items: list[dict[str, Any]], tracker: _Tracker
) -> list[dict[str, Any]]:
    """Results in the hypotheses' order, taken as they complete (Prefect or thread futures)."""
    done: dict[int, dict[str, Any]] = {}
    for fut in completed:
        i = futures.index(fut)
        try:
            done[i] = fut.result()
        except Exception as exc:  # one failed hypothesis never loses the others
            done[i] = investigate_mod.unavailable(items[i], f"{type(exc).__name__}: {exc}")
        tracker.done(done[i])
    return [done[i] for i in range(len(items))]


class _Tracker:
    """Progress as hypotheses complete: a Prefect progress artifact in a run, and the CLI's
    callback (registered in ``_PROGRESS``) when there is one."""

    def __init__(self, total: int) -> None:
        self.total, self.n, self.artifact = total, 0, None
        if _in_flow():
            from prefect.artifacts import create_progress_artifact

            self.artifact = create_progress_artifact(
                progress=0.0, key="investigation-progress", description="Hypotheses investigated"
            )

    def done(self, run: dict[str, Any]) -> None:
        self.n += 1
        if self.artifact is not None:
            from prefect.artifacts import update_progress_artifact

            update_progress_artifact(self.artifact, progress=100.0 * self.n / max(self.total, 1))
        for callback in _PROGRESS.values():
            callback(self.n, self.total, run)


def _assemble(
    explanation: dict[str, Any],
    planned: dict[str, Any],
    runs: list[dict[str, Any]],
    history: dict[str, Any] | None,
    model: str | None,
) -> dict[str, Any]:
    """result.json: the engine's answer plus hypotheses, findings, history and agent stats."""
    from tasks.agent.config import AgentConfig
    from tasks.agent.models import Usage
    from tasks.agent.run import HypothesisRun, combine, result_sections

    config = AgentConfig.from_env(model=model)
    combined, ledger = combine(
        [HypothesisRun.model_validate(r) for r in runs],
        client_used=planned["mode"] == "claude",
        config=config,
        usage=Usage.model_validate(planned["usage"]),
        notes=planned["notes"],
        elapsed_ms=sum(r["outcome"]["elapsed_ms"] for r in runs),
    )
    sections = result_sections(combined, ledger)
    result = dict(explanation)
    result["hypotheses"], result["findings"] = sections["hypotheses"], sections["findings"]
    result["stats"] = {**result.get("stats", {}), "agent": sections["agent"]}
    result["similar_investigations"] = (history or {}).get("similar", [])
    return result


def _artifacts(report_md: str, result: dict[str, Any]) -> None:
    """The report as a markdown artifact and the findings as a table artifact (in a run)."""
    if not _in_flow():
        return
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    create_markdown_artifact(markdown=report_md, key="investigation-report",
                             description="report.md")  # fmt: skip
    rows = [
        {
            "segment": printable(", ".join(f"{k}={v}" for k, v in f["segment"].items()))
            or "everything",
            "category": f["category"],
            "status": f["status"],
            "share": None if f.get("share") is None else round(f["share"], 4),
            "p_value": f.get("p_value"),
            "critique": f.get("critique") or "",
        }
        for f in result["findings"]
    ]
    create_table_artifact(table=rows or [{"segment": "no findings"}], key="investigation-findings",
                          description="Findings, accepted and dismissed")  # fmt: skip

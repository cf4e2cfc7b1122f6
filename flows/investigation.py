"""An investigation: load -> decompose -> recall -> hypothesize -> investigate each hypothesis
(concurrently) -> gate -> report -> remember.

:func:`investigation` is the one place these steps are composed. Inside a flow run (the
``investigate`` flow of :mod:`flows.investigate`: ``prefect deployment run investigate/default``,
or ``drilldown investigate --prefect``) every step is a Prefect task (:mod:`flows.steps`) with its
retry and cache policy, runs show up in the UI with a progress artifact, the report as a markdown
artifact and the findings as a table artifact. ``drilldown investigate`` without a Prefect server
calls :func:`investigation` itself: the same composition, each step's plain function
(:mod:`flows.step_functions`) in-process, and Prefect is never imported.

The steps share one :class:`~tasks.run.Run` (the database, the question, the data's identity and
the run's one read-only connection), handed from step to step and closed at the end.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from flows import step_functions as steps
from sql_tools import ToolInputError, is_postgres_url
from sql_tools.output import printable, secrets_note
from tasks import outdir
from tasks.ingest import storage
from tasks.run import Progress, Run, check_question_text


class Request(BaseModel):
    """What to investigate: the ``investigate`` flow's parameters (see
    :func:`flows.investigate.investigate`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: list[str]
    metric: str
    baseline: str
    comparison: str
    table: str | None = None
    time_column: str | None = None
    period_column: str | None = None
    grain: str | None = None
    dimensions: list[str] | None = None
    filters: list[str] | None = None
    out: str = "drilldown-out"
    db: str | None = None
    offline: bool = False
    model: str | None = None
    remember: bool = True
    max_depth: int | None = None
    min_support: float | None = None
    metrics_file: str | None = None
    source: str | None = None
    load_options: dict[str, Any] | None = None
    """How the files are read (``LoadOptions``' fields: encoding, delimiter, decimal_comma,
    date_format, max_rows, max_bytes); None: detected."""

    def question(self) -> dict[str, Any]:
        """The question's arguments, as the engine's parser takes them."""
        return {
            "metric": self.metric, "table": self.table, "time_column": self.time_column,
            "period_column": self.period_column, "baseline": self.baseline,
            "comparison": self.comparison, "grain": self.grain, "dimensions": self.dimensions,
            "filters": list(self.filters or []), "max_depth": self.max_depth,
            "min_support": self.min_support, "metrics_file": self.metrics_file,
        }  # fmt: skip


def investigation(
    req: Request, progress: Progress | None = None, *, client: Any = None, config: Any = None
) -> dict[str, Any]:
    """The investigation's steps, composed: as Prefect tasks inside a flow run, as plain
    functions otherwise. ``progress`` is called as each hypothesis completes; ``client`` and
    ``config`` set the run's Claude client and agent settings (default: from the environment).
    Returns the run's summary (out, db, run id, change, root causes, hypotheses, paths, and
    the passes over each source table: :class:`~sql_tools.passes.Passes`)."""
    offline = req.offline or (client is None and not os.environ.get("ANTHROPIC_API_KEY"))
    source = _source_name(req.source)
    check_question_text(req.question())  # a question no data can answer loads nothing
    taken = outdir.claim(req.out)  # this run's alone; refused: not the product's, or a link
    made = [*taken.created, *_not_there_yet(req)]
    written: dict[str, Any] | None = None
    try:
        db, tables = _load(req.data, req.db, req.out, req.load_options)
        run = Run(
            db, req.question(), source=source, progress=progress, client=client, config=config,
            tables=tables,
        )  # fmt: skip
        with run:
            passes = run.ctx.passes
            result, entries = _investigate(run, db, req, offline)
            with passes.during("report"):
                written = _call(steps.write_report, run, req.out, result, entries)
            _artifacts(written["artifact_md"], result)
            saved = None
            if req.remember:  # raises when the save does not land: the report stays written
                saved = _call(steps.remember, run, result, entries, written["report_md"])
    except BaseException:
        if written is None:  # refused or failed before its report: it leaves nothing behind
            _remove(made)
        raise
    finally:
        taken.release()  # after any clean-up: never under another run
    assert written is not None
    return {
        "out": req.out,
        "db": run.db if is_postgres_url(db) else db,  # a URL without its password
        "run_id": saved["run_id"] if saved else None,
        "kept_locally": bool(saved and saved.get("kept_locally")),  # until `drilldown sync`
        "change": result["change"],
        "root_causes": [c["segment"] for c in result["root_causes"]],
        "hypotheses": {x["id"]: x["status"] for x in result["hypotheses"]},
        "paths": written["paths"],
        "passes": passes.stats(),  # every step's, the report's too
    }


def _investigate(
    run: Run, db: str, req: Request, offline: bool
) -> tuple[dict[str, Any], list[Any]]:
    """The steps from the engine to the verified findings: the assembled result, and the
    entries of every hypothesis's tool calls."""
    if is_postgres_url(db):
        _say(f"postgres  {run.db}: {', '.join(run.ctx.schema.table_names)}")
    passes = run.ctx.passes
    with passes.during("engine"):
        explanation = _call(steps.decompose, run)
    history = _call(steps.recall_history, run, explanation) if req.remember else None
    if history and history.get("warning"):
        _say(f"warning: {history['warning']}")
    elif history and history["similar"]:
        _say(f"{len(history['similar'])} similar past investigation(s) found")
    with passes.during("hypotheses"):
        planned = _call(steps.hypothesize, run, offline, req.model, history)
        _say(f"investigating {len(planned['planned'])} hypotheses ({_who(run, planned, req)})")
        runs = _map_hypotheses(run, planned["planned"], offline, req.model)
    result = _assemble(run, explanation, planned, runs, history, req.model)
    with passes.during("verify"):
        result["findings"] = _call(steps.verify_findings, run, result["findings"])
    entries = [e for r in runs for e in r["entries"]]
    _note_masked(result, entries)
    # the passes until now: the report's charts read the source after (see docs/method.md)
    result["stats"]["passes"] = passes.stats()
    return result, entries


def _not_there_yet(req: Request) -> list[Path]:
    """The paths an investigation of local files may create that do not exist yet, once it
    holds its ``out`` folder: the database it loads into (in ``out`` or wherever ``--db`` puts
    it) and that database's write-ahead log, and its uploads."""
    if any(is_postgres_url(d) for d in req.data):
        return []
    out = Path(req.out)
    target = Path(req.db) if req.db else out / "data.duckdb"
    paths = [out, target, target.with_name(target.name + ".wal"), out / "uploads"]
    return [p for p in paths if not p.exists() and not p.is_symlink()]


def _remove(paths: list[Path]) -> None:
    """Remove what a failed investigation created (best effort: a path it cannot remove is
    left, and the failure's own error is the one reported)."""
    import shutil

    for p in paths:
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
        except OSError:
            pass


def _call(step: Callable[..., Any], *args: Any) -> Any:
    """A step: its Prefect task inside a flow run, its plain function otherwise."""
    return _task(step)(*args) if _in_flow() else step(*args)


def _task(step: Callable[..., Any]) -> Any:
    """The Prefect task of a step's plain function (:mod:`flows.steps`, under the same name)."""
    from flows import steps as prefect_tasks

    return getattr(prefect_tasks, step.__name__)


def _say(message: str) -> None:
    """A progress line (hidden characters escaped): the run logger in a flow run, standard
    error otherwise."""
    if _in_flow():
        from prefect.logging import get_run_logger

        get_run_logger().info(printable(message))
    else:
        print(printable(message), file=sys.stderr)


def _source_name(source: str | None) -> str | None:
    """The data source's name, spaces collapsed; None when not given."""
    if source is None:
        return None
    name = " ".join(source.split())
    if not 1 <= len(name) <= 1000:
        raise ValueError(f"a source name has 1 to 1000 characters, got {source[:80]!r}")
    return name


def _who(run: Run, planned: dict[str, Any], req: Request) -> str:
    if planned["mode"] == "offline":
        return "offline planner"
    from tasks.agent.steps import agent_config

    return agent_config(run, req.model).model


def _in_flow() -> bool:
    """Whether this runs inside a Prefect flow run: never while Prefect is not even loaded."""
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


def _load(
    data: list[str], db: str | None, out: str, options: dict[str, Any] | None = None
) -> tuple[str, list[str] | None]:
    """The database to investigate and the tables the investigation may see: a
    ``postgresql://`` URL as it is (its tables are read in place, nothing is written) and a
    ``.duckdb`` file as it is, every table; else the files loaded into ``db``, and only the
    tables they were loaded into (the file may hold an earlier load's tables, which this
    investigation was not given). ``options`` say how files are read; given with a database,
    which is not read from files, they are refused."""
    if any(is_postgres_url(d) for d in data):
        if len(data) != 1 or db is not None:
            raise ToolInputError(
                "a postgresql:// URL is read in place: give it as the only data, without --db"
            )
        _no_load_options(options, "a postgresql:// URL is read in place")
        return data[0], None
    Path(out).mkdir(parents=True, exist_ok=True)
    local = storage.local_paths(data, Path(out) / "uploads", say=_say)
    if len(local) == 1 and local[0].endswith(".duckdb") and db is None:
        _no_load_options(options, f"{Path(local[0]).name} is a database, already loaded")
        return local[0], None
    target = db or str(Path(out) / "data.duckdb")
    loaded = _call(steps.load, local, target, options)
    for t in loaded.tables:
        _say(f"{t.status:9} {t.table}: {t.rows:,} rows")
        for w in t.warnings:
            _say(f"          warning: {printable(w)}")
    return target, [t.table for t in loaded.tables]


def _no_load_options(options: dict[str, Any] | None, why: str) -> None:
    """Refuse options that say how files are read when no file is read."""
    if options:
        given = ", ".join("--" + k.replace("_", "-") for k in options)
        raise ToolInputError(f"{given}: {why}; these options apply to CSV files being loaded")


def _map_hypotheses(
    run: Run, items: list[dict[str, Any]], offline: bool, model: str | None
) -> list[dict[str, Any]]:
    """Every hypothesis investigated, concurrently; progress reported as each one completes."""
    tracker = _Tracker(len(items), run.progress)
    if _in_flow():
        from prefect.futures import as_completed
        from prefect.utilities.annotations import unmapped

        futures = _task(steps.investigate_hypothesis).map(
            unmapped(run), items, unmapped(offline), unmapped(model)
        )
        return _collect(futures, as_completed(futures), items, tracker)
    from tasks.agent.steps import agent_config

    workers = 1 if offline else agent_config(run, model).concurrency
    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(steps.investigate_hypothesis, run, it, offline, model) for it in items
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
        except Exception as exc:  # one failed hypothesis never loses the others, nor its work
            from tasks.agent.steps import interrupted

            reason = f"{type(exc).__name__}: {exc}"
            done[i] = interrupted(items[i], reason, getattr(exc, "done", None))
        tracker.done(done[i])
    return [done[i] for i in range(len(items))]


class _Tracker:
    """Progress as hypotheses complete: a Prefect progress artifact in a run, and the run's
    ``progress`` callback when it has one."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.n, self.artifact, self.progress = total, 0, None, progress
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
        if self.progress is not None:
            self.progress(self.n, self.total, run)
        else:
            o = run["outcome"]
            _say(f"  [{self.n}/{self.total}] {o['hypothesis']['id']} {o['status']:12} "
                 f"{o['hypothesis']['title']}")  # fmt: skip


def _assemble(
    run: Run,
    explanation: dict[str, Any],
    planned: dict[str, Any],
    runs: list[dict[str, Any]],
    history: dict[str, Any] | None,
    model: str | None,
) -> dict[str, Any]:
    """result.json: the engine's answer plus hypotheses, findings, history and agent stats."""
    from tasks.agent.models import Usage
    from tasks.agent.run import HypothesisRun, combine, result_sections
    from tasks.agent.steps import agent_config

    config = agent_config(run, model)
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


def _note_masked(result: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Say in the result's notes (and so in the reports) how many secret-shaped values the
    outputs show masked (``output.mask_secrets``)."""
    note = secrets_note(result, entries)
    if note is not None:
        result["notes"] = [*(result.get("notes") or []), note]


def _artifacts(report_md: str, result: dict[str, Any]) -> None:
    """The report (report.md without its chart links, rendered from the same report model) as a
    markdown artifact and the findings as a table artifact (in a run)."""
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

"""An investigation: load -> decompose -> recall -> hypothesize -> investigate each hypothesis
(concurrently) -> gate -> report -> remember.

:func:`investigation` is the one place these steps (:mod:`tasks.steps`) are composed, a plain
pipeline over a :class:`Request`. How each step runs is the :class:`Road` it is given: in this
process by default (``drilldown investigate`` without a Prefect server: each step's plain
function, the hypotheses in a thread pool, progress on standard error; Prefect is never
imported), or as Prefect tasks inside the ``investigate`` flow's run (:mod:`flows.investigate`:
``prefect deployment run investigate/default``, or ``drilldown investigate --prefect``).

The steps share one :class:`~tasks.run.Run` (the database, the question, the data's identity and
the run's one read-only connection), handed from step to step and closed at the end.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sql_tools import ToolInputError, is_postgres_url
from sql_tools.output import dumps, printable, secrets_note
from tasks import outdir, steps
from tasks.ingest import storage
from tasks.request import Request
from tasks.run import Progress, Run, check_question_text


@dataclass(frozen=True)
class Road:
    """How the steps run: each step's function (a plain function here, its Prefect task on the
    flow's road), how the hypotheses are investigated concurrently, where progress lines go,
    and what a run publishes beside its files. This one runs in this process."""

    load: Callable[..., Any] = steps.load
    decompose: Callable[..., Any] = steps.decompose
    recall_history: Callable[..., Any] = steps.recall_history
    hypothesize: Callable[..., Any] = steps.hypothesize
    investigate_hypothesis: Callable[..., Any] = steps.investigate_hypothesis
    verify_findings: Callable[..., Any] = steps.verify_findings
    write_report: Callable[..., Any] = steps.write_report
    remember: Callable[..., Any] = steps.remember

    def completed(
        self, run: Run, items: list[dict[str, Any]], offline: bool, model: str | None
    ) -> Iterator[tuple[int, Any]]:
        """Every hypothesis investigated, concurrently: (its index, its future) as each
        completes."""
        from tasks.agent.steps import agent_config

        workers = 1 if offline else agent_config(run, model).concurrency
        with cf.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(self.investigate_hypothesis, run, it, offline, model) for it in items
            ]
            for fut in cf.as_completed(futures):
                yield futures.index(fut), fut

    def say(self, message: str) -> None:
        """A progress line (hidden characters escaped), on standard error."""
        print(printable(message), file=sys.stderr)

    def tracker(self, total: int) -> Callable[[int], None] | None:
        """Called with how many of ``total`` hypotheses are done, as each completes (None:
        nothing to update but the run's progress)."""
        return None

    def publish(self, report_md: str, result: dict[str, Any]) -> None:
        """What the run shows besides its files: nothing, in this process."""


IN_PROCESS = Road()


def investigation(
    req: Request,
    progress: Progress | None = None,
    *,
    client: Any = None,
    config: Any = None,
    road: Road = IN_PROCESS,
) -> dict[str, Any]:
    """The investigation's steps, composed, each run on ``road``. ``progress`` is called as
    each hypothesis completes; ``client`` and ``config`` set the run's Claude client and agent
    settings (default: from the environment). Returns the run's summary (out, db, run id,
    change, root causes, hypotheses, paths, the passes over each source table:
    :class:`~sql_tools.passes.Passes`, and ``result``: result.json's content)."""
    offline = req.offline or (client is None and not os.environ.get("ANTHROPIC_API_KEY"))
    source = _source_name(req.source)
    check_question_text(req.question())  # a question no data can answer loads nothing
    taken = outdir.claim(req.out)  # this run's alone; refused: not the product's, or a link
    made = [*taken.created, *_not_there_yet(req)]
    written: dict[str, Any] | None = None
    try:
        db, tables = _load(road, req)
        run = Run(
            db, req.question(), source=source, progress=progress, client=client, config=config,
            tables=tables,
        )  # fmt: skip
        with run:
            passes = run.ctx.passes
            result, entries = _investigate(road, run, db, req, offline)
            with passes.during("report"):
                written = road.write_report(run, req.out, result, entries)
            road.publish(written["artifact_md"], result)
            saved = None
            if req.remember:  # raises when the save does not land: the report stays written
                saved = road.remember(run, result, entries, written["report_md"])
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
        "result": json.loads(dumps(result)),  # as result.json holds it
    }


def _investigate(
    road: Road, run: Run, db: str, req: Request, offline: bool
) -> tuple[dict[str, Any], list[Any]]:
    """The steps from the engine to the verified findings: the assembled result, and the
    entries of every hypothesis's tool calls."""
    if is_postgres_url(db):
        road.say(f"postgres  {run.db}: {', '.join(run.ctx.schema.table_names)}")
    passes = run.ctx.passes
    with passes.during("engine"):
        explanation = road.decompose(run)
    history = road.recall_history(run, explanation) if req.remember else None
    if history and history.get("warning"):
        road.say(f"warning: {history['warning']}")
    elif history and history["similar"]:
        road.say(f"{len(history['similar'])} similar past investigation(s) found")
    with passes.during("hypotheses"):
        planned = road.hypothesize(run, offline, req.model, history)
        road.say(f"investigating {len(planned['planned'])} hypotheses "
                 f"({_who(run, planned, req)})")  # fmt: skip
        runs = map_hypotheses(road, run, planned["planned"], offline, req.model)
    result = _assemble(run, explanation, planned, runs, history, req.model)
    with passes.during("verify"):
        result["findings"] = road.verify_findings(run, result["findings"])
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


def _load(road: Road, req: Request) -> tuple[str, list[str] | None]:
    """The database to investigate and the tables the investigation may see: a
    ``postgresql://`` URL as it is (its tables are read in place, nothing is written) and a
    ``.duckdb`` file as it is, every table; else the files loaded into ``--db`` (default:
    ``out/data.duckdb``), and only the tables they were loaded into (the file may hold an
    earlier load's tables, which this investigation was not given). The request's load options
    say how files are read; given with a database, which is not read from files, they are
    refused."""
    data, options = req.data, req.load_options
    if any(is_postgres_url(d) for d in data):
        if len(data) != 1 or req.db is not None:
            raise ToolInputError(
                "a postgresql:// URL is read in place: give it as the only data, without --db"
            )
        _no_load_options(options, "a postgresql:// URL is read in place")
        return data[0], None
    Path(req.out).mkdir(parents=True, exist_ok=True)
    local = storage.local_paths(data, Path(req.out) / "uploads", say=road.say)
    if len(local) == 1 and local[0].endswith(".duckdb") and req.db is None:
        _no_load_options(options, f"{Path(local[0]).name} is a database, already loaded")
        return local[0], None
    target = req.db or str(Path(req.out) / "data.duckdb")
    loaded = road.load(local, target, options)
    for t in loaded.tables:
        road.say(f"{t.status:9} {t.table}: {t.rows:,} rows")
        for w in t.warnings:
            road.say(f"          warning: {printable(w)}")
    return target, [t.table for t in loaded.tables]


def _no_load_options(options: dict[str, Any] | None, why: str) -> None:
    """Refuse options that say how files are read when no file is read."""
    if options:
        given = ", ".join("--" + k.replace("_", "-") for k in options)
        raise ToolInputError(f"{given}: {why}; these options apply to CSV files being loaded")


def map_hypotheses(
    road: Road, run: Run, items: list[dict[str, Any]], offline: bool, model: str | None
) -> list[dict[str, Any]]:
    """Every hypothesis investigated, concurrently on ``road``; results in the hypotheses'
    order, progress reported as each one completes. One failed hypothesis never loses the
    others, nor the work it did before it failed."""
    from tasks.agent.steps import interrupted

    update = road.tracker(len(items))
    done: dict[int, dict[str, Any]] = {}
    for i, fut in road.completed(run, items, offline, model):
        try:
            done[i] = fut.result()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            done[i] = interrupted(items[i], reason, getattr(exc, "done", None))
        if update is not None:
            update(len(done))
        if run.progress is not None:
            run.progress(len(done), len(items), done[i])
        else:
            o = done[i]["outcome"]
            road.say(f"  [{len(done)}/{len(items)}] {o['hypothesis']['id']} {o['status']:12} "
                     f"{o['hypothesis']['title']}")  # fmt: skip
    return [done[i] for i in range(len(items))]


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

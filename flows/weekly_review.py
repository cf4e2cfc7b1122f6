"""The ``weekly-review`` flow: every week, measure the key metrics and investigate the ones that
moved, each metric in a flow run of its own.

``metrics.yaml`` names the metrics (its ``metrics:`` section, the format ``--metric NAME``
reads) and says what to review (its ``review:`` section: data, table, time column, dimensions,
thresholds). Data in Supabase Storage (``supabase://bucket/prefix``) is downloaded as
``investigate`` downloads it, once, into ``OUT/uploads``, and loaded once into
``OUT/data.duckdb``. The review compares the last complete week (Monday to Sunday before
``as_of``) with the week before. A week whose data has not arrived yet (for a metric with
filters: whose filtered rows have not), or that was already reviewed on the same data, is
skipped with the reason.

Otherwise each metric is reviewed by a child flow run of ``review-metric``
(:mod:`flows.review_metric`, started by :mod:`flows.metric_runs`): measured with the engine,
cheaply, and, when the move is significant (p below ``alpha``) and at least
``min_relative_change``, investigated by the ``investigate`` flow into ``OUT/<metric>/<week>``
on the same files, remembered under the review's source name. The children run through the deployment ``metric_deployment`` when the
Prefect server has it, so that the workers of its pool share a long list (on several machines
when they see ``OUT`` at the same path and share a result storage), and as in-process subflows
otherwise; at most ``concurrency`` at once. A markdown artifact ``weekly-review`` lists every
metric, moved, not moved or failed, with a link to its flow run.

``OUT`` is held by the review for as long as it runs, and taken as ``investigate`` takes its
folder (:mod:`tasks.outdir`): a folder of someone else's files, or holding a link, is refused,
and every file is written without following a link.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import yaml
from prefect import flow
from prefect.states import Failed, State
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flows import steps
from flows.metric_runs import METRIC_DEPLOYMENT, child_deployment, review_metrics
from flows.review_metric import Latest, Thresholds, latest_date
from sql_tools import one_line
from sql_tools.catalog import jsonable
from sql_tools.output import masked
from tasks.ingest.storage import local_paths, storage_url
from tasks.outdir import claim, write_file
from tasks.request import Request
from tasks.run import data_hash

STATE_FILE = "weekly-review-state.json"
ARTIFACT_KEY = "weekly-review"


class ReviewConfig(BaseModel):
    """The ``review:`` section of ``metrics.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: list[str] = Field(
        min_length=1,
        description="Files or folders, relative to the file, or supabase://bucket/prefix.",
    )
    source: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="The data's name in the investigation memory. Default: the data locations.",
    )
    table: str | None = None
    time_column: str | None = None
    dimensions: list[str] | None = None
    metrics: list[str] | None = Field(default=None, description="Default: every named metric.")
    period_days: int = Field(default=7, ge=1, le=366)
    min_relative_change: float = Field(default=0.05, ge=0.0)
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)

    @property
    def thresholds(self) -> Thresholds:
        """When a move is worth an investigation."""
        return Thresholds(min_relative_change=self.min_relative_change, alpha=self.alpha)


class Review(BaseModel):
    """A parsed ``metrics.yaml``: the review settings, the metrics to review, and a copy of the
    ``metrics:`` section on its own (what the named-metric parser reads)."""

    config: ReviewConfig
    metrics: list[str]
    data: list[str]
    source: str
    metrics_only_file: str
    digest: str


@flow(name="weekly-review")
def weekly_review(
    metrics_file: str = "metrics.yaml",
    as_of: date | None = None,
    period_days: int | None = None,
    out: str = "drilldown-runs/weekly",
    offline: bool = False,
    remember: bool = True,
    force: bool = False,
    concurrency: Annotated[int, Field(ge=1, le=100)] = 4,
    metric_deployment: str | None = METRIC_DEPLOYMENT,
    metric_timeout: Annotated[float, Field(gt=0)] = 7200.0,
) -> dict[str, Any] | State[Any]:
    """Review every metric of ``metrics_file`` for the last complete week before ``as_of``
    (default: today, UTC) against the week before; investigate the ones that moved.

    Each metric is a child flow run of ``review-metric``, at most ``concurrency`` at once:
    through the deployment ``metric_deployment`` when the server has it (a run still unfinished
    after ``metric_timeout`` seconds, queued or running, is cancelled and counted as failed), as
    an in-process subflow when it does not, when no Prefect server is configured, or when
    ``metric_deployment`` is empty.

    A metric whose run fails (an unknown column, a data error, a failed investigation, a crashed
    worker) never stops the others: it is listed as failed with a one-line reason and a link to
    its run. The review then ends **Failed**, its message saying how many of how many metrics
    failed and which, with the summary as its data and the week left open so that a rerun
    reviews it. Failed rather than Completed with a note, because everything an on-call person
    watches keys on the state's type, not its name or message: the red run in the UI's run list
    and the dashboard, automations and notifications on "flow run Failed", and
    ``prefect deployment run --watch`` exiting non-zero. A Completed run named "completed with
    failures" stays green everywhere, and a broken metric would go unnoticed week after week.
    The metrics that did complete keep their results, rows and links either way.
    """
    with claim(out):  # this review's alone; refused: not the product's, or holding a link
        return _review(
            metrics_file, as_of, period_days, out, offline, remember, force, concurrency,
            metric_deployment, metric_timeout,
        )  # fmt: skip


def _review(
    metrics_file: str,
    as_of: date | None,
    period_days: int | None,
    out: str,
    offline: bool,
    remember: bool,
    force: bool,
    concurrency: int,
    metric_deployment: str | None,
    metric_timeout: float,
) -> dict[str, Any] | State[Any]:
    """The review of :func:`weekly_review`, in the output folder it holds."""
    from prefect.logging import get_run_logger

    review = read_review(metrics_file, out, period_days)
    baseline, comparison = review_periods(as_of or datetime.now(UTC).date(), review.config)
    summary = _summary(review, baseline, comparison, out)
    db = str(Path(out) / "data.duckdb")
    files = local_paths(review.data, Path(out) / "uploads", say=get_run_logger().info)
    steps.load(files, db)
    h = data_hash(db)
    requests = {
        m: metric_request(review, m, (baseline, comparison), files,
                          str(Path(out) / m / summary["week"]), offline=offline, remember=remember)
        for m in review.metrics
    }  # fmt: skip
    latest = latest_dates(db, requests)
    if nothing := no_new_data(latest, comparison):
        return _skip(summary, nothing)
    state = read_state(out)
    if not force and already_reviewed(state, summary["week"], h, review.digest):
        return _skip(summary, f"week {summary['week']} was already reviewed on this data")
    deployment = child_deployment(metric_deployment)
    summary["metric_deployment"] = deployment
    children = {
        name: {"request": request, "db": db, "thresholds": review.config.thresholds.model_dump()}
        for name, request in requests.items()
    }
    rows = review_metrics(children, deployment, concurrency, metric_timeout)
    for row in rows:
        if row.get("latest_date") is None and (known := latest[row["metric"]]) is not None:
            row["latest_date"] = jsonable(known.day)
    summary["metrics"] = rows
    return _finish(summary, state, h, review.digest)


# --------------------------------------------------------------------------------------------
# Reading metrics.yaml
# --------------------------------------------------------------------------------------------


def read_review(
    metrics_file: str | Path, out: str | Path, period_days: int | None = None
) -> Review:
    """Parse ``metrics_file``: its ``review:`` section, and its ``metrics:`` section through the
    named-metric parser (written to ``OUT/metrics/<digest>.yaml``, the file investigations get).

    Raises:
        ValueError: A missing or malformed file, section or key (one line, naming the file).
    """
    from sql_tools import ToolInputError
    from tasks.engine.parse import load_metrics

    path = Path(metrics_file)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the metrics file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: invalid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(doc, dict) or set(doc) != {"metrics", "review"}:
        raise ValueError(f"{path}: expected two top-level keys, 'metrics' and 'review'")
    section = doc["review"] if doc["review"] is not None else {}
    if period_days is not None:
        section = {**section, "period_days": period_days} if isinstance(section, dict) else section
    try:
        config = ReviewConfig.model_validate(section)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"{path}: review.{where}: {err['msg']}") from None
    text = yaml.safe_dump({"metrics": doc["metrics"]}, sort_keys=False, allow_unicode=True)
    digest = hashlib.sha256(
        (text + json.dumps(config.model_dump(), sort_keys=True)).encode()
    ).hexdigest()
    only = write_file(out, f"metrics/{digest[:16]}.yaml", text)
    try:
        defs = load_metrics(only)
    except ToolInputError as exc:
        raise ValueError(exc.message.replace(str(only), str(path))) from None
    names = config.metrics if config.metrics is not None else list(defs)
    unknown = [n for n in names if n not in defs]
    if unknown or not names:
        raise ValueError(
            f"{path}: review.metrics names {', '.join(map(repr, unknown)) or 'no metric'}; "
            f"the metrics are {', '.join(map(repr, defs))}"
        )
    base = path.resolve().parent
    data = [d if storage_url(d) else str(base / d) for d in config.data]
    source = config.source or ", ".join(data)
    if len(source) > 1000:
        raise ValueError(f"{path}: review.data is too long to name the data; set review.source")
    return Review(
        config=config, metrics=names, data=data, source=source, metrics_only_file=str(only),
        digest=digest,
    )  # fmt: skip


def review_periods(as_of: date, config: ReviewConfig) -> tuple[tuple[date, date], ...]:
    """(baseline, comparison) as (first day, last day): the comparison ends on the last Sunday
    before ``as_of`` and spans ``period_days`` days (7: that Monday to Sunday); the baseline is
    the same number of days just before it."""
    end = as_of - timedelta(days=as_of.isoweekday())
    start = end - timedelta(days=config.period_days - 1)
    before = start - timedelta(days=1)
    return (before - timedelta(days=config.period_days - 1), before), (start, end)


def metric_request(
    review: Review,
    name: str,
    periods: tuple[tuple[date, date], tuple[date, date]],
    data: list[str],
    out: str,
    **how: bool,
) -> Request:
    """The investigation of the named metric's move between ``periods`` (baseline, comparison)
    on the review's files ``data`` into ``out``, remembered under the review's source name
    (definition first, then the review's defaults); ``how``: ``offline``, ``remember``."""
    from tasks.engine.parse import load_metrics

    mdef = load_metrics(Path(review.metrics_only_file))[name]
    cfg = review.config
    return Request(
        metric=name, table=mdef.table or cfg.table,
        time_column=mdef.time_column or cfg.time_column,
        baseline=_span(periods[0]), comparison=_span(periods[1]),
        dimensions=mdef.dimensions or cfg.dimensions, metrics_file=review.metrics_only_file,
        data=data, out=out, source=review.source, **how,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Is there anything to review?
# --------------------------------------------------------------------------------------------


def latest_dates(db: str, requests: dict[str, Request]) -> dict[str, Latest | None]:
    """The last day with data for each metric (see :func:`~flows.review_metric.latest_date`);
    None for a metric the data cannot answer (an unknown column): its own run reports why."""
    from sql_tools import ToolContext

    out: dict[str, Latest | None] = {}
    with ToolContext(db) as ctx:
        for name, request in requests.items():
            try:
                out[name] = latest_date(ctx, request)
            except Exception:  # the metric's run meets it again and fails with the reason
                out[name] = None
    return out


def no_new_data(latest: dict[str, Latest | None], comparison: tuple[date, date]) -> str | None:
    """Why there is nothing to review yet: no metric has data through the end of the week under
    review. None when one has, or when one cannot be read (its run is to say why)."""
    if any(d is None or (d.day is not None and d.day >= comparison[1]) for d in latest.values()):
        return None
    known = [d.day for d in latest.values() if d is not None and d.day is not None]
    last = f"the data ends on {max(known)}" if known else "the data has no dates"
    if any(d is not None and d.filtered for d in latest.values()):
        last += " (counting only rows the metrics' filters keep)"
    return f"no new data: {last}, before the end of the week under review ({comparison[1]})"


def read_state(out: str | Path) -> dict[str, Any]:
    """What earlier reviews in ``out`` recorded (empty when none)."""
    path = Path(out) / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"reviewed": {}}
    return state if isinstance(state.get("reviewed"), dict) else {"reviewed": {}}


def already_reviewed(state: dict[str, Any], week: str, data_hash: str, digest: str) -> bool:
    """True when ``week`` was reviewed on the same data with the same metrics and settings."""
    done = state["reviewed"].get(week)
    return bool(done) and done.get("data") == data_hash and done.get("config") == digest


def write_state(out: str | Path, state: dict[str, Any]) -> None:
    """Replace the state file atomically, no link followed (secret-shaped names masked, as in
    every output)."""
    write_file(out, STATE_FILE, json.dumps(masked(state), indent=2, sort_keys=True))


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------


def _summary(
    review: Review, baseline: tuple[date, date], comparison: tuple[date, date], out: str
) -> dict[str, Any]:
    from prefect.runtime import flow_run
    from prefect.utilities.urls import url_for

    return {
        "status": "reviewed",
        "reason": None,
        "week": comparison[0].isoformat(),
        "baseline": _span(baseline),
        "comparison": _span(comparison),
        "out": out,
        "flow_run_url": url_for("flow-run", obj_id=flow_run.id),
        "thresholds": review.config.thresholds.model_dump(),
        "metric_deployment": None,
        "metrics": [],
    }


def _skip(summary: dict[str, Any], reason: str) -> dict[str, Any]:
    from prefect.logging import get_run_logger

    get_run_logger().info("skipped: %s", reason)
    summary.update(status="skipped", reason=reason)
    _artifact(summary)
    return summary


def _finish(
    summary: dict[str, Any], state: dict[str, Any], data_hash: str, digest: str
) -> dict[str, Any] | State[Any]:
    """Record the week as reviewed and return the summary; or, when a metric failed, leave the
    week open and end the run Failed with the summary as its data."""
    from prefect.logging import get_run_logger

    logger = get_run_logger()
    rows = summary["metrics"]
    for r in rows:
        logger.info("%s: %s (%s)", r["metric"], _move(r), r.get("error") or r["reason"])
    summary["moved"] = [r["metric"] for r in rows if r["moved"]]
    summary["failed"] = [r["metric"] for r in rows if "error" in r]
    _artifact(summary)
    if summary["failed"]:
        message = failure_message(summary)
        logger.error(message)
        return Failed(message=message, data=summary)
    state["reviewed"][summary["week"]] = {
        "data": data_hash,
        "config": digest,
        "reviewed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "moved": summary["moved"],
    }
    state["last_reviewed"] = summary["week"]
    write_state(summary["out"], state)
    return summary


def failure_message(summary: dict[str, Any]) -> str:
    """The failed review's state message: how many metrics failed, which, and why (the first
    few; the summary has every reason)."""
    rows = summary["metrics"]
    failed = [r for r in rows if "error" in r]
    why = "; ".join(f"{r['metric']} ({one_line(r['error'], 160)})" for r in failed[:5])
    if len(failed) > 5:
        why += f"; and {', '.join(r['metric'] for r in failed[5:])}"
    return (
        f"{len(failed)} of {len(rows)} metrics failed: {why}. The others were reviewed; the week "
        f"of {summary['week']} stays open for a rerun."
    )


def render_summary(summary: dict[str, Any]) -> str:
    """The summary as Markdown (segment values from the data are escaped)."""
    from tasks.report.markdown import esc, fmt, segment_text

    head = (
        f"# Weekly review: week of {summary['week']}\n\n"
        f"{_words(summary['comparison'])} compared with {_words(summary['baseline'])}.\n"
    )
    if summary["status"] == "skipped":
        return head + f"\nSkipped: {esc(summary['reason'], 300)}.\n"
    rows = summary["metrics"]
    moved = [r for r in rows if r["moved"]]
    failed = [r for r in rows if "error" in r]
    t = summary["thresholds"]
    lines = [head]
    if failed:
        names = ", ".join(esc(r["metric"]) for r in failed)
        lines += [
            f"**{len(failed)} of {len(rows)} metrics failed: {names}.** The others were reviewed; "
            "this week stays open for a rerun.",
            "",
        ]
    lines += [
        f"{len(moved)} of {len(rows)} metrics moved beyond the noise (p < {t['alpha']:g}) and by "
        f"at least {t['min_relative_change']:.0%}."
        if moved
        else f"Nothing moved: no metric changed beyond the noise (p < {t['alpha']:g}) and by at "
        f"least {t['min_relative_change']:.0%}.",
        "",
        _where(summary.get("metric_deployment")),
        "",
        "| metric | before | after | change | p | moved | investigation | metric run |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        change = r.get("change") or {}
        p = change.get("p_value")
        inv = r.get("investigation")
        where = ""
        if inv:
            where = f"{_link('flow run', inv['flow_run_url'])} {inv['state'].lower()}, "
            where += f"`{esc(inv['out'], 200)}`"
        verdict = "yes" if r["moved"] else "no"
        verdict = "failed" if r["moved"] is None else f"{verdict}: {esc(r['reason'])}"
        run = _link(r["state"].lower(), r.get("flow_run_url")) if r.get("state") else ""
        lines.append(
            f"| {esc(r['metric'])} | {fmt(r.get('baseline'))} | {fmt(r.get('comparison'))} | "
            f"{fmt(change.get('relative'), 'percent')} | {'n/a' if p is None else f'{p:.2g}'} | "
            f"{verdict} | {where} | {run} |"
        )
    for r in rows:
        if r["moved"]:
            inv = r["investigation"]
            causes = "; ".join(segment_text(s) for s in inv.get("root_causes", [])) or "none named"
            lines += ["", f"**{esc(r['metric'])}**: root causes: {causes}."]
            if "error" in inv:
                lines.append(f"The investigation failed: {esc(inv['error'], 300)}")
        elif "error" in r:
            lines += ["", f"**{esc(r['metric'])}** failed: {esc(r['error'], 300)}"]
    return "\n".join(lines) + "\n"


def _where(deployment: str | None) -> str:
    if deployment:
        return (
            f"Each metric ran as its own flow run of `review-metric`, through the deployment "
            f"`{deployment}` (its work pool's workers)."
        )
    return "Each metric ran as its own flow run of `review-metric`, in the review's process."


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def _artifact(summary: dict[str, Any]) -> None:
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(
        markdown=render_summary(summary), key=ARTIFACT_KEY, description="Weekly metric review"
    )


def _move(row: dict[str, Any]) -> str:
    if row["moved"] is None:
        return "failed"
    rel = (row.get("change") or {}).get("relative")
    moved = "moved" if row["moved"] else "not moved"
    return moved if rel is None else f"{moved}, {rel * 100:+.1f}%"


def _words(span: str) -> str:
    return span.replace(":", " to ")


def _span(p: tuple[date, date]) -> str:
    return f"{p[0].isoformat()}:{p[1].isoformat()}"

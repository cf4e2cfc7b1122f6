"""The ``weekly-review`` flow: every week, measure the key metrics and investigate the ones that
moved.

``metrics.yaml`` names the metrics (its ``metrics:`` section, the format ``--metric NAME``
reads) and says what to review (its ``review:`` section: data, table, time column, dimensions,
thresholds). Data in Supabase Storage (``supabase://bucket/prefix``) is downloaded as
``investigate`` downloads it, once, into ``OUT/uploads``. The review compares the last complete
week (Monday to Sunday before ``as_of``) with the week before. Each metric is measured first with
the engine, cheaply; only a move that is significant (p below ``alpha``) and at least
``min_relative_change`` runs the ``investigate`` flow, as a subflow, into ``OUT/<metric>/<week>``,
on the same files, remembered under the review's source name. A week whose data has not arrived
yet (for a metric with filters: whose filtered rows have not), or that was already reviewed on
the same data, is skipped with the reason. A markdown artifact ``weekly-review`` lists every
metric, moved or not.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flows import steps
from tasks.ingest.storage import local_paths, storage_url
from tasks.run import Run, data_hash, question_of

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
) -> dict[str, Any]:
    """Review every metric of ``metrics_file`` for the last complete week before ``as_of``
    (default: today, UTC) against the week before; investigate the ones that moved."""
    from prefect.logging import get_run_logger

    review = read_review(metrics_file, out, period_days)
    baseline, comparison = review_periods(as_of or datetime.now(UTC).date(), review.config)
    summary = _summary(review, baseline, comparison, out)
    db = str(Path(out) / "data.duckdb")
    files = local_paths(review.data, Path(out) / "uploads", say=get_run_logger().info)
    steps.load(files, db)
    h = data_hash(db)
    questions = {m: question_args(review, m, baseline, comparison) for m in review.metrics}
    latest = latest_dates(db, questions)
    if all(d.day is None or d.day < comparison[1] for d in latest.values()):
        return _skip(summary, no_new_data(latest, comparison))
    state = read_state(out)
    if not force and already_reviewed(state, summary["week"], h, review.digest):
        return _skip(summary, f"week {summary['week']} was already reviewed on this data")
    for name, qargs in questions.items():
        day = latest[name].day
        row = {"metric": name, "latest_date": _iso(day)}
        summary["metrics"].append(row)
        if day is None or day < comparison[1]:
            row.update(moved=False, reason=f"no data through {comparison[1]}")
            continue
        with Run(db, qargs, h) as run:
            explanation = steps.decompose(run)
        row.update(measurement(explanation, review.config))
        if row["moved"]:
            target = Path(out) / name / summary["week"]
            row["investigation"] = _investigate(review, files, qargs, target, offline, remember)
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
    from sql_tools._errors import ToolInputError
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
    only = Path(out) / "metrics" / f"{digest[:16]}.yaml"
    only.parent.mkdir(parents=True, exist_ok=True)
    only.write_text(text, encoding="utf-8")
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


def question_args(
    review: Review, name: str, baseline: tuple[date, date], comparison: tuple[date, date]
) -> dict[str, Any]:
    """The ``investigate`` flow's question arguments for the named metric (definition first,
    then the review's defaults)."""
    from tasks.engine.parse import load_metrics

    mdef = load_metrics(Path(review.metrics_only_file))[name]
    cfg = review.config
    return {
        "metric": name, "table": mdef.table or cfg.table,
        "time_column": mdef.time_column or cfg.time_column, "period_column": None,
        "baseline": _span(baseline), "comparison": _span(comparison), "grain": None,
        "dimensions": mdef.dimensions or cfg.dimensions, "filters": [], "max_depth": None,
        "min_support": None, "metrics_file": review.metrics_only_file,
    }  # fmt: skip


# --------------------------------------------------------------------------------------------
# Is there anything to review?
# --------------------------------------------------------------------------------------------


class Latest(NamedTuple):
    """The last day with data for a metric, and whether only its filters' rows counted."""

    day: date | None
    filtered: bool


def latest_dates(db: str, questions: dict[str, dict[str, Any]]) -> dict[str, Latest]:
    """The last day with data for each metric: in its table, on its time column, among the
    rows its filters keep (``country=US`` has no new data when only other countries arrived)."""
    from sql_tools import SQL_TOOLS, ToolContext

    out: dict[str, Latest] = {}
    with ToolContext(db) as ctx:
        for name, qargs in questions.items():
            q = question_of(ctx, qargs)
            args = {
                "table": q.metric.table,
                "measures": [{"agg": "max", "column": q.periods.time_column}],
                "filters": [f.model_dump(mode="json") for f in q.metric.filters],
            }
            res = SQL_TOOLS.call(ctx, "metric_aggregate", args)
            value = next(iter(res.rows[0].values()), None) if res.rows else None  # type: ignore[attr-defined]
            day = None if value is None else date.fromisoformat(str(value)[:10])
            out[name] = Latest(day, bool(q.metric.filters))
    return out


def no_new_data(latest: dict[str, Latest], comparison: tuple[date, date]) -> str:
    """Why there is nothing to review yet."""
    known = [d.day for d in latest.values() if d.day is not None]
    last = f"the data ends on {max(known)}" if known else "the data has no dates"
    if any(d.filtered for d in latest.values()):
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
    """Replace the state file atomically."""
    path = Path(out) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# Measuring and investigating
# --------------------------------------------------------------------------------------------


def measurement(explanation: dict[str, Any], config: ReviewConfig) -> dict[str, Any]:
    """The metric's move and whether it is worth an investigation."""
    change = explanation["change"]
    p, rel = change["p_value"], change["relative"]
    if p is None or not p < config.alpha:
        moved, reason = False, "within the noise"
    elif rel is not None and abs(rel) < config.min_relative_change:
        moved, reason = False, f"significant but under {config.min_relative_change:.0%}"
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


def _investigate(
    review: Review,
    files: list[str],
    qargs: dict[str, Any],
    target: Path,
    offline: bool,
    remember: bool,
) -> dict[str, Any]:
    """Run the ``investigate`` flow as a subflow on the files the review measured (already
    downloaded when they came from Supabase Storage); its folder, run id, link and answer."""
    from prefect.utilities.urls import url_for

    from flows.investigate import investigate

    args = {k: v for k, v in qargs.items() if k in _INVESTIGATE_ARGS}
    state = investigate(
        data=files, out=str(target), offline=offline, remember=remember, source=review.source,
        return_state=True, **args,
    )  # fmt: skip
    run_id = str(state.state_details.flow_run_id)
    found: dict[str, Any] = {
        "out": str(target),
        "flow_run_id": run_id,
        "flow_run_url": url_for("flow-run", obj_id=run_id),
        "state": state.type.value,
    }
    if not state.is_completed():
        found["error"] = " ".join(str(state.message or state.name).split())
        return found
    result = state.result()
    found["root_causes"] = result["root_causes"]
    found["run_id"] = result["run_id"]
    return found


_INVESTIGATE_ARGS = (
    "metric", "table", "time_column", "baseline", "comparison", "dimensions", "metrics_file",
)  # fmt: skip


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
        "thresholds": {
            "min_relative_change": review.config.min_relative_change,
            "alpha": review.config.alpha,
        },
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
) -> dict[str, Any]:
    from prefect.logging import get_run_logger

    logger = get_run_logger()
    rows = summary["metrics"]
    for r in rows:
        logger.info("%s: %s (%s)", r["metric"], _move(r), r["reason"])
    moved = [r for r in rows if r["moved"]]
    summary["moved"] = [r["metric"] for r in moved]
    _artifact(summary)
    failed = [r["metric"] for r in moved if "error" in r["investigation"]]
    if failed:
        raise RuntimeError(
            f"investigation of {', '.join(failed)} failed; the week stays unreviewed"
        )
    state["reviewed"][summary["week"]] = {
        "data": data_hash,
        "config": digest,
        "reviewed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "moved": summary["moved"],
    }
    state["last_reviewed"] = summary["week"]
    write_state(summary["out"], state)
    return summary


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
    t = summary["thresholds"]
    lines = [
        head,
        f"{len(moved)} of {len(rows)} metrics moved beyond the noise (p < {t['alpha']:g}) and by "
        f"at least {t['min_relative_change']:.0%}."
        if moved
        else f"Nothing moved: no metric changed beyond the noise (p < {t['alpha']:g}) and by at "
        f"least {t['min_relative_change']:.0%}.",
        "",
        "| metric | before | after | change | p | moved | investigation |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        change = r.get("change") or {}
        p = change.get("p_value")
        inv = r.get("investigation")
        where = ""
        if inv:
            link = f"[flow run]({inv['flow_run_url']})" if inv["flow_run_url"] else "flow run"
            where = f"{link} {inv['state'].lower()}, `{esc(inv['out'], 200)}`"
        lines.append(
            f"| {esc(r['metric'])} | {fmt(r.get('baseline'))} | {fmt(r.get('comparison'))} | "
            f"{fmt(change.get('relative'), 'percent')} | {'n/a' if p is None else f'{p:.2g}'} | "
            f"{'yes' if r['moved'] else 'no'}: {esc(r['reason'])} | {where} |"
        )
    for r in moved:
        inv = r["investigation"]
        causes = "; ".join(segment_text(s) for s in inv.get("root_causes", [])) or "none named"
        lines += ["", f"**{esc(r['metric'])}**: root causes: {causes}."]
        if "error" in inv:
            lines.append(f"The investigation failed: {esc(inv['error'], 300)}")
    return "\n".join(lines) + "\n"


def _artifact(summary: dict[str, Any]) -> None:
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(
        markdown=render_summary(summary), key=ARTIFACT_KEY, description="Weekly metric review"
    )


def _move(row: dict[str, Any]) -> str:
    rel = (row.get("change") or {}).get("relative")
    moved = "moved" if row["moved"] else "not moved"
    return moved if rel is None else f"{moved}, {rel * 100:+.1f}%"


def _words(span: str) -> str:
    return span.replace(":", " to ")


def _span(p: tuple[date, date]) -> str:
    return f"{p[0].isoformat()}:{p[1].isoformat()}"


def _iso(d: date | None) -> str | None:
    return None if d is None else d.isoformat()

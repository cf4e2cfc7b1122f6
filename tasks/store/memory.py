"""Remember an investigation, and recall similar ones: the glue between a run and the store.

The run id is derived from the data's fingerprint and the question, so investigating the same
question on the same data again updates one stored investigation instead of adding another.
Memory is kept per dataset: past dismissed findings count only when they were made on the same
data (the same contents, or the same named source); similar investigations of other data are
listed, marked as such.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sql_tools.output import masked
from tasks.engine.spec import Question
from tasks.run import Run

if TYPE_CHECKING:
    from tasks.store.models import DataIdentity


def run_id(data: dict[str, str], question: dict[str, Any]) -> str:
    """Stable id of (data, question)."""
    text = json.dumps([data, question], sort_keys=True, default=str)
    return "inv-" + hashlib.sha256(text.encode()).hexdigest()[:20]


def question_dict(q: Question) -> dict[str, Any]:
    """The question in plain JSON."""
    return json.loads(q.model_dump_json())


def history_query(q: Question, result: dict[str, Any]) -> str:
    """The text a similar past investigation would be found by: metric, move, causes, drivers."""
    change = result.get("change") or {}
    rel = change.get("relative")
    parts = [f"Metric {q.metric.name or q.metric.expression} on table {q.metric.table}."]
    if isinstance(rel, int | float):
        parts.append(f"The metric {'fell' if rel < 0 else 'rose'} {abs(rel) * 100:.1f}%.")
    for s in (result.get("root_causes") or []) + (result.get("drivers") or [])[:3]:
        seg = ", ".join(f"{k} = {v}" for k, v in (s.get("segment") or {}).items())
        parts.append(f"Root cause: {seg} ({s.get('effect')}).")
    return "\n".join(parts)


def recall(
    store: Any,
    q: Question,
    result: dict[str, Any],
    data: DataIdentity,
    k: int = 3,
    exclude: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(similar past investigations, each saying whether it read the same data, and past
    dismissed findings of this metric on this data) as plain dicts."""
    from tasks.store.history import similar_investigations

    rows = similar_investigations(store, history_query(q, result), k=k + 1, data=data)
    similar = [
        {
            "run_id": r.run_id,
            "score": round(r.score, 3),
            "date": r.date.strftime("%Y-%m-%d"),
            "metric": r.metric,
            "periods": r.periods,
            "root_causes": r.root_causes,
            "same_data": r.same_data,
        }
        for r in rows
        if r.run_id != exclude
    ][:k]
    segments = [s.get("segment") or {} for s in (result.get("drivers") or [])]
    segments += [s.get("segment") or {} for s in (result.get("root_causes") or [])]
    metric, segments = masked([q.metric.expression, segments])  # as the store keeps them
    dismissed = store.dismissed_findings(metric, segments, data=data)
    return similar, [d for d in dismissed if d.get("run_id") != exclude]


def record(
    rid: str,
    data: DataIdentity,
    q: Question,
    result: dict[str, Any],
    evidence: list[dict[str, Any]],
    report_md: str,
) -> Any:
    """The store's record of a finished investigation, secret-shaped values masked
    (``output.masked``: names, keys and the data's identity too) as in every other output: the
    store keeps what the report shows."""
    from tasks.store.models import InvestigationRecord

    rec = InvestigationRecord(
        run_id=rid,
        created_at=datetime.now(UTC),
        data_fingerprint=data.fingerprint,
        data_source=data.source,
        metric=q.metric.expression,
        metric_name=q.metric.name,
        table=q.metric.table,
        baseline=q.periods.label("baseline"),
        comparison=q.periods.label("comparison"),
        question=question_dict(q),
        result=result,
        hypotheses=result.get("hypotheses") or [],
        evidence=evidence,
        findings=result.get("findings") or [],
        report_md=report_md,
    )
    return InvestigationRecord.model_validate(masked(rec.model_dump()))


def _identity(run: Run) -> tuple[Question, DataIdentity, str]:
    """The question, the identity of the data it reads (masked as the store keeps it, so a
    stored identity compares equal) and the run id of (data, question)."""
    from tasks.store.models import DataIdentity

    q = run.question
    data_fp = run.fingerprint
    data = {"table": q.metric.table, "fingerprint": data_fp, "source": run.source}
    return q, DataIdentity.model_validate(masked(data)), run_id(data_fp, question_dict(q))


def recall_history(run: Run, explanation: dict[str, Any]) -> dict[str, Any]:
    """``{"similar": [...], "dismissed": [...], "warning": str | None}`` from the store, for
    the run's data (its contents, or its source when the run names one). The store is only
    read: a read-only one is recalled from. A store whose file cannot be used is named once,
    by the save that follows (:func:`remember`), so the warning only says so."""
    from tasks.store import StoreError, StoreFileError, store_from_config

    q, data, rid = _identity(run)
    try:
        with store_from_config(read_only=True) as store:
            similar, dismissed = recall(store, q, explanation, data, exclude=rid)
    except (StoreError, OSError) as exc:
        why = "the memory store cannot be used" if isinstance(exc, StoreFileError) else exc
        return {
            "similar": [],
            "dismissed": [],
            "warning": f"past investigations unavailable: {why}",
        }
    return {"similar": similar, "dismissed": dismissed, "warning": None}


def remember(
    run: Run, result: dict[str, Any], entries: list[dict[str, Any]], report_md: str
) -> dict[str, Any]:
    """Save the investigation whole; ``{"run_id", "kept_locally"}``. A save that does not land
    raises :class:`StoreError` ("investigation ... not remembered: why", of the same class as
    the cause, so a busy or unreachable store stays worth a retry): a run must not report an
    investigation remembered that is not. Supabase outages go to the local outbox:
    ``kept_locally`` is then true, and the investigation is not remembered by the team's store
    until `drilldown sync` sends it."""
    from tasks.store import StoreError, store_from_config

    q, data, rid = _identity(run)
    rec = record(rid, data, q, result, entries, report_md)
    try:
        with store_from_config() as store:
            store.save_investigation(rec)
            kept_locally = rid in getattr(store, "kept_locally", ())
    except (StoreError, OSError) as exc:
        kind = type(exc) if isinstance(exc, StoreError) else StoreError
        raise kind(f"investigation {rid} not remembered: {exc}") from exc
    return {"run_id": rid, "kept_locally": kept_locally}

"""Has this happened before? Past investigations similar to a free-text description."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tasks.store.base import Store
from tasks.store.models import DataIdentity, segment_text


@dataclass(frozen=True)
class HistoryRow:
    """One past investigation, as `drilldown history` and the report's section show it."""

    score: float
    date: datetime
    metric: str
    root_causes: list[str]  # "col=val, col=val" per root cause
    run_id: str
    periods: str = ""
    same_data: bool | None = None  # None when there was no data to compare with


def similar_investigations(
    store: Store,
    text: str,
    k: int = 5,
    metric: str | None = None,
    data: DataIdentity | None = None,
) -> list[HistoryRow]:
    """The `k` past investigations closest in meaning to `text` (optionally of one metric),
    each saying whether it read the same data as `data` when that is given."""
    rows = []
    for hit in store.search_similar(text, k=k, metric=metric):
        causes = [
            segment_text(c["segment"])
            for c in hit.root_causes
            if isinstance(c.get("segment"), dict)
        ]
        metric_label = f"{hit.metric_name} ({hit.metric})" if hit.metric_name else hit.metric
        rows.append(
            HistoryRow(
                score=hit.score,
                date=hit.created_at,
                metric=metric_label,
                root_causes=causes,
                run_id=hit.run_id,
                periods=f"{hit.baseline} -> {hit.comparison}",
                same_data=None if data is None else data.same_data(hit.data_identity),
            )
        )
    return rows


def format_history(rows: list[HistoryRow]) -> str:
    """One line per past investigation: score, date, metric, periods, root causes, run id."""
    if not rows:
        return "No similar past investigations."
    lines = []
    for r in rows:
        causes = "; ".join(r.root_causes) if r.root_causes else "no root cause"
        periods = f"  {r.periods}" if r.periods else ""
        lines.append(
            f"{r.score:.2f}  {r.date:%Y-%m-%d}  {r.metric}{periods}  {causes}  (run {r.run_id})"
        )
    return "\n".join(lines)

"""What the store keeps: one investigation, whole, and the summaries it hands back."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class DataIdentity(BaseModel):
    """The data an investigation read: its metric's table, the SHA-256 of each loaded table's
    contents, and the name of its source when it was given one (``--source``)."""

    model_config = ConfigDict(frozen=True)

    table: str
    fingerprint: dict[str, str] = Field(default_factory=dict)
    source: str | None = None

    def same_data(self, other: DataIdentity, segment: dict[str, Any] | None = None) -> bool:
        """True when both name the same source, or when every table involved (both metrics'
        tables, and a joined table a segment column names as ``table.column``) was loaded from
        the same contents in both."""
        if self.source is not None and self.source == other.source:
            return True
        tables = {self.table, other.table}
        tables |= {str(col).split(".", 1)[0] for col in segment or {} if "." in str(col)}
        mine, theirs = self.fingerprint, other.fingerprint
        return all(mine.get(t) is not None and mine.get(t) == theirs.get(t) for t in tables)


class _ReadsData(BaseModel):
    """The fields that say which data an investigation read."""

    table: str
    data_fingerprint: dict[str, str] = Field(default_factory=dict)  # table -> sha256 of its data
    data_source: str | None = Field(default=None, min_length=1, max_length=1000)

    @property
    def data_identity(self) -> DataIdentity:
        return DataIdentity(
            table=self.table, fingerprint=self.data_fingerprint, source=self.data_source
        )


class InvestigationRecord(_ReadsData):
    """One finished investigation: question, answer, reasoning, evidence and report.

    `run_id` is the natural key: saving the same record again is a no-op, saving a changed record
    with the same `run_id` replaces the stored one whole. Nested dicts are kept as given.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, max_length=200)
    created_at: datetime
    metric: str = Field(min_length=1)  # the metric expression, e.g. "sum(revenue)"
    metric_name: str | None = None
    baseline: str  # period labels
    comparison: str
    question: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)  # result.json
    hypotheses: list[dict[str, Any]] = Field(default_factory=list)
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    findings: list[dict[str, Any]] = Field(default_factory=list)
    report_md: str = ""

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    def json_data(self) -> dict[str, Any]:
        """The record as plain JSON data (non-finite numbers become null)."""
        return json.loads(self.model_dump_json())

    def content_hash(self) -> str:
        """SHA-256 of the record's canonical JSON: equal records, equal hashes."""
        canonical = json.dumps(self.json_data(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


class InvestigationSummary(_ReadsData):
    """A stored investigation in one line's worth of fields."""

    run_id: str
    created_at: datetime
    metric: str
    metric_name: str | None = None
    baseline: str
    comparison: str
    root_causes: list[dict[str, Any]] = Field(default_factory=list)


class SimilarInvestigation(InvestigationSummary):
    """A past investigation found by similarity search; `score` is the cosine similarity."""

    score: float
    embedding_model: str


def segment_text(segment: dict[str, Any]) -> str:
    """`{"platform": "ios", "app_version": "5.2"}` -> `platform=ios, app_version=5.2`."""
    return ", ".join(f"{col}={val}" for col, val in segment.items()) or "(all)"


def root_causes_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The root causes of a result.json, tolerating a missing or malformed list."""
    causes = result.get("root_causes") or []
    return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


def _first_paragraph(markdown: str) -> str:
    """The first paragraph of prose in a markdown report (headings, tables and code skipped)."""
    paragraph: list[str] = []
    in_code = False
    for raw in markdown.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if not line or line.startswith(("#", "|", "---")):
            if paragraph:
                break
            continue
        paragraph.append(line)
    return " ".join(paragraph)


def memory_text(record: InvestigationRecord) -> str:
    """The text that is embedded to find this investigation again.

    Metric, periods, root causes, hypothesis verdicts and the report's first paragraph.
    """
    metric = record.metric if not record.metric_name else f"{record.metric_name} ({record.metric})"
    lines = [f"Metric {metric} on table {record.table}."]
    lines.append(f"Change from {record.baseline} to {record.comparison}.")
    change = record.result.get("change")
    if isinstance(change, dict) and isinstance(change.get("relative"), int | float):
        direction = "fell" if change["relative"] < 0 else "rose"
        lines.append(f"The metric {direction} {abs(change['relative']) * 100:.1f}%.")
    causes = root_causes_of(record.result)
    for cause in causes:
        segment = cause.get("segment") if isinstance(cause.get("segment"), dict) else {}
        effect = cause.get("effect")
        lines.append(f"Root cause: {segment_text(segment)}" + (f" ({effect})." if effect else "."))
    if not causes:
        lines.append("No root cause found.")
    for h in record.hypotheses:
        title = h.get("title") or h.get("id") or "hypothesis"
        lines.append(f"Hypothesis {title}: {h.get('status', 'unknown')}.")
    summary = _first_paragraph(record.report_md)
    if summary:
        lines.append(summary)
    return "\n".join(lines)

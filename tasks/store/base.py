"""The store interface and the rows one investigation becomes (shared by backends); its errors
(:mod:`tasks.store.errors`) are importable from here too."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np

from tasks.store.embed import DIM, Embedder
from tasks.store.errors import StoreError
from tasks.store.models import (
    DataIdentity,
    InvestigationRecord,
    InvestigationSummary,
    SimilarInvestigation,
    memory_text,
)


@runtime_checkable
class Store(Protocol):
    """Where investigations are remembered.

    A store may be shared between threads (its one connection is guarded by a lock). A DuckDB
    file can be open in one process at a time.
    """

    def save_investigation(self, record: InvestigationRecord) -> str:
        """Store the record whole or not at all; identical re-save is a no-op. Returns run_id."""
        ...

    def get_investigation(self, run_id: str) -> InvestigationRecord | None: ...

    def list_investigations(self, limit: int = 20) -> list[InvestigationSummary]: ...

    def search_similar(
        self,
        query: str | Sequence[float] | np.ndarray,
        k: int = 5,
        metric: str | None = None,
        model: str | None = None,
    ) -> list[SimilarInvestigation]: ...

    def dismissed_findings(
        self,
        metric: str,
        segments: Sequence[dict[str, Any]] | None = None,
        *,
        data: DataIdentity,
    ) -> list[dict[str, Any]]:
        """Findings dismissed by past investigations of this metric (expression or name) on
        the same table and the same data as ``data`` (see `DataIdentity.same_data`)."""
        ...

    def close(self) -> None: ...


# Called after each write step inside a save's transaction with the step's name. A seam for
# failure-injection tests (raise to abort, sleep to be killed mid-write); a no-op otherwise.
_after_write_step: Callable[[str], None] = lambda step: None  # noqa: E731


def after_write_step(step: str) -> None:
    """Run the write-step hook (see `_after_write_step`)."""
    _after_write_step(step)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    """A whole number for a typed column, or None (the full value stays in `details`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class StoreBase:
    """What every backend shares: the embedder made on first use (from the configuration
    unless one was given) and use as a context manager that closes the store."""

    _embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from tasks.store.embed import embedder_from_config

            self._embedder = embedder_from_config()
        return self._embedder

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - every backend has its own
        raise NotImplementedError


@dataclass
class Rows:
    """One investigation as the rows of each table, as JSON-ready dicts."""

    investigation: dict[str, Any]
    hypotheses: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    report: dict[str, Any]
    documents: list[dict[str, Any]] = field(default_factory=list)


def _report_title(record: InvestigationRecord) -> str:
    for line in record.report_md.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or record.metric
    return f"{record.metric_name or record.metric}: {record.baseline} -> {record.comparison}"


def record_rows(record: InvestigationRecord) -> Rows:
    """Split a record into table rows. Each child row keeps its whole dict in `details`."""
    data = record.json_data()
    investigation = {
        "run_id": data["run_id"],
        "content_hash": record.content_hash(),
        "created_at": data["created_at"],
        "metric": data["metric"],
        "metric_name": data["metric_name"],
        "table_name": data["table"],
        "baseline": data["baseline"],
        "comparison": data["comparison"],
        "question": data["question"],
        "result": data["result"],
        "data_fingerprint": data["data_fingerprint"],
        "data_source": data["data_source"],
    }
    hypotheses = [
        {
            "position": i,
            "hypothesis_id": _text(h.get("id")),
            "title": _text(h.get("title")),
            "story": _text(h.get("story")),
            "status": h.get("status"),
            "confidence": _float(h.get("confidence")),
            "details": h,
        }
        for i, h in enumerate(data["hypotheses"])
    ]
    evidence = [
        {
            "position": i,
            "hypothesis_id": _text(e.get("hypothesis_id")),
            "seq": _int(e.get("seq")),
            "tool": _text(e.get("tool")),
            "arguments": e.get("arguments"),
            "sql": _text(e.get("sql")),
            "params": e.get("params"),
            "result_digest": _text(e.get("digest")),  # the ledger entry's field
            "elapsed_ms": _float(e.get("elapsed_ms")),
            "tokens": _int(e.get("tokens")),
            "details": e,
        }
        for i, e in enumerate(data["evidence"])
    ]
    findings = [
        {
            "position": i,
            "finding_key": _text(f.get("key")) or f"finding-{i}",
            "segment": f.get("segment") if isinstance(f.get("segment"), dict) else {},
            "category": _text(f.get("category")),
            "status": f.get("status"),
            "claim": f.get("claim"),
            "critique": _text(f.get("critique")),
            "hypothesis_id": _text(f.get("hypothesis_id")),
            "details": f,
        }
        for i, f in enumerate(data["findings"])
    ]
    report = {"title": _report_title(record), "body_markdown": record.report_md}
    return Rows(investigation, hypotheses, evidence, findings, report)


def memory_document(record: InvestigationRecord, embedder: Embedder) -> dict[str, Any]:
    """The memory document of a record: its text, metadata, model name and unit vector."""
    content = memory_text(record)
    vector = embedder.embed([content], kind="document")[0]
    return {
        "kind": "investigation_summary",
        "content": content,
        "metadata": {"metric": record.metric, "table": record.table, "run_id": record.run_id},
        "embedding_model": embedder.model,
        "embedding": [float(x) for x in vector],
    }


def query_vector(
    query: str | Sequence[float] | np.ndarray, model: str | None, embedder: Embedder
) -> tuple[list[float], str]:
    """The vector and model name to search with: a text is embedded as a query."""
    if isinstance(query, str):
        if not query.strip():
            raise StoreError("search text is empty")
        if model is not None and model != embedder.model:
            raise StoreError(
                f"cannot embed a text for model {model!r}: the configured embedder is "
                f"{embedder.model!r}; pass a vector made by {model!r} instead"
            )
        vector = embedder.embed([query], kind="query")[0]
        return [float(x) for x in vector], embedder.model
    vector = np.asarray(query, dtype=np.float32)
    if vector.shape != (DIM,):
        raise StoreError(f"a query vector must have {DIM} numbers, got shape {vector.shape}")
    return [float(x) for x in vector], model or embedder.model


def check_limit(value: int, name: str = "limit") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1 or value > 1000:
        raise StoreError(f"{name} must be an integer from 1 to 1000, got {value!r}")
    return value


def canonical_segment(segment: Any) -> str:
    """A segment dict as canonical JSON, for comparing segments regardless of key order."""
    if not isinstance(segment, dict):
        segment = {}
    return json.dumps(segment, sort_keys=True, separators=(",", ":"), default=str)


def pick_dismissed(
    found: Iterable[tuple[dict[str, Any], DataIdentity]],
    segments: Sequence[dict[str, Any]] | None,
    data: DataIdentity,
) -> list[dict[str, Any]]:
    """Dismissed findings (each with the identity of the data its investigation read, newest
    first) that were made on the same data as ``data``: one per (segment, category), only the
    given segments when some are given."""
    wanted = None if segments is None else {canonical_segment(s) for s in segments}
    seen: set[tuple[str, str | None]] = set()
    out = []
    for row, read in found:
        seg = canonical_segment(row.get("segment"))
        if wanted is not None and seg not in wanted:
            continue
        segment = row.get("segment") if isinstance(row.get("segment"), dict) else None
        if not data.same_data(read, segment):
            continue
        key = (seg, row.get("category"))
        if key in seen:
            continue
        seen.add(key)
        out.append(row)
    return out


def dismissed_row(
    details: dict[str, Any], run_id: str, created_at: Any, read: DataIdentity
) -> tuple[dict[str, Any], DataIdentity]:
    """A stored dismissed finding as handed back (the finding plus where it came from), with
    the identity of the data it was made on."""
    return {**details, "run_id": run_id, "investigation_created_at": created_at}, read

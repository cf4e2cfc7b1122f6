"""Supabase as the store, with a local outbox: nothing is lost while Supabase is unreachable.

A save that cannot reach Postgres is kept in the local DuckDB store with an outbox row;
`flush_outbox()` (the `drilldown sync` command) pushes those records later. Pushing is idempotent
(the same content is a no-op) and never overwrites a newer save made directly to Supabase.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tasks.store.base import StoreBase, memory_document
from tasks.store.duckdb_store import DuckDBStore, default_path
from tasks.store.embed import Embedder
from tasks.store.errors import RecordRejected, StoreUnavailable
from tasks.store.models import (
    DataIdentity,
    InvestigationRecord,
    InvestigationSummary,
    SimilarInvestigation,
)
from tasks.store.postgres_store import PostgresStore

log = logging.getLogger("drilldown.store")


@dataclass
class FlushResult:
    """What a flush did: records pushed, skipped as superseded, refused, and still waiting."""

    sent: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    remaining: list[str] = field(default_factory=list)
    error: str | None = None  # why the flush stopped early (Supabase unreachable)

    def summary(self) -> str:
        """One line for the command line."""
        parts = [f"{len(self.sent)} sent"]
        if self.superseded:
            parts.append(f"{len(self.superseded)} already newer in Supabase")
        if self.failed:
            parts.append(f"{len(self.failed)} refused")
        parts.append(f"{len(self.remaining)} waiting")
        line = ", ".join(parts)
        return f"{line} ({self.error})" if self.error else line


class SupabaseStore(StoreBase):
    """Postgres (Supabase) first; the local DuckDB store when Postgres cannot be reached."""

    kind = "supabase"

    def __init__(
        self,
        dsn: str,
        local_path: str | Path | None = None,
        embedder: Embedder | None = None,
        *,
        connect_timeout: int = 10,
        read_only: bool = False,
    ) -> None:
        self.remote = PostgresStore(dsn, embedder, connect_timeout=connect_timeout)
        self.local_path = Path(local_path).expanduser() if local_path else default_path()
        self._local: DuckDBStore | None = None
        self._read_only = read_only  # the local store is only read (a caller that only reads)
        self.kept_locally: list[str] = []
        """The run ids saved only locally, during an outage, until `drilldown sync` sends them."""
        self._lock = threading.RLock()

    @property
    def embedder(self) -> Embedder:
        return self.remote.embedder

    def close(self) -> None:
        with self._lock:
            self.remote.close()
            if self._local is not None:
                self._local.close()
                self._local = None

    def local(self, create: bool = True) -> DuckDBStore | None:
        """The local store (opened on first use); None when it does not exist and create is off."""
        with self._lock:
            if self._local is None:
                if not create and not self.local_path.exists():
                    return None
                self._local = DuckDBStore(
                    self.local_path, embedder=self.embedder, read_only=self._read_only
                )
            return self._local

    # -- writes --------------------------------------------------------------------------------
    def save_investigation(self, record: InvestigationRecord) -> str:
        document = memory_document(record, self.embedder)
        try:
            self.remote.write(record, document)
        except StoreUnavailable as e:
            local = self.local()
            assert local is not None
            local.write(record, document)
            local.enqueue(record.run_id, record.content_hash(), str(e))
            self.kept_locally.append(record.run_id)
            log.warning(
                "Supabase unreachable; investigation %r kept locally in %s until `drilldown sync` "
                "(%s)",
                record.run_id,
                self.local_path,
                e,
            )
            return record.run_id
        if self._local is not None:  # a direct save supersedes anything queued for this run
            self._local.drop_pending(record.run_id)
        return record.run_id

    def flush_outbox(self) -> FlushResult:
        """Push the records kept locally during an outage to Supabase."""
        result = FlushResult()
        local = self.local(create=False)
        if local is None:
            return result
        pending = local.pending()
        for i, run_id in enumerate(pending):
            record = local.get_investigation(run_id)
            document = local.document(run_id)
            if record is None or document is None:
                local.drop_pending(run_id)
                continue
            content_hash = record.content_hash()
            try:
                newer = self.remote.saved_after(run_id, local.queued_at(run_id), content_hash)
                if newer:
                    local.drop_pending(run_id)
                    result.superseded.append(run_id)
                    continue
                self.remote.write(record, document)
            except StoreUnavailable as e:
                result.remaining = pending[i:]
                result.error = str(e)
                return result
            except RecordRejected as e:
                local.mark_failed(run_id, str(e))
                result.failed[run_id] = str(e)
                result.remaining.append(run_id)
                continue
            local.mark_sent(run_id, content_hash)
            result.sent.append(run_id)
        return result

    # -- reads: Supabase, or what is kept locally while it is unreachable ----------------------
    def _fallback(self, e: StoreUnavailable) -> DuckDBStore:
        local = self.local(create=False)
        if local is None:
            raise e
        log.warning("Supabase unreachable; answering from the local store (%s)", e)
        return local

    def get_investigation(self, run_id: str) -> InvestigationRecord | None:
        try:
            found = self.remote.get_investigation(run_id)
        except StoreUnavailable as e:
            return self._fallback(e).get_investigation(run_id)
        if found is None:
            local = self.local(create=False)
            if local is not None and run_id in local.pending():
                return local.get_investigation(run_id)
        return found

    def list_investigations(self, limit: int = 20) -> list[InvestigationSummary]:
        try:
            return self.remote.list_investigations(limit)
        except StoreUnavailable as e:
            return self._fallback(e).list_investigations(limit)

    def search_similar(
        self,
        query: str | Sequence[float] | np.ndarray,
        k: int = 5,
        metric: str | None = None,
        model: str | None = None,
    ) -> list[SimilarInvestigation]:
        try:
            return self.remote.search_similar(query, k, metric=metric, model=model)
        except StoreUnavailable as e:
            return self._fallback(e).search_similar(query, k, metric=metric, model=model)

    def dismissed_findings(
        self,
        metric: str,
        segments: Sequence[dict[str, Any]] | None = None,
        *,
        data: DataIdentity,
    ) -> list[dict[str, Any]]:
        try:
            return self.remote.dismissed_findings(metric, segments, data=data)
        except StoreUnavailable as e:
            return self._fallback(e).dismissed_findings(metric, segments, data=data)

"""The investigation memory: every investigation stored whole, searchable by meaning.

Backends, chosen by `store_from_config()` from the environment:

- `DRILLDOWN_STORE=duckdb` (the default): an embedded DuckDB file at `DRILLDOWN_STORE_PATH`
  (default `~/.drilldown/store.duckdb`). Offline, nothing to set up. One process opens it at a
  time; another waits for it up to `DRILLDOWN_STORE_WAIT` seconds (default 60).
- `DRILLDOWN_STORE=supabase`, or `SUPABASE_DB_URL` set: Postgres + pgvector at `SUPABASE_DB_URL`,
  with the DuckDB file as an outbox while Supabase is unreachable (`flush_outbox()`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.store.base import Store
from tasks.store.duckdb_store import WAIT_S, DuckDBStore, default_path
from tasks.store.embed import Embedder, embedder_from_config
from tasks.store.errors import (
    RecordRejected,
    StoreBusy,
    StoreConfigError,
    StoreDamaged,
    StoreError,
    StoreFileError,
    StoreInaccessible,
    StoreUnavailable,
)
from tasks.store.models import (
    InvestigationRecord,
    InvestigationSummary,
    SimilarInvestigation,
    memory_text,
)

if TYPE_CHECKING:
    from tasks.store.postgres_store import PostgresStore
    from tasks.store.supabase_store import FlushResult, SupabaseStore

__all__ = [
    "DuckDBStore",
    "FlushResult",
    "InvestigationRecord",
    "InvestigationSummary",
    "PostgresStore",
    "RecordRejected",
    "SimilarInvestigation",
    "Store",
    "StoreBusy",
    "StoreConfigError",
    "StoreDamaged",
    "StoreError",
    "StoreFileError",
    "StoreInaccessible",
    "StoreUnavailable",
    "SupabaseStore",
    "flush_outbox",
    "memory_text",
    "store_from_config",
]

_POSTGRES = {
    "PostgresStore": "tasks.store.postgres_store",
    "FlushResult": "tasks.store.supabase_store",
    "SupabaseStore": "tasks.store.supabase_store",
}
"""The Postgres backends, imported on first use: the DuckDB store never loads psycopg."""


def __getattr__(name: str) -> Any:
    if name in _POSTGRES:
        import importlib

        return getattr(importlib.import_module(_POSTGRES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _settings(env: Mapping[str, str]) -> tuple[str, str, Path]:
    url = env.get("SUPABASE_DB_URL", "").strip()
    kind = env.get("DRILLDOWN_STORE", "").strip().lower() or ("supabase" if url else "duckdb")
    raw_path = env.get("DRILLDOWN_STORE_PATH", "").strip()
    path = Path(raw_path).expanduser() if raw_path else default_path()
    if kind not in ("duckdb", "supabase"):
        raise StoreConfigError(f"DRILLDOWN_STORE must be 'duckdb' or 'supabase', got {kind!r}")
    if kind == "supabase" and not url:
        raise StoreConfigError("DRILLDOWN_STORE=supabase needs SUPABASE_DB_URL")
    return kind, url, path


def _wait_s(env: Mapping[str, str]) -> float:
    """How long to wait for the DuckDB store while another process holds it (seconds)."""
    raw = env.get("DRILLDOWN_STORE_WAIT", "").strip()
    if not raw:
        return WAIT_S
    try:
        wait = float(raw)
    except ValueError:
        wait = -1.0
    if not 0 <= wait <= 3600:
        raise StoreConfigError(
            f"DRILLDOWN_STORE_WAIT must be a number of seconds from 0 to 3600, got {raw[:40]!r}"
        )
    return wait


def store_from_config(
    env: Mapping[str, str] | None = None,
    embedder: Embedder | None = None,
    *,
    read_only: bool = False,
) -> DuckDBStore | SupabaseStore:
    """The configured store (see the module docstring for the variables); ``read_only`` for a
    caller that only reads: the DuckDB file is never written (it may be on a read-only mount),
    nor made when there is none."""
    env = os.environ if env is None else env
    kind, url, path = _settings(env)
    wait_s = _wait_s(env)
    if embedder is None:
        embedder = embedder_from_config(env)
    if kind == "supabase":
        from tasks.store.supabase_store import SupabaseStore

        return SupabaseStore(url, local_path=path, embedder=embedder, read_only=read_only)
    return DuckDBStore(path, embedder=embedder, wait_s=wait_s, read_only=read_only)


def flush_outbox(
    store: SupabaseStore | None = None, env: Mapping[str, str] | None = None
) -> FlushResult:
    """Push investigations kept locally during a Supabase outage (`drilldown sync`)."""
    if store is not None:
        return store.flush_outbox()
    env = os.environ if env is None else env
    kind, url, path = _settings(env)
    if kind != "supabase":
        raise StoreConfigError("nothing to sync: no Supabase store is configured (SUPABASE_DB_URL)")
    from tasks.store.supabase_store import SupabaseStore

    with SupabaseStore(url, local_path=path, embedder=embedder_from_config(env)) as configured:
        return configured.flush_outbox()

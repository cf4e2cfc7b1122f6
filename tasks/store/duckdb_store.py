"""The embedded store: one DuckDB file, no server, no extensions (FLOAT[256] + cosine similarity)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from tasks.store.base import (
    StoreBase,
    after_write_step,
    check_limit,
    dismissed_row,
    memory_document,
    pick_dismissed,
    query_vector,
    record_rows,
)
from tasks.store.embed import DIM, Embedder
from tasks.store.errors import RecordRejected, StoreBusy, StoreError
from tasks.store.file_errors import is_file_failure, store_file_error
from tasks.store.models import (
    DataIdentity,
    InvestigationRecord,
    InvestigationSummary,
    SimilarInvestigation,
    root_causes_of,
)

SCHEMA_VERSION = 2

SCHEMA = f"""
create table if not exists store_meta (key varchar primary key, value varchar not null);
create table if not exists investigations (
    run_id varchar primary key,
    content_hash varchar not null,
    created_at timestamptz not null,
    saved_at timestamptz not null,
    metric varchar not null,
    metric_name varchar,
    table_name varchar not null,
    baseline varchar not null,
    comparison varchar not null,
    question json not null,
    result json not null,
    data_fingerprint json not null,
    data_source varchar
);
create table if not exists hypotheses (
    run_id varchar not null,
    position integer not null,
    hypothesis_id varchar,
    title varchar,
    story varchar,
    status varchar not null check (status in ('confirmed', 'ruled_out', 'inconclusive')),
    confidence double check (confidence between 0 and 1),
    details json not null,
    primary key (run_id, position)
);
create table if not exists evidence (
    run_id varchar not null,
    position integer not null,
    hypothesis_id varchar,
    seq integer,
    tool varchar,
    arguments json,
    sql varchar,
    params json,
    result_digest varchar,
    elapsed_ms double,
    tokens integer,
    details json not null,
    primary key (run_id, position)
);
create table if not exists findings (
    run_id varchar not null,
    position integer not null,
    finding_key varchar not null,
    segment json not null,
    category varchar,
    status varchar not null check (status in ('accepted', 'dismissed')),
    claim json,
    critique varchar,
    hypothesis_id varchar,
    details json not null,
    primary key (run_id, position),
    unique (run_id, finding_key)
);
create table if not exists reports (
    run_id varchar primary key,
    title varchar not null,
    body_markdown varchar not null,
    storage_path varchar
);
create table if not exists memory_documents (
    run_id varchar not null,
    kind varchar not null,
    content varchar not null,
    metadata json not null,
    embedding_model varchar not null,
    embedding float[{DIM}] not null,
    primary key (run_id, kind, embedding_model)
);
create table if not exists outbox (
    run_id varchar primary key,
    content_hash varchar not null,
    queued_at timestamptz not null,
    attempts integer not null default 0,
    last_error varchar
);
"""

# What a store file of each earlier schema version needs to reach the next one. Nothing is
# rewritten: new columns start empty (an investigation saved before had no source name).
UPGRADES = {
    2: "alter table investigations add column if not exists data_source varchar",
}

TABLES = ("investigations", "hypotheses", "evidence", "findings", "reports", "memory_documents")
CHILD_TABLES = TABLES[1:]


WAIT_S = 60.0
"""How long opening the store waits, by default, while another process holds its file."""


def default_path() -> Path:
    return Path("~/.drilldown/store.duckdb").expanduser()


def _held_elsewhere(error: Exception) -> bool:
    """True when DuckDB refused the file because another process holds its lock."""
    return "Conflicting lock" in str(error) or "Could not set lock" in str(error)


def connect(path: Path, wait_s: float, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the store's file (``read_only``: one that never writes it, which a
    read-only file or mount allows). DuckDB lets one process at a time open a file for
    writing: while another holds it (another run remembering its investigation), this one
    retries, with growing pauses and jitter, for up to ``wait_s`` seconds, so concurrent runs
    take turns instead of losing their writes; then :class:`StoreBusy`. A file that cannot be
    opened is a :class:`~tasks.store.errors.StoreFileError` naming it and the fix."""
    deadline = time.monotonic() + wait_s
    pause = 0.02
    while True:
        try:
            return duckdb.connect(
                str(path),
                read_only=read_only,
                config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
            )
        except (duckdb.Error, OSError) as e:
            if not _held_elsewhere(e):
                raise store_file_error(e, path, writing=not read_only) from None
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreBusy(
                    f"the memory store {str(path)!r} stayed busy for {wait_s:g} s: another "
                    "process holds it (DRILLDOWN_STORE_WAIT sets how long to wait)"
                ) from None
            time.sleep(min(left, pause * random.uniform(0.5, 1.5)))
            pause = min(pause * 2, 0.5)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction; one the failure already ended, or a file that fails
    again, leaves the first error the one reported."""
    try:
        con.execute("rollback")
    except duckdb.Error:
        pass


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _loads(value: Any) -> Any:
    return None if value is None else json.loads(value)


class DuckDBStore(StoreBase):
    """Investigations in an embedded DuckDB file (default `~/.drilldown/store.duckdb`).

    One process may hold the file at a time (DuckDB's lock): opening waits up to ``wait_s``
    seconds (default :data:`WAIT_S`) while another process holds it (:func:`connect`), so hold a
    store only as long as a read or a save takes. Threads share this store's connection under a
    lock. A store opened ``read_only`` never writes its file (a read-only mount, a shared copy)
    and, when there is no file, reads as empty without making one.

    Every failure of the file itself (damaged, not a store, read-only, a full disk) is a
    :class:`~tasks.store.errors.StoreFileError`: one line naming the file and the fix.
    """

    kind = "duckdb"

    def __init__(
        self,
        path: str | Path | None = None,
        embedder: Embedder | None = None,
        *,
        wait_s: float = WAIT_S,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._embedder = embedder
        self._lock = threading.RLock()
        self._reads_only = read_only  # never saves, whatever connection it reads through
        self.read_only = read_only and self.path.exists()
        if read_only and not self.path.exists():  # nothing to read, and no file made
            self._con = duckdb.connect(":memory:")
        else:
            if not read_only:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise store_file_error(e, self.path) from None
            self._con = connect(self.path, wait_s, read_only)
        try:
            with self._using():
                self._con.execute("set TimeZone = 'UTC'")
                if self.read_only and not self._current():
                    # an older schema: brought up to date by a connection that writes
                    self._con.close()
                    self.read_only = False
                    self._con = connect(self.path, wait_s)
                    self._con.execute("set TimeZone = 'UTC'")
                if not self.read_only:
                    self._upgrade()
        except BaseException:
            self.close()
            raise

    def _current(self) -> bool:
        """Whether the file is a store of this schema version, read as it is."""
        con = self._cx()
        meta = con.execute(
            "select count(*) from duckdb_tables() where table_name = 'store_meta'"
        ).fetchone()
        if not meta or not meta[0]:
            return False
        row = con.execute("select value from store_meta where key = 'schema_version'").fetchone()
        return row is not None and row[0] == str(SCHEMA_VERSION)

    @contextmanager
    def _using(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection, under the lock; a failure of the file itself as a
        :class:`~tasks.store.errors.StoreFileError` naming it (every query is the store's own,
        so any other error of DuckDB's is one of the file too)."""
        with self._lock:
            try:
                yield self._cx()
            except (duckdb.Error, OSError) as e:
                raise store_file_error(e, self.path, writing=not self.read_only) from None

    def _upgrade(self) -> None:
        """Create the tables of a new file, or bring an older file's schema up to date."""
        con = self._cx()
        con.execute("begin transaction")
        try:
            con.execute(SCHEMA)
            row = con.execute(
                "select value from store_meta where key = 'schema_version'"
            ).fetchone()
            version = int(row[0]) if row else SCHEMA_VERSION
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the store {str(self.path)!r} has schema version {version}, newer than "
                    f"this version of drilldown reads ({SCHEMA_VERSION}); upgrade drilldown"
                )
            for step in range(version + 1, SCHEMA_VERSION + 1):
                con.execute(UPGRADES[step])
            con.execute(
                "insert or replace into store_meta values ('schema_version', ?)",
                [str(SCHEMA_VERSION)],
            )
            con.execute("commit")
        except BaseException:
            _rollback(con)
            raise

    # -- configuration -------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None  # type: ignore[assignment]

    def _cx(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise StoreError("the store is closed")
        return self._con

    def _all(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._using() as con:
            return con.execute(query, params).fetchall()

    def _one(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self._using() as con:
            return con.execute(query, params).fetchone()

    # -- writes --------------------------------------------------------------------------------
    def save_investigation(self, record: InvestigationRecord) -> str:
        document = memory_document(record, self.embedder)
        self.write(record, document)
        return record.run_id

    def write(self, record: InvestigationRecord, document: dict[str, Any]) -> bool:
        """Store a record with its memory document in one transaction.

        Returns False when the same content was already stored (nothing written).
        """
        rows = record_rows(record)
        inv = rows.investigation
        if self._reads_only:
            raise StoreError(f"the memory store {str(self.path)!r} was opened read-only")
        with self._using() as con:
            con.execute("begin transaction")
            try:
                old = con.execute(
                    "select content_hash from investigations where run_id = ?", [inv["run_id"]]
                ).fetchone()
                if old is not None and old[0] == inv["content_hash"]:
                    con.execute("commit")
                    return False
                for table in TABLES:
                    con.execute(f"delete from {table} where run_id = ?", [inv["run_id"]])
                self._insert_rows(con, rows, document)
                con.execute("commit")
            except duckdb.Error as e:
                _rollback(con)
                if is_file_failure(e):
                    raise
                raise RecordRejected(
                    f"investigation {inv['run_id']!r} not stored: {str(e).splitlines()[0]}"
                ) from None
            except BaseException:
                _rollback(con)
                raise
        return True

    def _insert_rows(self, con: duckdb.DuckDBPyConnection, rows: Any, doc: dict[str, Any]) -> None:
        inv = rows.investigation
        run_id = inv["run_id"]
        con.execute(
            "insert into investigations (run_id, content_hash, created_at, saved_at, metric, "
            "metric_name, table_name, baseline, comparison, question, result, data_fingerprint, "
            "data_source) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run_id, inv["content_hash"], inv["created_at"], datetime.now(UTC), inv["metric"],
             inv["metric_name"], inv["table_name"], inv["baseline"], inv["comparison"],
             _dumps(inv["question"]), _dumps(inv["result"]), _dumps(inv["data_fingerprint"]),
             inv["data_source"]],
        )  # fmt: skip
        after_write_step("investigation")
        if rows.hypotheses:
            con.executemany(
                "insert into hypotheses values (?, ?, ?, ?, ?, ?, ?, ?)",
                [[run_id, h["position"], h["hypothesis_id"], h["title"], h["story"], h["status"],
                  h["confidence"], _dumps(h["details"])] for h in rows.hypotheses],
            )  # fmt: skip
        after_write_step("hypotheses")
        if rows.evidence:
            con.executemany(
                "insert into evidence values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[run_id, e["position"], e["hypothesis_id"], e["seq"], e["tool"],
                  _dumps(e["arguments"]), e["sql"], _dumps(e["params"]), e["result_digest"],
                  e["elapsed_ms"], e["tokens"], _dumps(e["details"])] for e in rows.evidence],
            )  # fmt: skip
        after_write_step("evidence")
        if rows.findings:
            con.executemany(
                "insert into findings values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[run_id, f["position"], f["finding_key"], _dumps(f["segment"]), f["category"],
                  f["status"], _dumps(f["claim"]), f["critique"], f["hypothesis_id"],
                  _dumps(f["details"])] for f in rows.findings],
            )  # fmt: skip
        after_write_step("findings")
        con.execute(
            "insert into reports values (?, ?, ?, null)",
            [run_id, rows.report["title"], rows.report["body_markdown"]],
        )
        after_write_step("report")
        con.execute(
            f"insert into memory_documents values (?, ?, ?, ?, ?, ?::FLOAT[{DIM}])",
            [run_id, doc["kind"], doc["content"], _dumps(doc["metadata"]),
             doc["embedding_model"], doc["embedding"]],
        )  # fmt: skip
        after_write_step("memory_document")

    # -- reads ---------------------------------------------------------------------------------
    def get_investigation(self, run_id: str) -> InvestigationRecord | None:
        with self._using() as con:
            inv = con.execute(
                "select run_id, created_at, data_fingerprint, metric, metric_name, table_name, "
                "baseline, comparison, question, result, data_source from investigations "
                "where run_id = ?",
                [run_id],
            ).fetchone()
            if inv is None:
                return None
            children = {
                t: [
                    json.loads(r[0])
                    for r in con.execute(
                        f"select details from {t} where run_id = ? order by position", [run_id]
                    ).fetchall()
                ]
                for t in ("hypotheses", "evidence", "findings")
            }
            report = con.execute(
                "select body_markdown from reports where run_id = ?", [run_id]
            ).fetchone()
        return InvestigationRecord(
            run_id=inv[0],
            created_at=inv[1],
            data_fingerprint=_loads(inv[2]),
            data_source=inv[10],
            metric=inv[3],
            metric_name=inv[4],
            table=inv[5],
            baseline=inv[6],
            comparison=inv[7],
            question=_loads(inv[8]),
            result=_loads(inv[9]),
            hypotheses=children["hypotheses"],
            evidence=children["evidence"],
            findings=children["findings"],
            report_md=report[0] if report else "",
        )

    def document(self, run_id: str) -> dict[str, Any] | None:
        """The stored memory document of a run (text, metadata, model, vector)."""
        row = self._one(
            "select kind, content, metadata, embedding_model, embedding from memory_documents "
            "where run_id = ? order by kind limit 1",
            [run_id],
        )
        if row is None:
            return None
        return {"kind": row[0], "content": row[1], "metadata": _loads(row[2]),
                "embedding_model": row[3], "embedding": [float(x) for x in row[4]]}  # fmt: skip

    _SUMMARY = (
        "select i.run_id, i.created_at, i.metric, i.metric_name, i.table_name, i.baseline, "
        "i.comparison, i.result -> '$.root_causes', i.data_fingerprint, i.data_source"
    )

    @staticmethod
    def _summary_fields(row: Sequence[Any]) -> dict[str, Any]:
        causes = _loads(row[7])
        return {
            "run_id": row[0],
            "created_at": row[1],
            "metric": row[2],
            "metric_name": row[3],
            "table": row[4],
            "baseline": row[5],
            "comparison": row[6],
            "root_causes": root_causes_of({"root_causes": causes}),
            "data_fingerprint": _loads(row[8]),
            "data_source": row[9],
        }

    def list_investigations(self, limit: int = 20) -> list[InvestigationSummary]:
        check_limit(limit)
        rows = self._all(
            f"{self._SUMMARY} from investigations i order by i.created_at desc, i.run_id limit ?",
            [limit],
        )
        return [InvestigationSummary(**self._summary_fields(r)) for r in rows]

    def search_similar(
        self,
        query: str | Sequence[float] | np.ndarray,
        k: int = 5,
        metric: str | None = None,
        model: str | None = None,
    ) -> list[SimilarInvestigation]:
        check_limit(k, "k")
        vector, model_name = query_vector(query, model, self.embedder)
        rows = self._all(
            f"{self._SUMMARY}, d.embedding_model, "
            f"array_cosine_similarity(d.embedding, ?::FLOAT[{DIM}]) as score "
            "from memory_documents d join investigations i using (run_id) "
            "where d.embedding_model = ? and (? is null or i.metric = ?) "
            "order by score desc, i.created_at desc limit ?",
            [vector, model_name, metric, metric, k],
        )
        return [
            SimilarInvestigation(**self._summary_fields(r), embedding_model=r[10], score=r[11])
            for r in rows
        ]

    def dismissed_findings(
        self,
        metric: str,
        segments: Sequence[dict[str, Any]] | None = None,
        *,
        data: DataIdentity,
    ) -> list[dict[str, Any]]:
        rows = self._all(
            "select f.details, i.run_id, i.created_at, i.data_fingerprint, i.data_source "
            "from findings f join investigations i using (run_id) "
            "where f.status = 'dismissed' and (i.metric = ? or i.metric_name = ?) "
            "and i.table_name = ? order by i.created_at desc, f.position",
            [metric, metric, data.table],
        )
        found = [
            dismissed_row(json.loads(r[0]), r[1], r[2],
                          DataIdentity(table=data.table, fingerprint=_loads(r[3]), source=r[4]))
            for r in rows
        ]  # fmt: skip
        return pick_dismissed(found, segments, data)

    def table_counts(self) -> dict[str, int]:
        """Rows per table, for diagnostics."""
        with self._using() as con:
            return {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in TABLES}

    # -- outbox (records waiting for the team store) -------------------------------------------
    def enqueue(self, run_id: str, content_hash: str, error: str) -> None:
        with self._using() as con:
            con.execute(
                "insert or replace into outbox values (?, ?, ?, 0, ?)",
                [run_id, content_hash, datetime.now(UTC), error],
            )

    def pending(self) -> list[str]:
        return [r[0] for r in self._all("select run_id from outbox order by queued_at, run_id")]

    def queued_at(self, run_id: str) -> datetime | None:
        row = self._one("select queued_at from outbox where run_id = ?", [run_id])
        return row[0] if row else None

    def mark_sent(self, run_id: str, content_hash: str) -> None:
        """Drop the outbox row if it still names this content (a newer save keeps its row)."""
        with self._using() as con:
            con.execute(
                "delete from outbox where run_id = ? and content_hash = ?", [run_id, content_hash]
            )

    def drop_pending(self, run_id: str) -> None:
        with self._using() as con:
            con.execute("delete from outbox where run_id = ?", [run_id])

    def mark_failed(self, run_id: str, error: str) -> None:
        with self._using() as con:
            con.execute(
                "update outbox set attempts = attempts + 1, last_error = ? where run_id = ?",
                [error, run_id],
            )

"""The team store: Postgres + pgvector (Supabase), over a direct connection with psycopg 3.

The schema is `supabase/migrations/`. The app connects as its team's writer (`drilldown_writer`, or
a role in `drilldown_writers` mapped to its team): row-level security shows it its team's
investigations only, and it writes only through `public.save_investigation()`, which replaces a
run of its team whole in one transaction.
Supabase keeps pgvector in the `extensions` schema; the vector type is looked up in the schema the
extension was installed in, and every statement names its schema, so pooled connections work too.
Every transaction first sets `search_path` to `pg_catalog, pg_temp` (`SET LOCAL`, which a pooler
in transaction mode keeps to it): the functions and operators of the store's statements are the
built-in ones, never ones another role defined in `public`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn

import numpy as np
import psycopg
from psycopg.types import TypeInfo
from psycopg.types.json import Json, Jsonb

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
from tasks.store.embed import Embedder
from tasks.store.errors import RecordRejected, StoreError, StoreUnavailable
from tasks.store.models import (
    DataIdentity,
    InvestigationRecord,
    InvestigationSummary,
    SimilarInvestigation,
    root_causes_of,
)


SEARCH_PATH = "select pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)"
"""The first statement of every transaction: names resolve in the built-ins (and the
transaction's own temporary objects) only, until it ends."""
VECTOR_SCHEMA = (
    "select pg_catalog.quote_ident(n.nspname) from pg_catalog.pg_extension e "
    "join pg_catalog.pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'"
)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# What a reachable server says when the settings are wrong (libpq gives no SQLSTATE for these):
# retrying later will not help, so such a save fails loudly instead of waiting in the outbox.
_SETTINGS_REFUSALS = (
    "password authentication failed",
    "is not permitted to log in",
    "does not exist",
    "no pg_hba.conf entry",
    "tenant or user not found",
)


def is_connection_error(e: BaseException) -> bool:
    """Connection refused, timed out or dropped, as opposed to a rejected statement."""
    if isinstance(e, StoreUnavailable):
        return True
    if isinstance(e, psycopg.OperationalError):
        # no SQLSTATE: the connection never opened or dropped; 08: connection exception;
        # 57P01-03: the server is shutting down or starting. Others (57014 query_canceled,
        # 28P01 bad password, 3D000 no such database) came from a live server.
        state = getattr(e, "sqlstate", None)
        if state is not None:
            return state.startswith(("08", "57P"))
        return not any(phrase in str(e).lower() for phrase in _SETTINGS_REFUSALS)
    return False


def _teamless_role(conn: psycopg.Connection[Any]) -> str | None:
    """The connected role when it belongs to no team, else None.

    Such a role would see no past investigation and save none: better one clear error at the
    start than a memory that looks empty. A store from before teams (no drilldown_team())
    has one memory for every writer.
    """
    try:
        conn.execute(SEARCH_PATH)
        role, team = conn.execute(
            "select public.drilldown_caller(), public.drilldown_team()"
        ).fetchone()
    except psycopg.errors.UndefinedFunction:
        role, team = None, None
    conn.rollback()
    return role if role is not None and team is None else None


class PostgresStore(StoreBase):
    """Investigations in Postgres + pgvector. `dsn` is a URL or a libpq conninfo string."""

    kind = "postgres"

    def __init__(
        self, dsn: str, embedder: Embedder | None = None, *, connect_timeout: int = 10
    ) -> None:
        if not dsn or not dsn.strip():
            raise StoreError("the Postgres connection string is empty")
        self.dsn = dsn
        self.connect_timeout = connect_timeout
        self._embedder = embedder
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- connection ----------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            # prepare_threshold=None: no server-side prepared statements (Supabase's pooler in
            # transaction mode does not keep them)
            conn = psycopg.connect(
                self.dsn, connect_timeout=self.connect_timeout, prepare_threshold=None
            )
            conn.execute("select 1")
            conn.rollback()
        except psycopg.ProgrammingError as e:  # a malformed connection string
            raise StoreError(f"invalid Postgres connection string: {_one_line(e)}") from None
        except psycopg.OperationalError as e:
            if is_connection_error(e):
                raise StoreUnavailable(f"cannot reach the Postgres store: {_one_line(e)}") from None
            raise StoreError(f"the Postgres store refused the connection: {_one_line(e)}") from None
        try:
            from pgvector.psycopg.vector import register_vector_info

            conn.execute(SEARCH_PATH)
            schema = conn.execute(VECTOR_SCHEMA).fetchone()
            info = TypeInfo.fetch(conn, f"{schema[0]}.vector") if schema else None
            if info is None:
                conn.close()
                raise StoreError(
                    "the database has no pgvector type: apply supabase/migrations first"
                )
            register_vector_info(conn, info)
            conn.rollback()
            role = _teamless_role(conn)
            if role is not None:
                conn.close()
                raise StoreError(
                    f"the Postgres role {role!r} belongs to no team: map it to its team in "
                    "public.team_writers (see supabase/migrations)"
                )
        except psycopg.Error as e:
            conn.close()
            raise StoreError(f"cannot prepare the Postgres connection: {_one_line(e)}") from None
        self._conn = conn
        return conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None

    def _read(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            conn = self._connect()
            try:
                conn.execute(SEARCH_PATH)
                rows = conn.execute(query, params).fetchall()
                conn.rollback()
                return rows
            except psycopg.Error as e:
                self._fail(e)

    def _fail(self, e: psycopg.Error) -> NoReturn:
        """Turn a database error into a store error (after rolling back), and raise it."""
        if is_connection_error(e) or (self._conn is not None and self._conn.closed):
            self._drop_connection()
            raise StoreUnavailable(f"lost the Postgres store: {_one_line(e)}") from None
        try:
            if self._conn is not None:
                self._conn.rollback()
        except psycopg.Error:
            self._drop_connection()
        raise StoreError(_one_line(e)) from None

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
        run_id = rows.investigation["run_id"]
        with self._lock:
            conn = self._connect()
            try:
                conn.execute(SEARCH_PATH)
                (written,) = conn.execute(
                    "select public.save_investigation(%s, %s, %s, %s, %s, %s)",
                    [Json(rows.investigation), Json(rows.hypotheses), Json(rows.evidence),
                     Json(rows.findings), Json(rows.report), Json([document])],
                ).fetchone()  # fmt: skip
                after_write_step("written")
                conn.commit()
            except psycopg.Error as e:
                if is_connection_error(e) or conn.closed:
                    self._drop_connection()
                    raise StoreUnavailable(f"lost the Postgres store: {_one_line(e)}") from None
                conn.rollback()
                raise RecordRejected(
                    f"investigation {run_id!r} not stored: {_one_line(e)}"
                ) from None
            except BaseException:
                if not conn.closed:
                    conn.rollback()
                raise
        return bool(written)

    def saved_after(self, run_id: str, when: datetime | None, content_hash: str) -> bool:
        """True when the run is stored with other content, saved after `when`."""
        if when is None:
            return False
        rows = self._read(
            "select saved_at > %s and content_hash <> %s from public.investigations "
            "where run_id = %s",
            [when, content_hash, run_id],
        )
        return bool(rows and rows[0][0])

    # -- reads ---------------------------------------------------------------------------------
    def get_investigation(self, run_id: str) -> InvestigationRecord | None:
        with self._lock:
            conn = self._connect()
            try:
                conn.execute(SEARCH_PATH)
                inv = conn.execute(
                    "select id, run_id, created_at, data_fingerprint, metric, metric_name, "
                    "table_name, baseline, comparison, question, result, data_source "
                    "from public.investigations where run_id = %s",
                    [run_id],
                ).fetchone()
                if inv is None:
                    conn.rollback()
                    return None
                children = {
                    t: [
                        r[0]
                        for r in conn.execute(
                            f"select details from public.{t} where investigation_id = %s "
                            "order by position",
                            [inv[0]],
                        ).fetchall()
                    ]
                    for t in ("hypotheses", "evidence", "findings")
                }
                report = conn.execute(
                    "select body_markdown from public.reports where investigation_id = %s",
                    [inv[0]],
                ).fetchone()
                conn.rollback()
            except psycopg.Error as e:
                self._fail(e)
        return InvestigationRecord(
            run_id=inv[1],
            created_at=inv[2],
            data_fingerprint=inv[3],
            data_source=inv[11],
            metric=inv[4],
            metric_name=inv[5],
            table=inv[6],
            baseline=inv[7],
            comparison=inv[8],
            question=inv[9],
            result=inv[10],
            hypotheses=children["hypotheses"],
            evidence=children["evidence"],
            findings=children["findings"],
            report_md=report[0] if report else "",
        )

    _SUMMARY = (
        "select i.run_id, i.created_at, i.metric, i.metric_name, i.table_name, i.baseline, "
        "i.comparison, i.result -> 'root_causes', i.data_fingerprint, i.data_source"
    )

    @staticmethod
    def _summary_fields(row: Sequence[Any]) -> dict[str, Any]:
        return {
            "run_id": row[0],
            "created_at": row[1],
            "metric": row[2],
            "metric_name": row[3],
            "table": row[4],
            "baseline": row[5],
            "comparison": row[6],
            "root_causes": root_causes_of({"root_causes": row[7]}),
            "data_fingerprint": row[8],
            "data_source": row[9],
        }

    def list_investigations(self, limit: int = 20) -> list[InvestigationSummary]:
        check_limit(limit)
        rows = self._read(
            f"{self._SUMMARY} from public.investigations i "
            "order by i.created_at desc, i.run_id limit %s",
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
        flt: dict[str, Any] = {"embedding_model": model_name}
        if metric is not None:
            flt["metric"] = metric
        rows = self._read(
            f"{self._SUMMARY}, m.embedding_model, m.similarity "
            "from public.match_memory_documents(%s, %s, %s) m "
            "join public.investigations i on i.id = m.investigation_id "
            "order by m.similarity desc, i.created_at desc",
            [np.asarray(vector, dtype=np.float32), k, Jsonb(flt)],
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
        rows = self._read(
            "select f.details, i.run_id, i.created_at, i.data_fingerprint, i.data_source "
            "from public.findings f join public.investigations i on i.id = f.investigation_id "
            "where f.status = 'dismissed' and (i.metric = %s or i.metric_name = %s) "
            "and i.table_name = %s order by i.created_at desc, f.position",
            [metric, metric, data.table],
        )
        found = [
            dismissed_row(r[0], r[1], r[2],
                          DataIdentity(table=data.table, fingerprint=r[3], source=r[4]))
            for r in rows
        ]  # fmt: skip
        return pick_dismissed(found, segments, data)

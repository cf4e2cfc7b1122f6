"""One investigation's state, handed from step to step.

A :class:`Run` is what the steps of an investigation share: the database (a DuckDB file, or a
``postgresql://`` URL whose tables are read in place), the question's arguments, the data's
identity, and, opened once and owned by the run, the read-only tool context on the database
(:class:`ToolContext` or :class:`PostgresContext`), the validated :class:`Question` and the
engine's :class:`Analysis`. Hypotheses investigated at once share them instead of recomputing them, and
closing the run closes its connection. Nothing about a run lives in module globals.

A Prefect task caches on a run's identity (:meth:`Run.identity`: database, question, data hash),
never on its open connection. For Postgres the database is its place without user or password
(host, port, database, schema, tables) and the data hash covers the rows' contents, measured in
Postgres when the run opens: a cached answer is never served after rows change.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sql_tools import PostgresContext, ToolContext, is_postgres_url, parse_postgres_url
from tasks.engine.spec import Question
from tasks.ingest.postgres import open_context

if TYPE_CHECKING:
    from tasks.engine.explain import Analysis

Progress = Callable[[int, int, dict[str, Any]], None]
"""Called as each hypothesis completes: (completed, total, the hypothesis's run as JSON)."""


def data_hash(db: str | Path) -> str:
    """SHA-256 over the data's fingerprint (:func:`fingerprint`): its identity for caching."""
    with open_context(str(db)) as ctx:
        return fingerprint_hash(fingerprint(ctx))


def fingerprint(ctx: ToolContext | PostgresContext) -> dict[str, str]:
    """table -> a hash of its contents: the SHA-256 of its columns, row count and sum of row
    hashes, measured in the database (``content_fingerprint``, one query). Measured rather than
    read from the load records: two DuckDB files written outside the loader, or changed after
    it, must not pass for the same data."""
    tables = ctx.content_fingerprint()["tables"]
    return {name: fingerprint_hash(content) for name, content in sorted(tables.items())}


def fingerprint_hash(fp: dict[str, Any]) -> str:
    """One hash for a whole fingerprint."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()


def question_of(
    ctx: ToolContext | PostgresContext, qargs: dict[str, Any], *, answerable: bool = True
) -> Question:
    """The validated question from command-line style arguments (see ``build_question``),
    refused when it cannot mean what it says (``check_answerable``): before any step runs, so
    nothing is reported or remembered. ``answerable=False`` only parses it: for reading the
    data it names (the last day with data) before asking it."""
    from tasks.engine.answerable import check_answerable
    from tasks.engine.parse import build_question

    args = dict(qargs)
    if args.get("metrics_file"):
        args["metrics_file"] = Path(args["metrics_file"])
    args["filters"] = args.get("filters") or []
    question = build_question(ctx.schema, **args)
    if answerable:
        check_answerable(ctx, question)  # type: ignore[arg-type]
    return question


def check_question_text(qargs: dict[str, Any]) -> None:
    """What is wrong with the question whatever the data (``parse.check_question_text``),
    refused before any data is loaded."""
    from tasks.engine.parse import check_question_text as check

    metrics_file = qargs.get("metrics_file")
    check(
        qargs["metric"], qargs["baseline"], qargs["comparison"], grain=qargs.get("grain"),
        filters=qargs.get("filters") or [],
        metrics_file=Path(metrics_file) if metrics_file else None,
    )  # fmt: skip


def _file_hash(path: str | Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"  # build_question reports the file itself


class Run:
    """One investigation: ``db`` (a DuckDB file, or a ``postgresql://`` URL: :attr:`db` then
    shows it without its password, which only the connection keeps) and the question's
    arguments ``qargs`` (as ``drilldown investigate`` takes them), the data's identity ``data`` (when not given: the tables'
    content hashes, and the named-metrics file's when the question reads one), the data's ``source``
    name, the ``progress`` callback, and optionally the Claude ``client`` and agent ``config`` to
    use (default: from the environment). ``tables`` names the tables of a DuckDB file the run
    may see (default: all): the ones its own load wrote, so that a table an earlier load left in
    the same file never reaches this investigation.

    Use it as a context manager, or call :meth:`close`: the run owns its connection.
    """

    def __init__(
        self,
        db: str | Path,
        qargs: dict[str, Any],
        data: str | None = None,
        *,
        source: str | None = None,
        progress: Progress | None = None,
        client: Any = None,
        config: Any = None,
        tables: list[str] | None = None,
    ) -> None:
        if is_postgres_url(db):
            where = parse_postgres_url(str(db))
            self._location, self.db, self._place = str(db), where.display, where.location
        else:
            self.db = self._location = self._place = str(Path(db).resolve())
        self.qargs = dict(qargs)
        self.source = source
        self.progress = progress
        self.client = client
        self.config = config
        self.tables = sorted(tables) if tables is not None else None
        self._lock = threading.Lock()
        self._ctx: ToolContext | PostgresContext | None = None
        self._fingerprint: dict[str, str] | None = None
        self._question: Question | None = None
        self._analysis: Analysis | None = None
        self._closed = False
        try:
            self.data = data or self._identity_hash()
        except BaseException:
            self.close()
            raise

    def _identity_hash(self) -> str:
        """The tables' content hashes, with the named-metrics file's when the question reads one
        (a named metric's definition is part of what a cached result depends on)."""
        data = fingerprint_hash(self.fingerprint)
        metrics_file = self.qargs.get("metrics_file")
        if metrics_file:
            data = fingerprint_hash({"data": data, "metrics": _file_hash(metrics_file)})
        return data

    @property
    def fingerprint(self) -> dict[str, str]:
        """The data's :func:`fingerprint`, taken once (in Postgres, when the run opens)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.ctx)
        return self._fingerprint

    def identity(self) -> dict[str, Any]:
        """What a cached step's result depends on: the database (and the tables it may see),
        the question, the data."""
        return {"db": self._place, "tables": self.tables, "qargs": self.qargs, "data": self.data}

    @property
    def ctx(self) -> ToolContext | PostgresContext:
        """The run's read-only tool context (opened on first use)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this run is closed")
            if self._ctx is None:
                self._ctx = open_context(self._location, tables=self.tables)
            return self._ctx

    @property
    def question(self) -> Question:
        """The validated question (parsed once)."""
        ctx = self.ctx
        with self._lock:
            if self._question is None:
                self._question = question_of(ctx, self.qargs)
            return self._question

    @property
    def analysis(self) -> Analysis:
        """The engine's analysis of the question (computed once)."""
        q = self.question
        with self._lock:
            if self._analysis is None:
                from tasks.engine.explain import analyze  # imported once there is a question

                self._analysis = analyze(self._ctx, q)  # type: ignore[arg-type]
                self._answer_from_cells(self._analysis)
            return self._analysis

    def _answer_from_cells(self, analysis: Analysis) -> None:
        """From now on the tools answer on the run's connection from the question's stored
        cells when they can (the hypotheses' calls, the gate's re-runs, the report's per-day
        numbers), with no pass over the source (:mod:`tasks.engine.cell_answers`)."""
        analysis.answer_tools()

    def close(self) -> None:
        """Close the connection; the run cannot be used after."""
        with self._lock:
            ctx, self._ctx, self._closed = self._ctx, None, True
            analysis, self._analysis = self._analysis, None
        if analysis is not None:
            analysis.close()
        if ctx is not None:
            ctx.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Run(db={self.db!r}, metric={self.qargs.get('metric')!r})"

"""Strict file loader: CSV/TSV (optionally gzip-compressed) and Parquet files into DuckDB.

Every file is validated completely in Python before the database is opened for writing (see
:mod:`tasks.ingest._csv`). Files are then read by DuckDB straight into their tables inside one
transaction, reconciled against the Python row count, and committed together with their
catalogue records and profiles. When a read needs a second attempt (see :mod:`tasks.ingest._duck`),
that transaction is rolled back and the files are read into in-memory staging tables first and
copied into the database in one transaction. All of this happens in a copy of the database
file, which replaces the file only after the commit: any error leaves the file byte for byte as
it was (or absent, if it did not exist). A table is never partially loaded.

Here: the load options and result, collecting the files, the transaction that reads, reconciles
and records them, and the copy of the database file it runs in; every step hands the next the
state it must undo on failure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from sql_tools import LoadError, short
from sql_tools.catalog import ColumnInfo, LoadRecord, ensure_catalog, read_catalog, write_load
from tasks.ingest._csv import CsvScan, scan_csv
from tasks.ingest._dates import check_date_format
from tasks.ingest._duck import (
    ReadPlan,
    Reread,
    column_types,
    duck_message,
    fix_columns,
    row_count,
    stage_csv,
    stage_parquet,
)
from tasks.ingest._names import column_names, table_name
from tasks.ingest._names import quote_ident as q
from tasks.ingest._sniff import binary_kind, canonical_codec
from tasks.ingest.profile import profile_database

Format = Literal["csv", "csv.gz", "parquet"]
# suffix -> (format, tab-delimited)
_SUFFIXES: dict[str, tuple[Format, bool]] = {
    ".csv.gz": ("csv.gz", False),
    ".tsv.gz": ("csv.gz", True),
    ".csv": ("csv", False),
    ".tsv": ("csv", True),
    ".parquet": ("parquet", False),
}
_STAGE = "_drilldown_stage"
_HASH_CHUNK = 1 << 20


class LoadOptions(BaseModel):
    """Limits and forced settings for one load call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_bytes: int = 2 * 1024**3
    """Cap on bytes read per file after decompression (decompression-bomb guard)."""
    max_rows: int = 50_000_000
    """Cap on data rows per file."""
    max_columns: int = 500
    max_field_bytes: int = 1024**2
    """Longest single field or line allowed."""
    encoding: str | None = None
    """None = auto (UTF-8, or UTF-16 by BOM/NUL pattern); else e.g. latin-1, cp1252, utf-16."""
    delimiter: str | None = None
    """None = detect among , ; tab |."""
    decimal_comma: bool | None = None
    """None = detect (unambiguous columns only); True = ',' is the decimal point; False = ','
    is a thousands separator."""
    date_format: str | None = None
    """None = detect month/day and day/month dates over each column; else a strftime-style
    format (``%m/%d/%Y``) read into every text column it reads whole."""


class TableResult(BaseModel):
    """What happened to one file."""

    table: str
    source: str
    status: Literal["loaded", "replaced", "unchanged"]
    rows: int
    columns: list[ColumnInfo]
    warnings: list[str]


class LoadReport(BaseModel):
    """The outcome of one load call."""

    db: str
    tables: list[TableResult]
    skipped: list[str]
    """Files found in directories that do not have a supported extension."""


@dataclass
class _Input:
    """One file to load, with its scan once validated."""

    path: Path
    source: str
    fmt: Format
    tab: bool
    table: str
    scan: CsvScan | None = None
    parquet_rows: int = 0
    parquet_bytes: int = 0
    sha256: str = ""
    labels: list[str] = field(default_factory=list)
    status: Literal["loaded", "replaced", "unchanged"] = "loaded"
    record: LoadRecord | None = None
    stat: tuple[int, int] = (0, 0)  # (size, mtime_ns) when validation started
    plan: ReadPlan | None = None  # how to read the CSV again after a Reread


# --------------------------------------------------------------------------------------------
# inputs


def _split_suffix(name: str) -> tuple[str, Format, bool] | None:
    """``(stem, format, tab)`` for a supported file name, else None."""
    lower = name.lower()
    for suffix, (fmt, tab) in _SUFFIXES.items():
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], fmt, tab
    return None


def _make_input(path: Path, source: str) -> _Input | None:
    parts = _split_suffix(path.name)
    if parts is None:
        return None
    stem, fmt, tab = parts
    return _Input(path=path, source=source, fmt=fmt, tab=tab, table=table_name(stem))


def _collect(paths: Sequence[str | Path]) -> tuple[list[_Input], list[str]]:
    """Expand directories (recursively, sorted); refuse missing paths and unsupported files."""
    inputs: list[_Input] = []
    skipped: list[str] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise LoadError(f"{path}: no such file or directory")
        if path.is_dir():
            files = _folder_files(path)
        else:
            _check_inside(path, path.parent, path.name)
            files = [path]
        for file in files:
            item = _make_input(file, str(file))
            if item is None:
                if not path.is_dir():
                    raise LoadError(
                        f"{file.name}: unsupported file type; supported: .csv, .tsv, .csv.gz, "
                        ".tsv.gz, .parquet",
                        code="unsupported_file",
                    )
                skipped.append(str(file))
                continue
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                inputs.append(item)
    if not inputs:
        raise LoadError("no loadable files (.csv, .tsv, .csv.gz, .tsv.gz, .parquet) given")
    return inputs, skipped


def _folder_files(folder: Path) -> list[Path]:
    """The files under ``folder`` (recursively, sorted), once every entry is known to stay
    inside it.

    A folder someone else made (a download, an unpacked archive) must not read the user's other
    files: an entry that is a link (to a file or to a folder) whose target lies outside
    ``folder`` refuses the whole load. Links to folders are not descended, so a link back into
    the folder cannot loop; what they point at is reached where it lives.
    """
    files: list[Path] = []
    for entry in sorted(folder.rglob("*")):
        _check_inside(entry, folder, entry.relative_to(folder).as_posix())
        if entry.is_file():
            files.append(entry)
    return files


def _check_inside(entry: Path, folder: Path, shown: str) -> None:
    """Refuse ``entry`` (named ``shown`` in the error) when its resolved path leaves ``folder``
    or its links cannot be followed (a loop)."""
    try:
        real, root = entry.resolve(), folder.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a link loop (Python before 3.13)
        raise LoadError(
            f"{shown}: a symbolic link that cannot be followed (a loop); nothing was loaded",
            code="unsupported_file",
        ) from None
    if not real.is_relative_to(root):
        kind = "folder" if real.is_dir() else "file"
        raise LoadError(
            f"{shown}: a symbolic link to a {kind} outside the data folder {folder.name or '.'}; "
            "nothing was loaded (give the file it points to, or copy it into the folder)",
            code="unsupported_file",
        )


def _check_same_table(inputs: list[_Input]) -> None:
    """Two inputs of one call must not map to the same table."""
    owner: dict[str, _Input] = {}
    for item in inputs:
        other = owner.setdefault(item.table, item)
        if other is not item:
            raise LoadError(
                f"{item.path.name}: would load into table {item.table}, like {other.source}; "
                "rename one of the files"
            )


_DELIMITER_NAMES = {"\\t": "\t", "tab": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def _resolve_options(opts: LoadOptions) -> LoadOptions:
    """Check option values and spell out delimiter names (``tab`` or a typed ``\\t``)."""
    named = _DELIMITER_NAMES.get((opts.delimiter or "").lower())
    if named is not None:
        opts = opts.model_copy(update={"delimiter": named})
    _check_options(opts)
    return opts


def _check_options(opts: LoadOptions) -> None:
    """Refuse impossible option values before any work."""
    for name in ("max_bytes", "max_rows", "max_columns", "max_field_bytes"):
        if getattr(opts, name) < 1:
            raise LoadError(f"option {name} must be at least 1", code="invalid_arguments")
    if opts.encoding is not None:
        canonical_codec(opts.encoding)
    if opts.date_format is not None:
        with duckdb.connect() as con:
            check_date_format(con, opts.date_format)
    d = opts.delimiter
    if d is not None and (len(d) != 1 or d in '"\r\n' or not d.isascii()):
        raise LoadError(
            f"option delimiter must be one ASCII character other than a quote or newline, "
            f"got {short(d)}",
            code="invalid_arguments",
        )


# --------------------------------------------------------------------------------------------
# validation (no database)


def _sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _scan_parquet(item: _Input, opts: LoadOptions) -> None:
    """Check a Parquet file from its metadata: real Parquet, rows, size and column caps."""
    name = item.path.name
    with open(item.path, "rb") as f:
        head = f.read(64)
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 4))
        tail = f.read(4)
        if not (head.startswith(b"PAR1") and tail == b"PAR1" and size >= 12):
            kind = binary_kind(head)
            looks = f"; it looks like {kind}" if kind and kind != "a Parquet file" else ""
            raise LoadError(f"{name}: not a Parquet file{looks}", code="unsupported_file")
        f.seek(0)
        try:
            pf = pq.ParquetFile(f)
            meta = pf.metadata
            labels = list(pf.schema_arrow.names)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise LoadError(
                f"{name}: not a readable Parquet file ({short(str(e), 120)})",
                code="unsupported_file",
            ) from None
    rows = meta.num_rows
    if rows > opts.max_rows:
        raise LoadError(f"{name}: {rows} rows, more than the limit max_rows={opts.max_rows}")
    if rows == 0:
        raise LoadError(f"{name}: no data rows")
    raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if raw > opts.max_bytes:
        raise LoadError(
            f"{name}: {raw} bytes uncompressed, more than the limit max_bytes={opts.max_bytes}"
        )
    if len(labels) > opts.max_columns:
        raise LoadError(
            f"{name}: {len(labels)} columns, more than the limit max_columns={opts.max_columns}",
            code="unsupported_file",
        )
    item.parquet_rows, item.parquet_bytes = rows, size
    item.labels = labels
    item.sha256 = _sha256_file(item.path)


def _file_stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _validate(item: _Input, opts: LoadOptions, tmpdir: Path) -> None:
    """Validate one file completely (Python only)."""
    item.stat = _file_stat(item.path)
    if item.fmt == "parquet":
        _scan_parquet(item, opts)
        return
    scan = scan_csv(
        item.path, item.path.name, opts, tmpdir, compressed=item.fmt == "csv.gz", tab=item.tab
    )
    item.scan, item.sha256, item.labels = scan, scan.sha256, scan.labels


# --------------------------------------------------------------------------------------------
# database


def _connect(db: Path) -> duckdb.DuckDBPyConnection:
    """Open the writer connection; a lock held elsewhere becomes a clear LoadError.

    Checkpoints of this connection do not vacuum: the loader never deletes rows of a user table
    (a replaced table is dropped whole), so merging row groups would only rewrite a freshly
    loaded table a second time (seconds for millions of rows). No progress bar is printed.
    """
    try:
        con = duckdb.connect(str(db), config={"autoinstall_known_extensions": False})
        con.execute("SET max_vacuum_tasks = 0")
        con.execute("SET enable_progress_bar = false")
        return con
    except duckdb.IOException as e:
        if "lock" in str(e).lower():
            raise LoadError(
                f"database {db.name} is in use by another process; close it and retry",
                code="database_error",
            ) from None
        raise LoadError(
            f"database {db.name} cannot be opened: {duck_message(e)}", code="database_error"
        ) from None
    except duckdb.Error as e:
        raise LoadError(
            f"database {db.name} cannot be opened: {duck_message(e)}", code="database_error"
        ) from None


def _main_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_schema = 'main'"
    ).fetchall()
    return {r[0].lower() for r in rows}


def _decide(
    con: duckdb.DuckDBPyConnection, inputs: list[_Input], reading: dict[str, str | bool]
) -> None:
    """Set each input's status against what the database already holds: a file is
    ``unchanged`` when its bytes and the options that say how to read them (``reading``) are."""
    loads = read_catalog(con).loads
    existing = _main_tables(con)
    for item in inputs:
        rec = loads.get(item.table)
        if rec is None:
            if item.table in existing:
                raise LoadError(
                    f"{item.path.name}: table {item.table} already exists in the database and "
                    "was not loaded from a file; rename the file"
                )
            continue
        if rec.file_name != item.path.name:
            raise LoadError(
                f"{item.path.name}: table {item.table} already holds {rec.file_name} "
                f"(loaded from {rec.source}); rename one of the files"
            )
        same_reading = rec.reading == (reading if item.fmt != "parquet" else {})
        if rec.sha256 == item.sha256 and same_reading and item.table in existing:
            item.status, item.record = "unchanged", rec
        else:
            item.status = "replaced"


def _stage(
    con: duckdb.DuckDBPyConnection,
    item: _Input,
    opts: LoadOptions,
    tmpdir: Path,
    target: str,
    *,
    retry: bool = True,
) -> None:
    """Read one input into ``target``, reconcile its rows, and prepare its record.

    ``target`` is the staging table, or with ``retry=False`` (inside the load transaction) the
    final table; see :func:`stage_csv`. A :class:`Reread` leaves the read to try next in
    ``item.plan``.
    """
    names, renames = column_names(item.labels)
    name = item.path.name
    read_path = _safe_path(item, tmpdir)
    if item.scan is not None:
        warnings = item.scan.warnings + renames
        try:
            warnings += stage_csv(
                con, item.scan, read_path, target, names, retry=retry, plan=item.plan
            )
        except Reread as e:
            item.plan = e.plan
            raise
        expected = item.scan.rows
    else:
        warnings = renames
        stage_parquet(con, read_path, name, target, names)
        expected = item.parquet_rows
    if _file_stat(item.path) != item.stat:
        raise LoadError(f"{name}: the file changed while it was being loaded; load it again")
    got = row_count(con, target)
    if got != expected:
        raise LoadError(
            f"{name}: DuckDB parsed {got} rows but the file has {expected} data lines; "
            "nothing was loaded"
        )
    if item.scan is not None:
        warnings += fix_columns(con, target, opts.decimal_comma, opts.date_format)
    if [n for n, _ in column_types(con, target)] != names:
        raise LoadError(f"{name}: DuckDB did not keep the column names; nothing was loaded")
    scan = item.scan
    item.record = LoadRecord(
        table=item.table,
        source=item.source,
        file_name=name,
        sha256=item.sha256,
        format=item.fmt,
        rows=expected,
        bytes=scan.bytes if scan else item.parquet_bytes,
        encoding=scan.encoding if scan else "utf-8",
        delimiter=scan.delimiter if scan else None,
        reading=_reading(opts) if scan else {},
        columns=[ColumnInfo(name=n, label=lb) for n, lb in zip(names, item.labels, strict=True)],
        warnings=warnings,
        loaded_at=datetime.now(UTC),
    )


def _reading(opts: LoadOptions) -> dict[str, str | bool]:
    """The options given that change how a file is read (not the limits)."""
    given = {k: getattr(opts, k) for k in ("encoding", "delimiter", "decimal_comma", "date_format")}
    return {k: v for k, v in given.items() if v is not None}


def _safe_path(item: _Input, tmpdir: Path) -> Path:
    """A path DuckDB reads literally: the UTF-8 copy, or a symlink with a plain name.

    DuckDB treats ``*``, ``?``, ``[`` and ``{`` in a path as a glob; user file names never
    reach it.
    """
    if item.scan is not None and item.scan.read_path is not None:
        return item.scan.read_path
    suffix = ".parquet" if item.fmt == "parquet" else ".csv"
    link = Path(tempfile.mkdtemp(dir=tmpdir)) / f"input{suffix}"
    target = item.path.resolve()
    try:
        link.symlink_to(target)
    except OSError:
        if any(ch in str(target) for ch in "*?[]{}"):
            raise LoadError(
                f"{item.path.name}: file names with * ? [ ] {{ }} cannot be loaded here; "
                "rename the file"
            ) from None
        return target
    return link


def _load_direct(
    con: duckdb.DuckDBPyConnection, items: list[_Input], opts: LoadOptions, tmpdir: Path
) -> None:
    """Read every input straight into ``main``, profile and commit, all in one transaction.

    Raises:
        Reread: A file needs a second read, which a transaction cannot retry; the caller rolls
            back and uses :func:`_load_staged`.
    """
    con.execute("BEGIN TRANSACTION")
    ensure_catalog(con)
    for item in items:
        target = f"main.{q(item.table)}"
        con.execute(f"DROP TABLE IF EXISTS {target}")
        _stage(con, item, opts, tmpdir, target, retry=False)
        assert item.record is not None
        write_load(con, item.record)
    profile_database(con, tables=[item.table for item in items])
    con.execute("COMMIT")


def _load_staged(
    con: duckdb.DuckDBPyConnection, items: list[_Input], opts: LoadOptions, tmpdir: Path
) -> None:
    """Read every input into an in-memory staging table (auto-commit, so a read can be
    retried), then copy them into ``main`` with their records and profiles in one transaction."""
    con.execute(f"ATTACH ':memory:' AS {q(_STAGE)}")
    for item in items:
        _stage(con, item, opts, tmpdir, f"{q(_STAGE)}.{q(item.table)}")
    con.execute("BEGIN TRANSACTION")
    ensure_catalog(con)
    for item in items:
        assert item.record is not None
        con.execute(f"DROP TABLE IF EXISTS main.{q(item.table)}")
        con.execute(f"CREATE TABLE main.{q(item.table)} AS FROM {q(_STAGE)}.{q(item.table)}")
        write_load(con, item.record)
    profile_database(con, tables=[item.table for item in items])
    con.execute("COMMIT")


def _write(inputs: list[_Input], db: Path, opts: LoadOptions, tmpdir: Path) -> None:
    """Load what changed into a copy of the database and put the copy in its place once all of
    it has committed; on any failure the file is left exactly as it was.

    Rolling back in place is not enough: the blocks a large transaction wrote stay in the file
    after a rollback, so it would come out bigger. The original stays open, holding DuckDB's
    writer lock, until the copy has replaced it.
    """
    target = db.resolve()  # a symlinked database is replaced where it lives
    if not target.parent.is_dir():
        raise LoadError(
            f"database {db.name}: folder {target.parent} does not exist", code="database_error"
        )
    original = _connect(target) if target.exists() else None
    try:
        if original is not None:
            _decide(original, inputs, _reading(opts))
        todo = [item for item in inputs if item.status != "unchanged"]
        if todo:
            _load_into_copy(original, target, todo, opts, tmpdir)
    except duckdb.Error as e:
        raise LoadError(
            f"database {db.name}: load failed, nothing was changed: {duck_message(e)}",
            code="database_error",
        ) from None
    except OSError as e:
        raise LoadError(
            f"database {db.name}: load failed, nothing was changed: {e.strerror or e}",
            code="database_error",
        ) from None
    finally:
        if original is not None:
            original.close()


def _load_into_copy(
    original: duckdb.DuckDBPyConnection | None,
    target: Path,
    todo: list[_Input],
    opts: LoadOptions,
    tmpdir: Path,
) -> None:
    """Copy ``target`` (when it exists) into a scratch folder beside it, load ``todo`` into the
    copy and move the copy over ``target``; the scratch folder goes in every case."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.loading-", dir=target.parent))
    try:
        work = scratch / target.name
        if original is not None:
            if _wal(target).exists():
                original.execute("CHECKPOINT")  # fold a leftover log into the file first
            shutil.copyfile(target, work)
            shutil.copymode(target, work)
        con = _connect(work)
        try:
            try:
                _load_direct(con, todo, opts, tmpdir)
            except Reread:
                _rollback(con)
                _load_staged(con, todo, opts, tmpdir)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        _swap(work, target, replace=original is not None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _wal(db: Path) -> Path:
    """DuckDB's write-ahead log of ``db``."""
    return db.with_name(db.name + ".wal")


def _swap(work: Path, target: Path, *, replace: bool) -> None:
    """Move the loaded copy to ``target`` in one rename, over the original when ``replace``,
    else only if no other process has created ``target`` meanwhile."""
    if _wal(work).exists() or (replace and _wal(target).exists()):
        raise LoadError(
            f"database {target.name}: a write-ahead log was left after the load; nothing was "
            "changed",
            code="database_error",
        )
    if replace:
        os.replace(work, target)
    else:
        try:
            os.link(work, target)
        except FileExistsError:
            raise LoadError(
                f"database {target.name} was created by another process during the load; "
                "nothing was loaded",
                code="database_error",
            ) from None
        except OSError:  # a file system without hard links
            os.replace(work, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # no transaction was open


def _result(item: _Input) -> TableResult:
    rec = item.record
    assert rec is not None
    return TableResult(
        table=item.table,
        source=item.source,
        status=item.status,
        rows=rec.rows,
        columns=rec.columns,
        warnings=rec.warnings,
    )


def load_files(
    paths: Sequence[str | Path], db_path: str | Path, options: LoadOptions | None = None
) -> LoadReport:
    """Load CSV/TSV(.gz) and Parquet files into a DuckDB database, all or nothing.

    Args:
        paths: Files and/or directories (recursed, sorted). In directories, files with other
            extensions are skipped and listed; an explicit file with another extension is an
            error.
        db_path: The DuckDB database file (created when missing).
        options: Limits and forced settings; defaults when None.

    Returns:
        One :class:`TableResult` per file (``loaded``, ``replaced`` or ``unchanged``).

    Raises:
        LoadError: The first problem found, naming the file (and line); the database is then
            exactly as it was before the call.
    """
    opts = _resolve_options(options or LoadOptions())
    inputs, skipped = _collect(paths)
    _check_same_table(inputs)
    db = Path(db_path)
    tmpdir = Path(tempfile.mkdtemp(prefix="drilldown-load-"))
    try:
        for item in inputs:
            _validate(item, opts, tmpdir)
        _write(inputs, db, opts, tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return LoadReport(db=str(db_path), tables=[_result(i) for i in inputs], skipped=skipped)


__all__ = ["LoadOptions", "LoadReport", "TableResult", "load_files"]

"""The ``drilldown`` command line.

Every command exits non-zero with a one-line error on bad input. ``drilldown tool`` prints
JSON on stdout: the tool result, or ``{"error": {"code": ..., "message": ...}}`` with exit code 2
for arguments the caller can fix and 1 for anything else.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from sql_tools.output import Figures, dumps, printable

if TYPE_CHECKING:
    from tasks.request import Request

app = typer.Typer(
    name="drilldown",
    help="Explain why a metric moved: load data into DuckDB, then query it through safe tools.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line error to stderr and exit."""
    typer.echo(f"error: {printable(' '.join(message.split()))}", err=True)
    raise typer.Exit(code)


def input_error_code(code: str) -> int:
    """The exit code of an error the caller can fix (2), or of the product's own failure (1)."""
    return 1 if code == "internal" else 2


def store_error_code(exc: Exception) -> int:
    """The exit code of a store error: 2 for settings or a store file the user must fix (move
    aside, point elsewhere), 1 for a store the system or the network keeps from being used
    (busy, unreachable, read-only, a full disk), which may pass."""
    from tasks.store import StoreConfigError, StoreDamaged

    return 2 if isinstance(exc, StoreConfigError | StoreDamaged) else 1


def os_error_line(exc: OSError, out: Path) -> str:
    """The file and the system's reason (a full disk, a file-size limit, a read-only folder)
    for a failed read or write, in one line; without a file named, the output folder."""
    import errno

    where = exc.filename or f"writing in {out}"
    line = f"{where}: {exc.strerror or exc}"
    if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        line += " (free space on its disk or raise the file-size limit, or choose another --out)"
    elif exc.errno in (errno.EROFS, errno.EACCES):
        line += " (make it writable, or choose another --out)"
    return line


def emit_json(payload: Any) -> None:
    """Print JSON to stdout, written as every JSON the product emits (``output.dumps``)."""
    typer.echo(dumps(payload, indent=2))


MaxRows = Annotated[int | None, typer.Option(help="Refuse files with more data rows.")]
MaxBytes = Annotated[
    int | None, typer.Option(help="Refuse files larger than this many bytes (after gunzip).")
]
Encoding = Annotated[
    str | None, typer.Option(help="Source encoding when not UTF-8, e.g. cp1252 or latin-1.")
]
Delimiter = Annotated[str | None, typer.Option(help="Field delimiter (default: detect).")]
DecimalComma = Annotated[
    bool | None,
    typer.Option(
        "--decimal-comma/--no-decimal-comma",
        help="Read 1,5 as 1.5 / read 1,234 as 1234 (default: detect).",
        show_default=False,
    ),
]
DateFormat = Annotated[
    str | None,
    typer.Option(
        help="Format of dates written day and month first, e.g. %m/%d/%Y or %d.%m.%Y "
        "(default: detect when a day above 12 tells)."
    ),
]


def load_options(
    max_rows: int | None,
    max_bytes: int | None,
    encoding: str | None,
    delimiter: str | None,
    decimal_comma: bool | None,
    date_format: str | None,
) -> Any:
    """The ``LoadOptions`` of the options given on the command line (the others default);
    a value the options refuse exits 2."""
    from tasks.ingest.load import LoadOptions

    given = dict(
        max_rows=max_rows, max_bytes=max_bytes, encoding=encoding, delimiter=delimiter,
        decimal_comma=decimal_comma, date_format=date_format,
    )  # fmt: skip
    try:
        return LoadOptions(**{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        fail(f"invalid option: {exc}", 2)


@app.command()
def load(
    data: Annotated[list[Path], typer.Argument(help="CSV, CSV.gz or Parquet files or folders.")],
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to create or update.")],
    max_rows: MaxRows = None,
    max_bytes: MaxBytes = None,
    encoding: Encoding = None,
    delimiter: Delimiter = None,
    decimal_comma: DecimalComma = None,
    date_format: DateFormat = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the load report as JSON.")] = False,
) -> None:
    """Load files into a DuckDB file, one table per file, strictly (all rows or an error)."""
    from sql_tools import SqlToolError
    from tasks.ingest.load import load_files

    options = load_options(max_rows, max_bytes, encoding, delimiter, decimal_comma, date_format)
    try:
        report = load_files(data, db, options)
    except SqlToolError as exc:
        fail(exc.message, input_error_code(exc.code))
    except ValueError as exc:  # option validation
        fail(f"invalid option: {exc}", 2)
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    for t in report.tables:
        typer.echo(
            f"{t.status:9} {printable(t.table)}: {t.rows:,} rows, {len(t.columns)} columns"
            f"  <- {printable(t.source)}"
        )
        for w in t.warnings:
            typer.echo(f"          warning: {printable(w)}")
    for s in report.skipped:
        typer.echo(f"skipped   {printable(s)} (not CSV, CSV.gz or Parquet)")
    typer.echo(f"database  {printable(report.db)}")


@app.command()
def tool(
    name: Annotated[str, typer.Argument(help="Tool name, e.g. metric_compare_periods.")],
    db: Annotated[
        str,
        typer.Option(
            "--db",
            help="DuckDB file written by `drilldown load`, or a postgresql:// URL (read-only).",
        ),
    ],
    args: Annotated[
        str, typer.Option("--args", help="Arguments as a JSON object; '-' reads stdin.")
    ] = "{}",
    timeout: Annotated[float | None, typer.Option(help="Per-query time limit in seconds.")] = None,
) -> None:
    """Run one SQL tool and print its JSON result."""
    from sql_tools import Limits, SqlToolError, ToolInputError, limit_address_space
    from tasks.client_names import resolve_text
    from tasks.ingest.postgres import open_context
    from tasks.tools import call

    raw = sys.stdin.read() if args == "-" else args
    try:
        limits = Limits(timeout_s=timeout) if timeout is not None else Limits()
    except ValueError:
        emit_json(ToolInputError("--timeout must be a positive number of seconds").to_dict())
        raise typer.Exit(2) from None
    limit_address_space(limits.address_space_bytes)
    try:
        with open_context(db, limits) as ctx:  # handles, as `tools --json` lists them, too
            result = call(ctx, name, resolve_text(ctx.schema, name, raw))
            emit_json(result.model_dump(mode="json"))
    except ToolInputError as exc:
        emit_json(exc.to_dict())
        raise typer.Exit(2) from None
    except SqlToolError as exc:
        emit_json(exc.to_dict())
        raise typer.Exit(1) from None


@app.command()
def tools(
    db: Annotated[
        str | None,
        typer.Option(
            "--db", help="With a database (file or postgresql:// URL): enums of its live names."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the Anthropic tool definitions.")
    ] = False,
) -> None:
    """List the SQL tools (or print their definitions as given to Claude)."""
    from sql_tools import SqlToolError
    from tasks.client_names import definitions
    from tasks.ingest.postgres import open_context
    from tasks.tools import TOOLS, anthropic_tools

    if not as_json:
        for t in TOOLS:
            typer.echo(f"{t.name:24} {t.summary}")
        return
    try:
        if db is None:
            emit_json(anthropic_tools())
        else:
            with open_context(db) as ctx:  # names that are not plain as handles
                emit_json(definitions(ctx))
    except SqlToolError as exc:
        fail(exc.message)


@app.command()
def mcp(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file written by `drilldown load`.")],
) -> None:
    """Serve the SQL tools over MCP (stdio), read-only, until stdin closes."""
    from drilldown import mcp_server
    from sql_tools import SqlToolError

    try:
        mcp_server.serve(db)
    except SqlToolError as exc:
        fail(exc.message)


def _investigate(request: Request, prefect: bool | None = None) -> None:
    """Run the investigation ``request`` asks for (the ``investigate`` flow through Prefect when
    asked or when a Prefect API is configured, else in-process without Prefect) and print its
    answer: the result the investigation returns."""

    from sql_tools import SqlToolError
    from tasks.store import StoreError

    out = Path(request.out)
    if not request.offline and not os.environ.get("ANTHROPIC_API_KEY"):
        typer.echo("ANTHROPIC_API_KEY is not set: investigating offline", err=True)
    if prefect is None:
        prefect = bool(os.environ.get("PREFECT_API_URL"))
    from tasks.investigation import investigation

    bar: Any = None
    if sys.stderr.isatty():  # a live bar for people; plain lines for logs and pipes
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(
            TextColumn("hypotheses"), BarColumn(), MofNCompleteColumn(),
            console=Console(stderr=True), transient=True,
        )  # fmt: skip
        bar.start()

    def progress(n: int, total: int, run: dict[str, Any]) -> None:
        o = run["outcome"]
        line = (
            f"  [{n}/{total}] {o['hypothesis']['id']} {o['status']:12} "
            f"{printable(o['hypothesis']['title'])}"
        )
        if bar is None:
            typer.echo(line, err=True)
            return
        if not bar.tasks:
            bar.add_task("hypotheses", total=total)
        bar.update(bar.tasks[0].id, completed=n)
        bar.console.print(line, markup=False, highlight=False)

    if prefect:  # a flow run records its parameters: a URL's password travels apart
        request = request.model_copy(update={"data": [_password_apart(d) for d in request.data]})
    try:
        if prefect:  # a flow run: progress goes to its logger and its progress artifact
            from flows.investigate import investigate

            summary = investigate(request)
        else:  # in-process, without Prefect
            summary = investigation(request, progress)
    except SqlToolError as exc:
        fail(exc.message, input_error_code(exc.code))
    except StoreError as exc:  # the investigation was not remembered; its report is written
        fail(f"{exc}; the report is in {out}", store_error_code(exc))
    except OSError as exc:
        fail(os_error_line(exc, out))
    except ValueError as exc:  # storage locations: bad URL, missing bucket, size/hash mismatch
        fail(str(exc))
    finally:
        if bar is not None:
            bar.stop()
    result = summary["result"]
    c = result["change"]
    verdict = "significant" if c["significant"] else "not significant"
    if c.get("noise_unjudged"):
        verdict = "noise cannot be judged"
    rel = f"{c['relative'] * 100:+.1f}%" if c["relative"] is not None else "n/a"
    p = "n/a" if c["p_value"] is None else f"{c['p_value']:.2g}"
    expression = result["metric"]["expression"]
    said = verdict if c.get("noise_unjudged") else f"{verdict}, p={p}"
    typer.echo(f"{printable(expression)}: {rel} ({said})")
    from sql_tools.words import share_in
    from tasks.report.text import noise_lines

    figures = Figures.of(result)  # the report's formats, and its rule for offsetting moves
    for rc in result["root_causes"]:
        seg = ", ".join(f"{k}={v}" for k, v in rc["segment"].items())
        share = share_in(rc["contribution"], figures)
        typer.echo(f"  root cause: {printable(seg)}  ({rc['effect']}, {share})")
    for line in noise_lines(result):
        typer.echo(f"  {printable(line)}")
    shift = result.get("global_shift")
    if shift:
        share = share_in(shift["contribution"], figures, units=True)
        if shift["effect"] == "data_quality":
            typer.echo(f"  a data problem first: missing data ({share})")
        else:
            typer.echo(f"  everything moved evenly ({shift['effect']}, {share})")
    for d in result["data_quality"]:
        typer.echo(f"  data quality: {printable(d['message'])}")
    if summary.get("kept_locally"):  # the team's store is unreachable: not remembered there yet
        typer.echo(f"kept locally as {summary['run_id']}; `drilldown sync` sends it", err=True)
    elif summary.get("run_id"):
        typer.echo(f"remembered as {summary['run_id']}", err=True)
    typer.echo(f"wrote {printable(out / 'report.md')} and {printable(out / 'result.json')}")


def _password_apart(location: str) -> str:
    """A ``postgresql://`` URL without its password, which goes to ``PGPASSWORD`` (where libpq
    reads it) in this process instead; any other location unchanged."""
    from sql_tools import is_postgres_url, parse_postgres_url, without_password

    if not is_postgres_url(location):
        return location
    password = parse_postgres_url(location).password
    if password:
        os.environ["PGPASSWORD"] = password
    return without_password(location)


@app.command()
def investigate(
    ctx: typer.Context,
    data: Annotated[
        list[str],
        typer.Argument(
            help="CSV/CSV.gz/Parquet files or folders, one .duckdb file, or one "
            "postgresql://user:password@host:port/dbname URL (tables read in place; "
            "?schema=NAME, ?tables=a,b, ?query_timeout=SECONDS)."
        ),
    ],
    metric: Annotated[
        str,
        typer.Option(
            help="sum(x), count(*), count(distinct x), avg(x), a ratio of two, or a metrics.yaml name."
        ),
    ],
    baseline: Annotated[
        str, typer.Option(help="YYYY-MM-DD:YYYY-MM-DD (inclusive), or a period label.")
    ],
    comparison: Annotated[str, typer.Option(help="Same form as --baseline.")],
    table: Annotated[
        str | None, typer.Option(help="Table holding the metric (default: inferred).")
    ] = None,
    time_column: Annotated[
        str | None, typer.Option(help="Date column for date ranges (default: detected).")
    ] = None,
    period_column: Annotated[
        str | None, typer.Option(help="Column whose labels name the periods.")
    ] = None,
    grain: Annotated[
        str | None, typer.Option(help="'day': per-day value averaged over the period.")
    ] = None,
    dimensions: Annotated[
        str | None, typer.Option(help="Columns to search, a,b,users.c (default: all dimensions).")
    ] = None,
    filters: Annotated[
        list[str] | None,
        typer.Option("--filter", help="Row filter such as country=US (repeatable)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for report.md and result.json.")] = Path(
        "drilldown-out"
    ),
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file to load into (default: OUT/data.duckdb).")
    ] = None,
    max_depth: Annotated[
        int | None,
        typer.Option(
            help="Most columns combined in one segment (default: every column while the "
            "segments stay within budget, at least 3)."
        ),
    ] = None,
    min_support: Annotated[
        float | None, typer.Option(help="Smallest volume share of a segment.")
    ] = None,
    metrics_file: Annotated[
        Path | None, typer.Option(help="metrics.yaml with named metrics.")
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            help="Investigate with the offline planner (no network); the default without "
            "ANTHROPIC_API_KEY."
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="Anthropic model (default claude-sonnet-5-5).")
    ] = None,
    remember: Annotated[
        bool,
        typer.Option(help="Recall similar past investigations and remember this one."),
    ] = True,
    source: Annotated[
        str | None,
        typer.Option(
            help="Name of the data's source (e.g. shop-eu): investigations of the same source "
            "share memory as its data changes (default: only investigations of identical data)."
        ),
    ] = None,
    prefect: Annotated[
        bool | None,
        typer.Option(
            "--prefect/--no-prefect",
            help="Run as a Prefect flow run (default: when PREFECT_API_URL is set).",
            show_default=False,
        ),
    ] = None,
    max_rows: MaxRows = None,
    max_bytes: MaxBytes = None,
    encoding: Encoding = None,
    delimiter: Delimiter = None,
    decimal_comma: DecimalComma = None,
    date_format: DateFormat = None,
) -> None:
    """Explain why a metric moved between two periods: report.md and result.json in --out."""
    from tasks.request import Request

    options = load_options(max_rows, max_bytes, encoding, delimiter, decimal_comma, date_format)
    asked = {k: v for k, v in ctx.params.items() if k in Request.model_fields}
    loading = options.model_dump(exclude_unset=True) or None
    _investigate(Request(**asked, load_options=loading), prefect)


@app.command("postgres-role")
def postgres_role(
    table: Annotated[
        list[str] | None,
        typer.Option("--table", help="A table to grant SELECT on (repeatable; default: all)."),
    ] = None,
    schema: Annotated[str, typer.Option(help="The tables' schema.")] = "public",
    role: Annotated[str, typer.Option(help="Name of the role to create.")] = "drilldown_reader",
) -> None:
    """Print the SQL that creates a role which may only read the tables: the only kind of role
    `drilldown investigate postgresql://...` connects as."""
    from sql_tools import role_statements

    typer.echo(role_statements(role, schema, table or None))


@app.command()
def history(
    text: Annotated[str, typer.Argument(help="What happened, in your words.")],
    limit: Annotated[int, typer.Option(help="How many to list.")] = 5,
) -> None:
    """Past investigations similar to TEXT: score, date, metric, periods, root causes, run id.
    The store is only read: a read-only store is read, and none is made where there is none."""
    from tasks.store import StoreError, store_from_config
    from tasks.store.history import format_history, similar_investigations

    if limit < 1:
        fail("--limit must be at least 1", 2)
    try:
        with store_from_config(read_only=True) as store:
            rows = similar_investigations(store, text, k=limit)
    except StoreError as exc:
        fail(f"no past investigations read: {exc}", store_error_code(exc))
    for line in format_history(rows).splitlines():
        typer.echo(printable(line))


@app.command()
def sync() -> None:
    """Send investigations kept locally while Supabase was unreachable."""
    from tasks.store import StoreError, flush_outbox

    try:
        result = flush_outbox()
    except StoreError as exc:
        fail(str(exc), store_error_code(exc))
    typer.echo(printable(result.summary()))
    if result.remaining:
        raise typer.Exit(1)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Folder for report.md and result.json.")] = Path(
        "drilldown-demo"
    ),
) -> None:
    """Investigate the bundled demo data offline: why did revenue fall in the last week?"""
    root = Path(__file__).resolve().parent.parent / "data" / "demo"
    if not root.is_dir():
        fail(f"demo data not found at {root}")
    from tasks.request import Request

    _investigate(
        Request(
            data=[root / "events.csv", root / "users.csv"],
            metric="sum(revenue)",
            table="events",
            time_column="date",
            baseline="2024-03-18:2024-03-24",
            comparison="2024-03-25:2024-03-31",
            out=out,
        )
    )
    typer.echo(f"\nThe report: {printable(out / 'report.md')}")


def main() -> None:
    """Console-script entry point.

    When the command is done and no other thread is running, the process ends right away: the
    exit handlers run and the output is flushed, then the interpreter's teardown, whose garbage
    collection passes over every object still alive (most of a second after a large
    investigation), is skipped. Everything a command writes is closed before it returns.
    """
    try:
        app()
        code: int | str | None = 0
    except SystemExit as e:
        code = e.code
    if threading.active_count() > 1:
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    main()

"""The ``drilldown`` command line.

Every command exits non-zero with a one-line error on bad input. ``drilldown tool`` prints
JSON on stdout: the tool result, or ``{"error": {"code": ..., "message": ...}}`` with exit code 2
for arguments the caller can fix and 1 for anything else.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

app = typer.Typer(
    name="drilldown",
    help="Explain why a metric moved: load data into DuckDB, then query it through safe tools.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

_CONTROL = {i: f"\\x{i:02x}" for i in list(range(0x20)) + [0x7F] if i not in (0x09,)}


def printable(text: object) -> str:
    """Text safe for a terminal: control characters (escape sequences) shown, not executed."""
    return str(text).translate(_CONTROL)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line error to stderr and exit."""
    typer.echo(f"error: {printable(' '.join(message.split()))}", err=True)
    raise typer.Exit(code)


def emit_json(payload: Any) -> None:
    """Print JSON to stdout (control characters are escaped by the encoder)."""
    typer.echo(json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False))


@app.command()
def load(
    data: Annotated[list[Path], typer.Argument(help="CSV, CSV.gz or Parquet files or folders.")],
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to create or update.")],
    max_rows: Annotated[int | None, typer.Option(help="Refuse files with more data rows.")] = None,
    max_bytes: Annotated[
        int | None, typer.Option(help="Refuse files larger than this many bytes (after gunzip).")
    ] = None,
    encoding: Annotated[
        str | None, typer.Option(help="Source encoding when not UTF-8, e.g. cp1252 or latin-1.")
    ] = None,
    delimiter: Annotated[
        str | None, typer.Option(help="Field delimiter (default: detect).")
    ] = None,
    decimal_comma: Annotated[
        bool | None,
        typer.Option(
            "--decimal-comma/--no-decimal-comma", help="Read 1,5 as 1.5 (default: detect)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the load report as JSON.")] = False,
) -> None:
    """Load files into a DuckDB file, one table per file, strictly (all rows or an error)."""
    from sql_tools._errors import SqlToolError
    from tasks.load import LoadOptions, load_files

    overrides = {
        "max_rows": max_rows,
        "max_bytes": max_bytes,
        "encoding": encoding,
        "delimiter": delimiter,
        "decimal_comma": decimal_comma,
    }
    try:
        options = LoadOptions(**{k: v for k, v in overrides.items() if v is not None})
        report = load_files(data, db, options)
    except SqlToolError as exc:
        fail(exc.message)
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
    db: Annotated[Path, typer.Option("--db", help="DuckDB file written by `drilldown load`.")],
    args: Annotated[
        str, typer.Option("--args", help="Arguments as a JSON object; '-' reads stdin.")
    ] = "{}",
    timeout: Annotated[float | None, typer.Option(help="Per-query time limit in seconds.")] = None,
) -> None:
    """Run one SQL tool and print its JSON result."""
    from sql_tools import Limits, SqlToolError, ToolContext, ToolInputError, call
    from sql_tools._context import limit_address_space

    raw = sys.stdin.read() if args == "-" else args
    try:
        limits = Limits(timeout_s=timeout) if timeout is not None else Limits()
    except ValueError:
        emit_json(ToolInputError("--timeout must be a positive number of seconds").to_dict())
        raise typer.Exit(2) from None
    limit_address_space(limits.address_space_bytes)
    try:
        with ToolContext(db, limits) as ctx:
            result = call(ctx, name, raw)
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
        Path | None, typer.Option("--db", help="With a database: enums of its live names.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the Anthropic tool definitions.")
    ] = False,
) -> None:
    """List the SQL tools (or print their definitions as given to Claude)."""
    from sql_tools import TOOLS, SqlToolError, ToolContext, anthropic_tools

    if not as_json:
        for t in TOOLS:
            typer.echo(f"{t.name:24} {t.summary}")
        return
    try:
        if db is None:
            emit_json(anthropic_tools())
        else:
            with ToolContext(db) as ctx:
                emit_json(anthropic_tools(ctx))
    except SqlToolError as exc:
        fail(exc.message)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
